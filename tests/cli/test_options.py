"""The command-line adapter: a checked dataclass becomes options (names, defaults, lists,
bools, a nested section's prefix, help from the docstrings) and parses back into it, bad
values failing in training's one line; the commands' search options reach SearchConfig."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import pytest

from lostcities.cfr.initial import lost_cities_heuristic
from lostcities.cli.agent_options import searched
from lostcities.cli.config import ArenaConfig, EvaluateConfig, PlayConfig
from lostcities.cli.options import build_parser, options, parse, positional, switched
from lostcities.config_checks import CrossRule, field_rules
from lostcities.config_rules import (
    boolean,
    checked,
    integer,
    label,
    names_from,
    one_of,
    positive,
    texts,
)
from lostcities.eval.agents import StrategyAgent
from lostcities.eval.search import SearchAgent, SearchConfig


@dataclass
class Inner:
    depth: int = checked(3, integer(1))
    """How deep to look."""
    mode: str = checked("fast", one_of(("fast", "slow")))
    """``fast`` or ``slow``."""
    salt: int = checked(0, integer(0))
    """Set by the command where the section is switched."""


@dataclass
class Crafted:
    files: list[str] = positional(texts(), "FILE")
    """Files to read."""
    colors: list[str] = checked(
        rule=names_from(("red", "blue"), empty=False), factory=lambda: ["red"]
    )
    """Colors to use."""
    size: int = checked(2, integer(1))
    """How many, 50% of the time."""
    ratio: float = checked(0.5, positive())
    """A share."""
    verbose: bool = checked(False, boolean())
    """Say more."""
    name: str = checked("x", label())
    """A name."""
    inner: Inner = field(default_factory=Inner)
    """Always there."""
    extra: Inner | None = switched("depth", hidden=("salt",))
    """Looked at only when asked: K deep."""


def run(*argv: str, cross: tuple[CrossRule, ...] = ()) -> Crafted:
    return parse(Crafted, list(argv), prog="crafted", description="A test.", cross=cross)


def test_fields_become_options():
    opts = {o.key: o for o in options(Crafted)}
    assert list(opts) == [
        *("files", "colors", "size", "ratio", "verbose", "name"),
        *("inner.depth", "inner.mode", "inner.salt", "extra", "extra.mode"),
    ]
    assert opts["files"].flag is None and opts["files"].many and opts["files"].metavar == "FILE"
    assert (opts["colors"].flag, opts["colors"].default) == ("--colors", ["red"])
    assert (opts["inner.depth"].flag, opts["inner.depth"].default) == ("--inner-depth", 3)
    assert (opts["extra"].flag, opts["extra"].default) == ("--extra", 0)
    assert opts["size"].help == "How many, 50% of the time."
    assert opts["extra"].help == "Looked at only when asked: K deep."
    assert opts["extra.mode"].help == "``fast`` or ``slow``."


def test_defaults_parse_back():
    assert run("a") == Crafted(files=["a"])
    assert run("a").extra is None


def test_every_option_reaches_the_config():
    cfg = run(
        *("a", "b", "--colors", "blue,red", "--size", "5", "--ratio", "0.25", "--verbose"),
        *("--name", "y", "--inner-depth", "7", "--inner-mode", "slow"),
        *("--extra", "4", "--extra-mode", "slow"),
    )
    assert cfg == Crafted(
        files=["a", "b"],
        colors=["blue", "red"],
        size=5,
        ratio=0.25,
        verbose=True,
        name="y",
        inner=Inner(depth=7, mode="slow"),
        extra=Inner(depth=4, mode="slow"),
    )
    off = run("a", "--no-verbose", "--extra", "0", "--extra-mode", "slow")
    assert off.verbose is False and off.extra is None


def test_help_is_the_docstring_with_the_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside a line
    text = build_parser(options(Crafted), "crafted", "A test.").format_help()
    assert "--size N" in text and "How many, 50% of the time. [default: 2]" in text
    assert "--colors TEXT,..." in text and "Colors to use. [default: red]" in text
    assert "--verbose, --no-verbose" in text and "Say more. [default: false]" in text
    assert "extra options:" in text and "--extra K" in text and "--extra-mode TEXT" in text
    assert "--extra-salt" not in text and "--extra-depth" not in text  # hidden, switch


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--size", "0"], "size=0: expected an integer >= 1"),
        (["--size", "two"], "size=two: expected an integer >= 1"),
        (["--ratio", "nan"], "ratio=nan: expected a finite number > 0"),
        (
            ["--colors", "red,green"],
            "colors=[red, green]: expected a non-empty list of distinct names from red, blue",
        ),
        (["--inner-mode", "medium"], "inner.mode=medium: expected one of fast, slow"),
        (["--extra", "-1"], "extra=-1: expected 0 (no extra) or an integer >= 1"),
        (["--extra-mode", "x"], "extra.mode=x: expected one of fast, slow"),  # even when off
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(argv, line, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as stop:
        run("a", *argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"error: {line}\n"


def test_cross_rules_run_after_the_fields(capsys: pytest.CaptureFixture[str]):
    one_per_file = CrossRule(
        "size", lambda c: c.size <= len(c.files), lambda c: f"at most {len(c.files)} (per file)"
    )
    assert run("a", "b", "--size", "2", cross=(one_per_file,)).size == 2
    with pytest.raises(SystemExit) as stop:
        run("a", "--size", "2", cross=(one_per_file,))
    assert stop.value.code == 2
    assert capsys.readouterr().err == "error: size=2: expected at most 1 (per file)\n"


@pytest.mark.parametrize("schema", [EvaluateConfig, ArenaConfig, PlayConfig])
def test_every_command_field_has_a_rule_and_a_docstring(schema):
    field_rules(schema)  # TypeError for a field without a rule
    assert all(option.help for option in options(schema))


# --- the commands' search options ----------------------------------------------------------


def test_the_search_options_are_searchconfigs_fields():
    keys = {o.key for o in options(PlayConfig) if o.key.startswith("search.")}
    own = {f"search.{f.name}" for f in fields(SearchConfig)}
    assert keys == own - {"search.determinizations", "search.seed"}  # --search K; per player


def test_no_search_is_none_and_the_defaults_are_the_configs():
    assert parse(PlayConfig, ["f"], prog="p", description="").search is None
    cfg = parse(PlayConfig, ["f", "--search", "3"], prog="p", description="")
    assert cfg.search == SearchConfig(determinizations=3)


def test_every_search_option_reaches_the_config():
    argv = [
        *("a", "b", "--search", "4", "--search-candidates", "2", "--search-rank", "regret"),
        *("--search-margin", "1.5", "--search-keep", "sampled", "--search-rollout", "blueprint"),
        *("--search-rollout-play", "sampled", "--search-blueprint-plies", "3"),
        *("--search-value-blend", "0.25"),
    ]
    assert parse(ArenaConfig, argv, prog="a", description="").search == SearchConfig(
        determinizations=4,
        candidates=2,
        rank="regret",
        margin=1.5,
        keep="sampled",
        rollout="blueprint",
        rollout_play="sampled",
        blueprint_plies=3,
        value_blend=0.25,
    )


def test_a_blend_needs_learned_advantages():
    sigma1 = StrategyAgent("sigma1", lost_cities_heuristic)
    assert isinstance(searched(sigma1, SearchConfig(determinizations=2)), SearchAgent)
    with pytest.raises(ValueError, match="--search-value-blend: agent 'sigma1' has no"):
        searched(sigma1, SearchConfig(determinizations=2, value_blend=0.5))


def test_a_field_without_a_rule_is_refused():
    @dataclass
    class Loose:
        size: int = 3

    with pytest.raises(TypeError, match="Loose.size is declared without a rule"):
        options(Loose)
