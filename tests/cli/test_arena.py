"""The arena command: bots and agent files as players, search options, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from lostcities.cli.arena import main, make_player, parse_args
from lostcities.eval.arena import MatchResult, play_match
from lostcities.eval.opponents import BOT_NAMES, make_bot


def test_cli_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["committer", "random", "--games", "8", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for label in ("games", "A win rate", "W / D / L", "mean diff", "mean score", "capped"):
        assert label in out
    assert "committer" in out and "random" in out


def test_cli_rejects_an_unknown_bot(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alphago", "random"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err
    assert all(name in err for name in BOT_NAMES)


def test_cli_plays_an_agent_file(
    lost_cities_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = str(lost_cities_checkpoint.parent.parent / "agent.pt")
    assert main([agent, "cautious", "--games", "4", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for label in ("games", "A win rate", "W / D / L", "mean diff", "mean score", "capped"):
        assert label in out
    assert f"A = {agent} [sdcfr, sampled]" in out and "B = cautious" in out


def test_an_agent_file_plays_reproducibly(lost_cities_checkpoint: Path) -> None:
    args = parse_args([str(lost_cities_checkpoint), "random", "--agent", "current"])

    def run() -> MatchResult:
        agent = make_player(str(lost_cities_checkpoint), args, 1)
        return play_match(agent, make_bot("random", 2), games=2, seed=5)

    assert run() == run()


def test_cli_rejects_a_path_that_is_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "agent.pt")
    assert main([missing, "cautious"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: invalid choice {missing!r}")
    assert "bot (random," in err[0] and "agent file or checkpoint" in err[0]


def test_cli_plays_an_agent_file_through_search(
    lost_cities_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = str(lost_cities_checkpoint.parent.parent / "agent.pt")
    assert main([agent, "cautious", "--games", "2", "--search", "4"]) == 0
    assert f"A = {agent} [search(sdcfr), sampled]" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([agent, "cautious", "--search", "-1"])


def test_cli_search_options_reach_the_search(
    lost_cities_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = str(lost_cities_checkpoint.parent.parent / "agent.pt")
    options = ["--search", "4", "--search-candidates", "2", "--search-value-blend", "0.5"]
    player = make_player(agent, parse_args([agent, "cautious", *options]), 1)
    config = player.agent.config
    assert (config.determinizations, config.candidates, config.value_blend) == (4, 2, 0.5)
    assert main([agent, "cautious", "--games", "2", *options]) == 0
    capsys.readouterr()
    # the policy net has no learned advantages: a blend would do nothing, so it is refused
    assert main([agent, "cautious", "--agent", "policy", *options]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--search-value-blend" in err[0] and "'policy'" in err[0]
    with pytest.raises(SystemExit):
        parse_args([agent, "cautious", "--search", "4", "--search-value-blend", "1.5"])
