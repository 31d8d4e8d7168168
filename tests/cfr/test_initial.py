"""Initial strategies (sigma_1)."""

from __future__ import annotations

import numpy as np
import pytest

from lostcities.cfr.initial import EXPLORE, lost_cities_heuristic, make_initial_strategy, uniform
from lostcities.eval.agents import StrategyAgent
from lostcities.eval.evaluators import evaluation_match
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Stream


def states(count: int, seed: int = 0):
    """Information states of random Lost Cities positions: features (n, d), masks (n, A)."""
    features, masks = [], []
    choices = Stream(seed)
    while len(features) < count:
        game = LostCitiesGame.from_seed(choices.next64())
        while not game.is_terminal and len(features) < count:
            features.append(game.encode(game.current_player))
            masks.append(game.legal_mask())
            legal = game.legal_actions()
            game.apply(legal[choices.below(len(legal))])
    return np.array(features), np.array(masks)


@pytest.mark.parametrize("strategy", [uniform, lost_cities_heuristic])
def test_strategies_are_distributions_with_full_support(strategy):
    features, masks = states(400)
    sigma = strategy(np.zeros(len(masks), np.int8), features, masks)
    np.testing.assert_allclose(sigma.sum(axis=1), 1.0)
    assert np.all(sigma[masks == 0] == 0)
    assert np.all(sigma[masks == 1] > 0)  # every legal action keeps some probability


def test_heuristic_mostly_follows_one_action():
    features, masks = states(200, seed=1)
    sigma = lost_cities_heuristic(np.zeros(len(masks), np.int8), features, masks)
    assert np.all(sigma.max(axis=1) >= 1 - EXPLORE)


def test_heuristic_beats_random_and_scores_above_zero():
    agent = StrategyAgent("sigma1", lost_cities_heuristic)
    match = evaluation_match(agent, "random", games=60, seed=3, batch_size=60)
    assert match.result.win_rate_ci()[0] > 0.8
    assert np.mean(match.result.scores_a) > 0


def test_unknown_initial_strategy_is_rejected():
    with pytest.raises(ValueError, match="initial_strategy must be one of"):
        make_initial_strategy("clever")
