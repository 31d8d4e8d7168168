"""One command, ``lostcities train|evaluate|arena|play``, beside the ``python -m`` forms;
every command stops a bad value with one line naming the key and exit status 2."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import lostcities
from lostcities.__main__ import COMMANDS, main

ROOT = Path(lostcities.__file__).resolve().parents[1]


def python_m(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ARGV`` on the package under test (not whichever one is installed)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
    )


def test_help_lists_the_four_commands():
    done = python_m("lostcities", "--help")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")]
    assert [name for name in listed if name in COMMANDS] == ["train", "evaluate", "arena", "play"]


def test_a_subcommands_help():
    done = python_m("lostcities", "evaluate", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: lostcities evaluate")
    assert "--versus-iteration" in done.stdout and "--search-candidates" in done.stdout


def test_the_older_module_path_still_runs():
    done = python_m("lostcities.play", "--help")
    assert done.returncode == 0, done.stderr
    assert "AGENT_FILE" in done.stdout and "--seat" in done.stdout


@pytest.mark.parametrize("name", ["evaluate", "arena", "play"])
def test_every_module_path_runs_the_same_main(name: str):
    cli = importlib.import_module(f"lostcities.cli.{name}")
    assert importlib.import_module(f"lostcities.{name}").main is cli.main
    assert COMMANDS[name][0] == cli.__name__


def test_no_or_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]):
    for argv in ([], ["fly"]):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
    assert "invalid choice: 'fly'" in capsys.readouterr().err


def test_the_dispatcher_runs_a_command(capsys: pytest.CaptureFixture[str]):
    assert main(["arena", "cautious", "random", "--games", "2"]) == 0
    assert "A = cautious  vs  B = random" in capsys.readouterr().out


def test_train_hands_the_rest_of_the_line_to_hydra(monkeypatch: pytest.MonkeyPatch):
    train = importlib.import_module("lostcities.train")
    seen = []
    monkeypatch.setattr(train, "main", lambda: seen.append(list(sys.argv)))
    monkeypatch.setattr(sys, "argv", ["lostcities", "train", "game=kuhn", "run.seed=3"])
    assert main() == 0
    assert seen == [["lostcities", "game=kuhn", "run.seed=3"]]


def test_train_through_the_dispatcher_checks_like_training(tmp_path: Path):
    done = python_m("lostcities", "train", "game=kuhn", "run.iterations=0", cwd=tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr.strip().splitlines()[-1] == "error: run.iterations=0: expected an integer >= 1"
    )


def test_the_installed_script_is_the_dispatcher():
    with open(ROOT / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    module, function = scripts["lostcities"].split(":")
    assert getattr(importlib.import_module(module), function) is main


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["evaluate", "run/agent.pt", "--games", "0"], "games=0: expected an even integer >= 2"),
        (
            ["evaluate", "run/agent.pt", "--play", "sampled,clever"],
            "play=[sampled, clever]: expected a non-empty list of distinct names from "
            "sampled, greedy",
        ),
        (
            ["arena", "run/agent.pt", "cautious", "--search", "8", "--search-candidates", "-1"],
            "search.candidates=-1: expected an integer >= 0",
        ),
        (
            ["arena", "cautious", "random", "--agent", "sdcfr"],
            "agent=sdcfr: expected none with two bots (it picks what an agent file plays)",
        ),
        (
            ["play", "run/agent.pt", "--play", "clever"],
            "play=clever: expected one of sampled, greedy",
        ),
        (["play", "run/agent.pt", "--seat", "2"], "seat=2: expected an integer in [0, 1]"),
    ],
)
def test_a_bad_value_stops_every_command_in_one_line(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"error: {line}\n"
