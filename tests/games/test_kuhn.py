"""Kuhn poker: known answers (tree size, information sets), hand-played
payoffs, the encoding layout and the C-level playout. The game value -1/18
and OpenSpiel's uniform NashConv are checked with the package evaluator in
tests/cfr/test_exploitability.py."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from exact_tree import histories

from lostcities.games import _state, kuhn
from lostcities.games.kuhn import BET, PASS, KuhnGame


def play(*actions: int) -> KuhnGame:
    game = KuhnGame.new()
    for action in actions:
        game.apply(action)
    return game


# --- the whole tree ------------------------------------------------------------


def test_tree_counts_and_infosets():
    kinds = Counter()
    infosets = {0: set(), 1: set()}
    for _, game in histories(KuhnGame.new()):
        if game.is_terminal:
            kinds["terminal"] += 1
        elif game.is_chance:
            kinds["chance"] += 1
        else:
            kinds["decision"] += 1
            player = game.current_player
            infosets[player].add(game.information_state(player))
    # Chance: the root + one per player-0 card. Decision: 6 deals x (root, p, b,
    # pb). Terminal: 6 deals x (pp, bp, bb, pbp, pbb).
    assert kinds == {"chance": 4, "decision": 24, "terminal": 30}
    assert sum(kinds.values()) == 58
    # 3 cards x 2 nodes per player: player 0 at "" and "pb", player 1 at "p" and "b".
    assert len(infosets[0]) == len(infosets[1]) == 6
    assert infosets[0] == {"0", "1", "2", "0pb", "1pb", "2pb"}
    assert infosets[1] == {"0p", "1p", "2p", "0b", "1b", "2b"}


def test_chance_sums_to_one_and_returns_are_zero_sum():
    for history, game in histories(KuhnGame.new()):
        if game.is_chance:
            outcomes = game.chance_outcomes()
            assert math.isclose(sum(p for _, p in outcomes), 1.0, abs_tol=1e-15)
            dealt = [c for c in game.cards if c >= 0]
            assert [a for a, _ in outcomes] == [c for c in range(3) if c not in dealt]
        elif game.is_terminal:
            r0, r1 = game.returns()
            assert r0 + r1 == 0.0
            assert abs(r0) in (1.0, 2.0), history


@pytest.mark.parametrize(
    ("betting", "expected"),
    [
        ((PASS, PASS), (1.0, -1.0)),  # showdown for 1
        ((BET, PASS), (1.0, -1.0)),  # player 1 folds
        ((BET, BET), (2.0, -2.0)),  # showdown for 2
        ((PASS, BET, PASS), (-1.0, 1.0)),  # player 0 folds with the best card
        ((PASS, BET, BET), (2.0, -2.0)),  # showdown for 2
    ],
)
def test_hand_played_returns(betting, expected):
    game = play(2, 1, *betting)  # player 0 K, player 1 Q
    assert game.is_terminal
    assert game.returns() == expected
    flipped = play(0, 1, *betting)  # player 0 J, player 1 Q: showdowns flip
    showdown = betting not in ((BET, PASS), (PASS, BET, PASS))
    assert flipped.returns() == ((-expected[0], -expected[1]) if showdown else expected)


# --- the wrapper's API and errors ------------------------------------------------


def test_constants_match_the_kernel():
    state = kuhn.KuhnState()
    assert state.num_actions == kuhn.NUM_ACTIONS == 2
    assert state.encoding_size == kuhn.ENCODING_SIZE == 11
    stops = [s.stop for s in kuhn.ENCODING_SLICES.values()]
    assert stops[-1] == kuhn.ENCODING_SIZE
    assert [s.start for s in kuhn.ENCODING_SLICES.values()] == [0, *stops[:-1]]


def test_illegal_moves_raise():
    game = KuhnGame.new()
    assert game.current_player == kuhn.CHANCE and game.legal_actions() == []
    with pytest.raises(ValueError, match="illegal chance outcome 3"):
        game.apply(3)
    game.apply(1)
    with pytest.raises(ValueError, match="illegal chance outcome 1"):
        game.apply(1)  # already dealt to player 0
    game.apply(0)
    assert game.current_player == 0 and game.legal_actions() == [PASS, BET]
    with pytest.raises(ValueError, match="illegal action 2 for player 0"):
        game.apply(2)
    with pytest.raises(ValueError, match="not a chance node"):
        game.chance_outcomes()
    with pytest.raises(ValueError, match="terminal"):
        game.returns()
    with pytest.raises(ValueError, match="player must be 0 or 1"):
        game.encode(2)
    game.apply(PASS)
    game.apply(PASS)
    assert game.is_terminal and game.current_player == kuhn.TERMINAL
    assert game.legal_actions() == []
    with pytest.raises(ValueError, match="over"):
        game.apply(PASS)
    assert game.render() == "cards Q J | betting pp | over, returns +1 -1"


def test_encoding_of_known_states():
    game = play(2, 0, PASS, BET)  # player 0 K, player 1 J; p b
    e0 = game.encode(0)
    assert e0.dtype == np.float32 and e0.shape == (11,)
    np.testing.assert_array_equal(e0, [1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(game.encode(1), [0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(KuhnGame.new().encode(1), [0, 1] + [0] * 9)
    assert game.information_state(0) == "2pb"
    assert game.information_state(1) == "0pb"
    assert play(1).information_state(1) == ""  # player 1 has no card yet


def test_encoding_is_a_function_of_the_information_state():
    """Same information state <=> same encoding, for each player at every decision node."""
    for player in (0, 1):
        seen: dict[str, bytes] = {}
        for _, game in histories(KuhnGame.new()):
            if game.current_player == player:
                key = game.information_state(player)
                assert seen.setdefault(key, game.encode(player).tobytes()) == seen[key]
        assert len(set(seen.values())) == len(seen) == 6


def test_clone_and_kernel_copies_are_independent():
    game = play(2, 1)
    copy = game.clone()
    copy.apply(BET)
    assert game.history == [] and copy.history == [BET]
    kernel_copy = game.kernel.copy()
    kernel_copy.step(PASS)
    assert game.kernel.history() == [] and kernel_copy.history() == [PASS]
    # assign() is the C copy_from: a struct copy, after which both evolve separately.
    target = kuhn.KuhnState()
    target.assign(copy.kernel)
    assert target.cards() == (2, 1) and target.history() == [BET]
    target.step(BET)
    assert copy.kernel.history() == [BET] and copy.kernel.player() == 1
    assert target.player() == kuhn.TERMINAL


# --- C-level playouts --------------------------------------------------------------


def _uniform_moments(game: KuhnGame | None = None):
    """Exact E[steps], E[steps^2], E[r0], E[r0^2] of one uniformly random game."""
    game = game or KuhnGame.new()
    if game.is_terminal:
        r0 = game.returns()[0]
        return 1.0, 0.0, 0.0, r0, r0 * r0
    branches = (
        game.chance_outcomes()
        if game.is_chance
        else [(a, 1 / len(game.legal_actions())) for a in game.legal_actions()]
    )
    out = np.zeros(5)
    for action, prob in branches:
        _, s, s2, r, r2 = _uniform_moments(game.child(action))
        out += prob * np.array([1.0, s + 1, s2 + 2 * s + 1, r, r2])
    return tuple(out)


def test_random_playouts_match_the_exact_uniform_moments():
    games = 200_000
    _, steps_mean, steps_sq, ret_mean, ret_sq = _uniform_moments()
    assert ret_mean == pytest.approx(0.125, abs=1e-12)
    steps, total = _state.random_playouts(kuhn.KuhnState(), games, 12345)
    assert 4 * games <= steps <= 5 * games  # 2 deals + 2 or 3 bets
    assert (steps, total) == _state.random_playouts(
        kuhn.KuhnState(), games, 12345
    )  # keyed, deterministic
    for observed, mean, sq in ((steps, steps_mean, steps_sq), (total, ret_mean, ret_sq)):
        sigma = math.sqrt((sq - mean * mean) / games)
        assert abs(observed / games - mean) < 5 * sigma
