"""The training run's evaluators and the evaluation's games: paired with sigma_1 game by
game, the in-run metrics, single Deep CFR's exploitability on a small game."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LOST_CITIES_TINY, train_run

from lostcities.cfr.initial import lost_cities_heuristic
from lostcities.eval.agents import StrategyAgent, choose_actions
from lostcities.eval.evaluators import evaluation_match
from lostcities.eval.match import arena_deal_seed, paired_gain
from lostcities.eval.opponents import make_bot
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Purpose, Stream, stream_key


def test_agent_matches_pair_up_on_deals_seats_and_bot_seeds():
    sigma1 = StrategyAgent("sigma1", lost_cities_heuristic)
    a = evaluation_match(sigma1, "cautious", games=16, seed=5, batch_size=16, play="greedy")
    b = evaluation_match(sigma1, "cautious", games=16, seed=5, batch_size=5, play="greedy")
    assert a.result == b.result  # batching is not part of the pairing
    gain = paired_gain(a.result, b.result)
    assert gain.win_rate == 0 and gain.score_diff == 0


def test_game_i_is_keyed_by_the_match_seed_and_i():
    """Game i: deal arena_deal_seed(seed, i), the agent in seat i % 2, its choices from the
    stream (seed, i, 2, 0, EVALUATION), a bot of its own seeded (seed, i, 1, 0, EVALUATION):
    a plain replay with those keys gives the match's scores."""
    seed, games = 5, 6
    sigma1 = StrategyAgent("sigma1", lost_cities_heuristic)
    match = evaluation_match(sigma1, "random", games, seed, batch_size=games, play="sampled")
    for i in range(games):
        game = LostCitiesGame.from_seed(arena_deal_seed(seed, i))
        bot = make_bot("random", stream_key(seed, i, 1, 0, Purpose.EVALUATION))
        choices = Stream(stream_key(seed, i, 2, 0, Purpose.EVALUATION))
        while not game.is_terminal:
            player, mask = game.current_player, game.legal_mask()[None]
            if player == i % 2:
                probs = lost_cities_heuristic(
                    np.array([player], np.int8), game.encode(player)[None], mask
                )
                game.apply(choose_actions(probs, mask, "sampled", [choices])[0])
            else:
                game.apply(bot.act(game))
        scores = game.scores()
        assert (match.result.scores_a[i], match.result.scores_b[i]) == (
            scores[i % 2],
            scores[1 - i % 2],
        )


def test_in_run_evaluation_logs_the_paired_gain_over_sigma1(tmp_path):
    """A warm start so large that sigma's argmax is sigma_1's: greedy play of the current
    strategy is then sigma_1 itself, so the paired gain must be exactly zero."""
    overrides = [
        *LOST_CITIES_TINY,
        "run.iterations=1",
        "traversal.warm_start=1e9",
        "eval.agent=current",
        "eval.play=greedy",
    ]
    final = train_run(overrides, tmp_path)[-1]
    assert final["eval/cautious/gain_win_rate"] == 0
    assert final["eval/cautious/gain_score_diff"] == 0
    assert final["eval/cautious/win_rate0"] == final["eval/cautious/sigma1_win_rate"]


def test_leduc_single_deep_cfr_exploitability_is_logged(tmp_path):
    """After one iteration single Deep CFR's mixture is sigma_2 alone: the current strategy."""
    overrides = [
        "game=leduc",
        "run.iterations=1",
        "eval.every=1",
        "traversal.traversals_per_player=50",
        "optim.advantage_steps=20",
        "optim.strategy_steps=20",
        "run.progress=false",
        "tracking.enabled=false",
    ]
    final = train_run(overrides, tmp_path)[-1]
    assert final["eval/sdcfr_exploitability"] == pytest.approx(
        final["eval/current_exploitability"], abs=1e-9
    )
