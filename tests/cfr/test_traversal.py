"""The Cython traversal kernel against its pure-Python twin, and the traversal-ID contract."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities.cfr._traverse import Traverser
from lostcities.cfr.initial import lost_cities_heuristic
from lostcities.cfr.traversal import TraversalId, run_traversals
from lostcities.games import expand_states
from lostcities.games.kuhn import KuhnGame
from lostcities.games.leduc import LeducGame
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.reference.traversal import PyTraverser


class FixedPolicy:
    """A deterministic, row-local, non-uniform sigma: softmax of a fixed linear map."""

    def __init__(self, dim: int, num_actions: int, seed: int) -> None:
        self.weights = np.random.default_rng(seed).normal(size=(dim, num_actions))

    def __call__(self, players, features, masks, out) -> None:
        logits = features.astype(np.float64) @ self.weights + 0.5 * players[:, None]
        exp = np.exp(logits - logits.max(axis=1, keepdims=True)) * masks
        out[:] = exp / exp.sum(axis=1, keepdims=True)


def twins(prototype, scheme, seed, policy_seed, **kw):
    policy = FixedPolicy(prototype.encoding_size, prototype.num_actions, policy_seed)
    args = dict(scheme=scheme, seed=seed, **kw)
    return Traverser(prototype, policy, **args), PyTraverser(prototype, policy, **args)


def assert_same(a, b) -> None:
    (adv_a, strat_a, stats_a), (adv_b, strat_b, stats_b) = a, b
    for x, y in zip(adv_a + strat_a, adv_b + strat_b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)
    assert stats_a == stats_b


SMALL = {"kuhn": KuhnGame, "leduc": LeducGame}


@settings(max_examples=40, deadline=None)
@given(
    game=st.sampled_from(sorted(SMALL)),
    scheme=st.sampled_from(["external", "rollout"]),
    seed=st.integers(0, 2**64 - 1),
    policy_seed=st.integers(0, 1000),
    iteration=st.integers(1, 1000),
    player=st.integers(0, 1),
    index=st.integers(0, 10**6),
    branch_prob=st.floats(0.0, 1.0),
    rollouts=st.integers(1, 3),
    win_loss=st.booleans(),
)
def test_kernel_matches_python_twin_on_poker(
    game, scheme, seed, policy_seed, iteration, player, index, branch_prob, rollouts, win_loss
):
    fast, slow = twins(
        SMALL[game].new().kernel,
        scheme,
        seed,
        policy_seed,
        branch_prob=branch_prob,
        rollouts=rollouts,
        utility_scale=0.5,
        win_loss=win_loss,
    )
    assert_same(fast.run(iteration, player, index), slow.run(iteration, player, index))


def heuristic_sampling(players, features, masks, out):
    out[:] = lost_cities_heuristic(players, features, masks)


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 2**64 - 1),
    index=st.integers(0, 10**6),
    player=st.integers(0, 1),
    sampling=st.sampled_from([None, heuristic_sampling]),
)
def test_kernel_matches_python_twin_on_lost_cities(seed, index, player, sampling):
    prototype = LostCitiesGame.from_seed(0).kernel
    fast, slow = twins(
        prototype,
        "rollout",
        seed,
        7,
        branch_prob=0.03,
        rollouts=2,
        utility_scale=0.01,
        sampling_policy=sampling,
    )
    assert_same(fast.run(1, player, index), slow.run(1, player, index))


class FixedValue:
    """A deterministic row-local history value: a fixed linear map of the history features
    (both seats' encodings), plus a seat term so the seats' values differ."""

    def __init__(self, dim: int, seed: int) -> None:
        self.weights = np.random.default_rng(seed).normal(size=2 * dim) * 0.1

    def __call__(self, players, features, out) -> None:
        out[:] = features.astype(np.float64) @ self.weights - 0.25 * players


def value_twins(prototype, seed, policy_seed, **kw):
    value = FixedValue(prototype.encoding_size, policy_seed)
    return twins(prototype, "rollout", seed, policy_seed, value_fn=value, **kw)


def assert_same_values(a, b) -> None:
    ((states_a, targets_a), stats_a), ((states_b, targets_b), stats_b) = a, b
    assert states_a.dtype == states_b.dtype == np.uint8
    assert targets_a.dtype == targets_b.dtype == np.float32
    np.testing.assert_array_equal(states_a, states_b)
    np.testing.assert_array_equal(targets_a, targets_b)
    assert stats_a == stats_b


@settings(max_examples=30, deadline=None)
@given(
    game=st.sampled_from(sorted(SMALL)),
    seed=st.integers(0, 2**64 - 1),
    policy_seed=st.integers(0, 1000),
    iteration=st.integers(1, 1000),
    player=st.integers(0, 1),
    index=st.integers(0, 10**6),
    branch_prob=st.floats(0.0, 1.0),
    rollouts=st.integers(1, 3),
    value_record=st.floats(0.0, 1.0),
    win_loss=st.booleans(),
)
def test_learned_values_and_value_traversals_match_the_twin_on_poker(
    game, seed, policy_seed, iteration, player, index, branch_prob, rollouts, value_record, win_loss
):
    fast, slow = value_twins(
        SMALL[game].new().kernel,
        seed,
        policy_seed,
        branch_prob=branch_prob,
        rollouts=rollouts,
        utility_scale=0.5,
        win_loss=win_loss,
        action_values="learned",
        value_record=value_record,
    )
    assert_same(fast.run(iteration, player, index), slow.run(iteration, player, index))
    assert_same_values(
        fast.run_values(iteration, player, index), slow.run_values(iteration, player, index)
    )


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 2**64 - 1),
    index=st.integers(0, 10**6),
    player=st.integers(0, 1),
    sampling=st.sampled_from([None, heuristic_sampling]),
)
def test_learned_values_and_value_traversals_match_the_twin_on_lost_cities(
    seed, index, player, sampling
):
    fast, slow = value_twins(
        LostCitiesGame.from_seed(0).kernel,
        seed,
        7,
        branch_prob=0.05,
        rollouts=1,
        utility_scale=0.01,
        sampling_policy=sampling,
        action_values="learned",
        value_record=0.2,
    )
    assert_same(fast.run(1, player, index), slow.run(1, player, index))
    assert_same_values(fast.run_values(1, player, index), slow.run_values(1, player, index))


def test_value_targets_are_each_seats_final_utility():
    """A value traversal's samples come in seat pairs of one state: the second is the
    first's state seen from the other seat (the halves of the compact history swapped),
    with the negated target (zero-sum)."""
    prototype = LostCitiesGame.from_seed(0).kernel
    fast, _ = value_twins(
        prototype, 3, 1, branch_prob=0.5, utility_scale=0.01, action_values="learned"
    )
    (states, targets), stats = fast.run_values(2, 1, 9)
    c = prototype.compact_size
    assert states.shape == (len(targets), 2 * c)
    assert len(targets) == stats["value_samples"] == 2 * stats["playouts"] > 0  # firsts only
    np.testing.assert_array_equal(states[1::2, :c], states[0::2, c:])
    np.testing.assert_array_equal(states[1::2, c:], states[0::2, :c])
    np.testing.assert_array_equal(targets[1::2], -targets[0::2])
    assert np.abs(targets).max() > 0


def test_learned_action_values_need_a_value_function():
    prototype = LeducGame.new().kernel
    policy = FixedPolicy(prototype.encoding_size, prototype.num_actions, 0)
    with pytest.raises(ValueError, match="needs a value_fn"):
        Traverser(prototype, policy, scheme="rollout", action_values="learned")
    with pytest.raises(ValueError, match="action_values must be one of"):
        Traverser(prototype, policy, scheme="rollout", action_values="guessed")


def test_playouts_of_one_branch_share_random_numbers():
    """Common random numbers: the playouts of the actions of one branching node start
    from the same reshuffled draw pile when the action does not touch the pile."""
    prototype = LostCitiesGame.from_seed(0).kernel
    policy = FixedPolicy(prototype.encoding_size, prototype.num_actions, 2)
    slow = PyTraverser(prototype, policy, scheme="rollout", seed=1, branch_prob=0.05)
    slow.run(1, 0, 0)
    piles: dict[int, set[tuple]] = {}
    for branch, action, start in slow.playout_starts:
        if action < 100:  # play/discard: the draw pile is untouched before the reshuffle
            piles.setdefault(branch, set()).add(tuple(start.deck_cards()))
    assert piles and all(len(orders) == 1 for orders in piles.values())
    assert len({next(iter(o)) for o in piles.values()}) == len(piles)  # branches differ


def test_samples_expand_to_the_features_sigma_saw():
    """Every strategy sample of a Lost Cities trajectory is an opponent node whose sigma was
    queried: its compact state expands, bit for bit, to the features of that query."""
    prototype = LostCitiesGame.from_seed(0).kernel
    policy = FixedPolicy(prototype.encoding_size, prototype.num_actions, 4)
    queried = []

    def recording(players, features, masks, out):
        queried.extend(features.copy())
        policy(players, features, masks, out)

    traverser = Traverser(prototype, recording, scheme="rollout", seed=5, branch_prob=0.0)
    _, (states, masks, sigma), _ = traverser.run(1, 0, 3)
    assert len(states) == len(queried) > 10  # no branching: one query per opponent node
    features = expand_states(prototype, states)
    assert features.view(np.uint32).tolist() == np.array(queried).view(np.uint32).tolist()


def test_result_depends_only_on_the_traversal_id():
    prototype = LeducGame.new().kernel
    policy = FixedPolicy(prototype.encoding_size, prototype.num_actions, 0)
    a = Traverser(prototype, policy, scheme="external", seed=3)
    b = Traverser(prototype, policy, scheme="external", seed=3)
    ids = [TraversalId(2, p, k) for p in (0, 1) for k in range(20)]
    forward = run_traversals(a, ids)
    backward = run_traversals(b, ids[::-1])[::-1]  # another order, another traverser object
    for x, y in zip(forward, backward, strict=True):
        assert x.id == y.id
        for u, v in zip(x.advantage + x.strategy, y.advantage + y.strategy, strict=True):
            np.testing.assert_array_equal(u, v)
    # different IDs deal differently
    deals = {r.advantage.states[0].tobytes() for r in forward if len(r.advantage.states)}
    assert len(deals) > 3


def test_external_sampling_regrets_are_zero_under_sigma():
    """Regrets at a traverser node are q(a) - sum sigma q: their sigma-weighted sum is 0.
    The samples' compact states expand to the features sigma was queried with."""
    prototype = LeducGame.new().kernel
    policy = FixedPolicy(prototype.encoding_size, prototype.num_actions, 1)
    traverser = Traverser(prototype, policy, scheme="external", seed=0)
    (states, masks, regrets), _, stats = traverser.run(1, 0, 0)
    sigma = np.zeros(masks.shape)
    policy(np.zeros(len(masks), np.int8), expand_states(prototype, states), masks, sigma)
    np.testing.assert_allclose((sigma * regrets).sum(axis=1), 0.0, atol=1e-5)
    assert np.all(regrets[masks == 0] == 0)
    assert stats["nodes"] > stats["terminals"] > 0


def test_rollout_scheme_with_no_branching_makes_no_advantage_samples():
    prototype = LeducGame.new().kernel
    policy = FixedPolicy(prototype.encoding_size, prototype.num_actions, 1)
    (states, _, _), strat, stats = Traverser(
        prototype, policy, scheme="rollout", branch_prob=0.0
    ).run(1, 0, 0)
    assert len(states) == 0 and stats["playouts"] == 0


def test_unknown_scheme_is_rejected():
    with pytest.raises(ValueError, match="scheme must be one of"):
        Traverser(KuhnGame.new().kernel, lambda *a: None, scheme="bogus")
