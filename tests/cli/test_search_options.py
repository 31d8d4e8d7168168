"""The search's command-line options: parsed into a SearchConfig, bad values named."""

from __future__ import annotations

import argparse

import pytest

from lostcities.cfr.initial import lost_cities_heuristic
from lostcities.cli.search_options import add_search_arguments, search_config_from_args, searched
from lostcities.eval.agents import StrategyAgent
from lostcities.eval.search import SearchAgent, SearchConfig


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_search_arguments(parser)
    return parser.parse_args(argv)


def test_no_search_is_none_and_the_defaults_are_the_configs():
    assert search_config_from_args(parse(), 7) is None
    config = search_config_from_args(parse("--search", "3"), 7)
    assert config == SearchConfig(determinizations=3, seed=7)


def test_every_option_reaches_the_config():
    args = parse(
        *("--search", "4", "--search-candidates", "2", "--search-rank", "regret"),
        *("--search-margin", "1.5", "--search-keep", "sampled", "--search-rollout", "blueprint"),
        *("--search-rollout-play", "sampled", "--search-blueprint-plies", "3"),
        *("--search-value-blend", "0.25"),
    )
    assert search_config_from_args(args, 1) == SearchConfig(
        determinizations=4,
        candidates=2,
        rank="regret",
        margin=1.5,
        keep="sampled",
        rollout="blueprint",
        rollout_play="sampled",
        blueprint_plies=3,
        value_blend=0.25,
        seed=1,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--search", "-1"), "--search must be >= 0, got -1"),
        (("--search", "2", "--search-candidates", "-1"), "--search: candidates must be >= 0"),
        (("--search", "2", "--search-value-blend", "1.5"), r"--search: value_blend must be in"),
    ],
)
def test_bad_values_name_the_option(argv, message):
    with pytest.raises(ValueError, match=message):
        search_config_from_args(parse(*argv), 0)


def test_a_blend_needs_learned_advantages():
    sigma1 = StrategyAgent("sigma1", lost_cities_heuristic)
    assert isinstance(searched(sigma1, SearchConfig(determinizations=2)), SearchAgent)
    with pytest.raises(ValueError, match="--search-value-blend: agent 'sigma1' has no"):
        searched(sigma1, SearchConfig(determinizations=2, value_blend=0.5))
