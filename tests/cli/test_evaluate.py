"""The evaluate command: every agent, play mode and bot paired with sigma_1, search, and
one-line errors."""

from __future__ import annotations

import json

import pytest

from lostcities.cli import evaluate as evaluate_cli
from lostcities.eval.match import MatchResult


def result(diffs: list[int]) -> MatchResult:
    return MatchResult("a", "b", tuple(diffs), tuple(0 for _ in diffs), 0)


def test_evaluate_command_reports_every_row(lost_cities_checkpoint, tmp_path, capsys):
    out = tmp_path / "report.json"
    path = str(lost_cities_checkpoint)
    argv = [path, path, "--games", "8", "--bots", "cautious", "--json", str(out)]
    assert evaluate_cli.main(argv) == 0
    table = capsys.readouterr().out
    assert "2 checkpoint(s), 8 games per bot" in table
    rows = json.loads(out.read_text())["rows"]
    assert {(r["agent"], r["play"]) for r in rows} == {
        (a, p) for a in ("policy", "current", "sdcfr") for p in ("greedy", "sampled")
    }
    assert all(len(r["win_rate"]) == 2 for r in rows)


def test_evaluate_command_searches_agents_and_sigma1_alike(
    lost_cities_checkpoint, tmp_path, capsys
):
    out = tmp_path / "report.json"
    path = str(lost_cities_checkpoint)
    argv = [path, "--games", "4", "--bots", "cautious", "--agents", "sdcfr", "--search", "3"]
    options = ["--search-keep", "sampled", "--search-rank", "regret", "--json", str(out)]
    assert evaluate_cli.main([*argv, *options]) == 0
    table = capsys.readouterr().out
    assert "ms/move" in table and "determinizations=3" in table and "keep='sampled'" in table
    assert "rank='regret'" in table
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["agent"], row["play"], row["bot"]) == ("sdcfr", "search", "cautious")
    assert len(row["search_ms_per_move"]) == 1 and row["search_ms_per_move"][0] > 0
    with pytest.raises(SystemExit, match="2"):
        evaluate_cli.main([path, "--search", "2", "--search-candidates", "-1"])


def test_evaluate_command_rejects_bad_input(lost_cities_checkpoint, tmp_path, capsys):
    with pytest.raises(SystemExit, match="2"):
        evaluate_cli.main([str(lost_cities_checkpoint), "--agents", "policy,clever"])
    assert capsys.readouterr().err == (
        "error: agents=[policy, clever]: expected a non-empty list of distinct names from "
        "policy, current, sdcfr\n"
    )
    assert evaluate_cli.main([str(tmp_path / "missing.pt")]) == 2
    assert "missing.pt" in capsys.readouterr().err


def test_evaluate_pairs_every_checkpoint_with_the_one_sigma1_it_shares():
    agent, base = result([3, -1]), result([1, 1])
    key = ("sdcfr", "greedy", "cautious")
    baseline = {
        "initial_strategy": "lost_cities_heuristic",
        ("sigma1", "greedy", "cautious"): (base, None),
    }
    same = {"initial_strategy": "lost_cities_heuristic", key: (agent, None)}
    assert evaluate_cli.pair_with_baseline([same], [baseline]) == [{key: (agent, base, None)}]
    other = {"initial_strategy": "uniform", key: (agent, None)}
    with pytest.raises(ValueError, match="different initial strategies"):
        evaluate_cli.pair_with_baseline([same, other], [baseline])


def test_evaluate_pairs_a_run_with_its_own_earlier_iteration(
    lost_cities_checkpoint, tmp_path, capsys
):
    out = tmp_path / "report.json"
    path = str(lost_cities_checkpoint)
    argv = [path, "--agents", "sdcfr", "--play", "sampled", "--bots", "cautious", "--games", "6"]
    options = ["--versus-iteration", "1", "--br-games", "2", "--json", str(out)]
    assert evaluate_cli.main([*argv, *options]) == 0
    table = capsys.readouterr().out
    assert "gain = agent minus the run's agent after iteration 1" in table
    assert "best response (2 games per agent)" in table
    rows = json.loads(out.read_text())["rows"]
    matches, (br,) = rows[:-1], rows[-1:]
    assert len(matches) == 1 and "br_margin_change" in br
    # an iteration against itself: every game's difference is zero
    assert evaluate_cli.main([*argv, "--iteration", "1", "--versus-iteration", "1"]) == 0
    assert "+0.000 [+0.000, +0.000]" in capsys.readouterr().out
    assert evaluate_cli.main([*argv, "--iteration", "5"]) == 2
    assert "iteration 5 is not one of its iterations 1..2" in capsys.readouterr().err
