"""Agents of a trained run: kinds, play modes, checkpoints and agent files."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities.cfr.initial import lost_cities_heuristic
from lostcities.checkpoint import load_checkpoint, save_checkpoint
from lostcities.eval.agents import (
    SingleDeepCFRAgent,
    agents_from_checkpoint,
    choose_actions,
)
from lostcities.eval.opponents import make_bot
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Stream


def test_choose_actions_greedy_takes_the_most_probable_legal_action():
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.9, 0.05, 0.05]])
    masks = np.array([[1, 1, 1], [0, 1, 1], [0, 1, 1]], dtype=np.uint8)
    # row 1: a tie among legal actions goes to the lowest index; row 2: mass on an
    # illegal action is never chosen
    assert choose_actions(probs, masks, "greedy", []) == [1, 1, 1]
    streams = [Stream(i) for i in range(3)]
    sampled = choose_actions(probs, masks, "sampled", streams)
    assert all(masks[i, a] for i, a in enumerate(sampled))
    with pytest.raises(ValueError, match="play mode"):
        choose_actions(probs, masks, "argmax", streams)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.floats(0.0, 1.0, allow_subnormal=False), min_size=6, max_size=6),
        min_size=1,
        max_size=5,
    ),
    mask_bits=st.integers(0, 2**30 - 1),
    key=st.integers(0, 2**63 - 1),
)
def test_sampled_choice_is_stream_choice_row_by_row(rows, mask_bits, key):
    probs = np.array(rows)
    masks = np.array(
        [[(mask_bits >> (6 * i + j)) & 1 for j in range(6)] for i in range(len(rows))],
        dtype=np.uint8,
    )
    masks[:, 0] = 1
    probs[:, 0] = np.maximum(probs[:, 0], 1e-3)  # every row has a legal action with mass
    got = choose_actions(probs, masks, "sampled", [Stream(key + i) for i in range(len(rows))])
    legal = probs * masks
    want = [Stream(key + i).choice(list(row)) for i, row in enumerate(legal)]
    assert got == want


def one_hot_strategy(action: int):
    def strategy(players, features, masks):
        out = np.zeros(masks.shape)
        out[:, action] = 1.0
        return out

    return strategy


def test_single_deep_cfr_plays_one_iteration_per_game_with_linear_weights():
    agent = SingleDeepCFRAgent([one_hot_strategy(t) for t in range(4)], seed=7)
    games = np.arange(4000)
    picks = np.array([agent.iteration_of(g) for g in games])
    assert np.array_equal(picks, [agent.iteration_of(g) for g in games])  # fixed per game
    share = np.bincount(picks, minlength=4) / len(picks)
    np.testing.assert_allclose(share, np.arange(1, 5) / 10, atol=0.025)
    # each row is answered by its own game's iteration
    masks = np.ones((len(games), 6), dtype=np.uint8)
    probs = agent.probs(games, np.zeros(len(games), np.int8), np.zeros((len(games), 3)), masks)
    assert np.array_equal(probs.argmax(axis=1), picks)
    # strategies without regret scores rank by their probabilities
    zeros, players = np.zeros((len(games), 3)), np.zeros(len(games), np.int8)
    assert np.array_equal(agent.scores(games, players, zeros, masks), probs)
    with pytest.raises(ValueError, match="at least one"):
        SingleDeepCFRAgent([], seed=0)


class ScoredStrategy:
    """One iteration's strategy with regret scores -t on every action."""

    def __init__(self, t: int) -> None:
        self.t = t

    def __call__(self, players, features, masks):
        return one_hot_strategy(self.t)(players, features, masks)

    def scores(self, players, features, masks):
        return np.full(masks.shape, -float(self.t))

    def advantages(self, players, features, masks):
        return np.full(masks.shape, 0.01 * self.t)


def test_single_deep_cfr_scores_come_from_each_games_iteration():
    agent = SingleDeepCFRAgent([ScoredStrategy(t) for t in range(3)], seed=2, utility_scale=0.01)
    games = np.arange(300)
    masks = np.ones((len(games), 4), dtype=np.uint8)
    zeros, players = np.zeros((len(games), 3)), np.zeros(len(games), np.int8)
    scores = agent.scores(games, players, zeros, masks)
    picks = np.array([agent.iteration_of(g) for g in games])
    np.testing.assert_array_equal(scores[:, 0], -picks.astype(np.float64))
    # advantages in points: the traversal's utility scale undone
    advantages = agent.advantages(games, players, zeros, masks)
    np.testing.assert_allclose(advantages[:, 0], picks.astype(np.float64))


def test_sigma1_bots_play_the_initial_strategy():
    game = LostCitiesGame.from_seed(3)
    greedy, sampled = make_bot("sigma1_greedy", 0), make_bot("sigma1", 0)
    for _ in range(60):
        player = game.current_player
        probs = lost_cities_heuristic(
            np.array([player], np.int8), game.encode(player)[None], game.legal_mask()[None]
        )[0]
        assert greedy.act(game) == int(probs.argmax())
        assert game.legal_mask()[sampled.act(game)]
        game.apply(greedy.act(game))


def test_checkpoint_agents(lost_cities_checkpoint):
    agents = agents_from_checkpoint(lost_cities_checkpoint, seed=1)
    assert set(agents) == {"policy", "current", "sdcfr", "sigma1"}
    assert len(agents["sdcfr"].strategies) == 2  # one per iteration of the run
    game = LostCitiesGame.from_seed(1)
    features, masks = game.encode(0)[None], game.legal_mask()[None]
    for agent in agents.values():
        probs = agent.probs(np.array([0]), np.zeros(1, np.int8), features, masks)
        assert probs.shape == masks.shape
        assert probs.sum() == pytest.approx(1.0) and np.all(probs[masks == 0] == 0)
    # single Deep CFR's advantages: its regret scores without the warm-start seed, in points
    sdcfr, args = agents["sdcfr"], (np.array([0]), np.zeros(1, np.int8), features, masks)
    cfg = load_checkpoint(lost_cities_checkpoint)["config"]
    strategy = sdcfr.strategies[sdcfr.iteration_of(0)]
    policy = strategy.policy
    pull = policy.anchor + policy.warm_start / policy.regret_weights[0]
    seed = pull * policy.initial(*args[1:])
    raw = sdcfr.advantages(*args) * cfg["game"]["utility_scale"]
    np.testing.assert_allclose(raw + seed, sdcfr.scores(*args), rtol=1e-6, atol=1e-9)
    assert sdcfr.utility_scale == cfg["game"]["utility_scale"]


def test_agent_file_plays_like_the_checkpoint(lost_cities_checkpoint):
    agent_file = lost_cities_checkpoint.parent.parent / "agent.pt"
    agent_state = load_checkpoint(agent_file)["agent"]
    assert "advantage_memories" not in agent_state and "strategy_memory" not in agent_state
    assert agent_file.stat().st_size < lost_cities_checkpoint.stat().st_size
    from_file = agents_from_checkpoint(agent_file, seed=1)
    from_checkpoint = agents_from_checkpoint(lost_cities_checkpoint, seed=1)
    game = LostCitiesGame.from_seed(2)
    features, masks = game.encode(0)[None], game.legal_mask()[None]
    for kind, agent in from_file.items():
        args = (np.array([3]), np.zeros(1, np.int8), features, masks)
        assert np.array_equal(agent.probs(*args), from_checkpoint[kind].probs(*args))


def test_checkpoint_agents_reject_a_checkpoint_without_iteration_nets(
    lost_cities_checkpoint, tmp_path
):
    state = load_checkpoint(lost_cities_checkpoint)
    del state["trainer"]["iteration_advantage_nets"]
    old = tmp_path / "old.pt"
    save_checkpoint(old, state)
    assert set(agents_from_checkpoint(old, ["policy", "current"])) == {"policy", "current"}
    with pytest.raises(ValueError, match="sdcfr is unavailable"):
        agents_from_checkpoint(old, ["sdcfr"])


def test_an_agent_file_with_retired_settings_still_plays(lost_cities_checkpoint, tmp_path):
    """A file written before settings moved (traversal.num_workers became
    executor.num_workers) plays as it did: settings the schema no longer has are dropped."""
    agent_file = lost_cities_checkpoint.parent.parent / "agent.pt"
    state = load_checkpoint(agent_file)
    state["config"]["traversal"] = {
        **state["config"]["traversal"],
        "executor": "processes",
        "num_workers": 2,
    }
    state["config"]["retired_section"] = {"anything": 1}
    old = tmp_path / "old_agent.pt"
    save_checkpoint(old, state)
    game = LostCitiesGame.from_seed(2)
    args = (np.array([3]), np.zeros(1, np.int8), game.encode(0)[None], game.legal_mask()[None])
    now, before = agents_from_checkpoint(agent_file, seed=1), agents_from_checkpoint(old, seed=1)
    for kind, agent in now.items():
        assert np.array_equal(agent.probs(*args), before[kind].probs(*args))
