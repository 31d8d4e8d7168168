"""The progress measures of a Lost Cities run: a search best response's margin against the
agent, and the agent against its own earlier iterations."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LOST_CITIES_TINY, train_run

from lostcities.cfr.initial import lost_cities_heuristic, uniform
from lostcities.eval.agents import StrategyAgent, agents_from_checkpoint
from lostcities.eval.br import best_response_match, head_to_head


def test_the_best_response_exploits_an_agent_that_plays_at_random():
    """Against uniform play the searcher's one-step deviations (valued by playouts) win
    nearly every game: the margin is large where the agent is weak."""
    weak = StrategyAgent("uniform", uniform)
    match = best_response_match(weak, weak, 8, seed=3, redeals=4, candidates=3)
    assert match.result.games == 8 and match.result.win_rate() >= 0.875
    assert match.result.mean_diff() > 40


def test_head_to_head_tells_the_stronger_agent_and_pairs_the_deals():
    strong = StrategyAgent("sigma1", lost_cities_heuristic)
    weak = StrategyAgent("uniform", uniform)
    match = head_to_head(strong, weak, 20, seed=4)
    assert match.result.win_rate() >= 0.9
    again = head_to_head(strong, weak, 20, seed=4)
    assert again.result.diffs == match.result.diffs  # keyed streams: reproducible


def test_the_run_logs_its_best_response_margin_and_head_to_head(tmp_path):
    rows = train_run([*LOST_CITIES_TINY, "run.iterations=2"], tmp_path)
    first, second = rows
    for row in rows:
        assert row["eval/br/score_diff_low"] <= row["eval/br/score_diff"]
        assert 0 <= row["eval/br/win_rate"] <= 1
    assert "eval/h2h/win_rate" not in first  # nothing earlier than iteration 1 to meet
    assert 0 <= second["eval/h2h/win_rate"] <= 1


def test_earlier_agents_of_a_file(lost_cities_checkpoint):
    """After iteration 1 single Deep CFR is sigma_2 alone: the current strategy then."""
    first = agents_from_checkpoint(lost_cities_checkpoint, ["sdcfr", "current"], 1, iteration=1)
    assert len(first["sdcfr"].strategies) == 1
    last = agents_from_checkpoint(lost_cities_checkpoint, ["sdcfr", "current"], 1)
    assert len(last["sdcfr"].strategies) == 2
    from lostcities.games.lost_cities import LostCitiesGame

    game = LostCitiesGame.from_seed(5)
    args = (np.array([0]), np.zeros(1, np.int8), game.encode(0)[None], game.legal_mask()[None])
    np.testing.assert_array_equal(first["sdcfr"].probs(*args), first["current"].probs(*args))
    with pytest.raises(ValueError, match="iteration 3 is not one of its iterations 1..2"):
        agents_from_checkpoint(lost_cities_checkpoint, ["sdcfr"], 1, iteration=3)
    with pytest.raises(ValueError, match="policy net of iteration 1 is not kept"):
        agents_from_checkpoint(lost_cities_checkpoint, ["policy"], 1, iteration=1)
