"""The arena command: bots and agent files as players, search options, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lostcities.cli.agent_options import load_agent
from lostcities.cli.arena import main, make_player, parse_args
from lostcities.eval.agents import choose_actions
from lostcities.eval.match import MatchResult, arena_deal_seed, play_match
from lostcities.eval.opponents import BOT_NAMES, make_bot
from lostcities.eval.players import BotPlayer
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Purpose, Stream, stream_key


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
        return play_match(agent, BotPlayer.shared(make_bot("random", 2)), games=2, seed=5).result

    assert run() == run()


def test_an_agent_files_game_i_is_keyed_by_its_slot_and_i(lost_cities_checkpoint: Path) -> None:
    """Player B an agent file: its single Deep CFR draws and game i's choices keyed by
    stream_key(seed, 2), i and the slot; player A a bot with one stream for the match. A
    plain replay with those keys gives the match's scores."""
    path, seed, games = str(lost_cities_checkpoint), 3, 4
    args = parse_args(["random", path, "--agent", "sdcfr", "--seed", str(seed)])
    bot = make_player("random", args, 1)
    result = play_match(bot, make_player(path, args, 2), games, seed).result
    agent = load_agent(path, "sdcfr", stream_key(seed, 2))
    bot = make_bot("random", stream_key(seed, 1))
    for i in range(games):
        game = LostCitiesGame.from_seed(arena_deal_seed(seed, i))
        choices = Stream(stream_key(stream_key(seed, 2), i, 2, 0, Purpose.ARENA_AGENT))
        while not game.is_terminal:
            player, mask = game.current_player, game.legal_mask()[None]
            if player == i % 2:
                game.apply(bot.act(game))
                continue
            row = (np.array([i]), np.array([player], np.int8), game.encode(player)[None], mask)
            game.apply(choose_actions(agent.probs(*row), mask, "sampled", [choices])[0])
        scores = game.scores()
        assert (result.scores_a[i], result.scores_b[i]) == (scores[i % 2], scores[1 - i % 2])


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


@pytest.mark.parametrize("max_turns", ["0", "30001"])
def test_cli_rejects_a_turn_cap_out_of_range(max_turns: str, capsys) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["cautious", "random", "--max-turns", max_turns])
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: max_turns={max_turns}: expected an integer in [1, 30000]"]
