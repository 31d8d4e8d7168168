"""Leduc poker: known answers (tree size, 936 infosets), hand-played payoffs,
legality, the encoding layout, OpenSpiel's information-state strings and the
C-level playout. OpenSpiel's uniform value and NashConv are checked with the
package evaluator in tests/cfr/test_exploitability.py."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from exact_tree import histories

from lostcities.games import _state, leduc
from lostcities.games.leduc import CALL, FOLD, RAISE, LeducGame


def play(*actions: int) -> LeducGame:
    game = LeducGame.new()
    for action in actions:
        game.apply(action)
    return game


@pytest.fixture(scope="module")
def tree() -> list[tuple[tuple[int, ...], LeducGame]]:
    return list(histories(LeducGame.new()))


# --- the whole tree ------------------------------------------------------------


def test_tree_counts_and_infosets(tree):
    kinds = Counter()
    infosets = {0: set(), 1: set()}
    for _, game in tree:
        if game.is_terminal:
            kinds["terminal"] += 1
        elif game.is_chance:
            kinds["chance"] += 1
        else:
            kinds["decision"] += 1
            player = game.current_player
            infosets[player].add(game.information_state(player))
    # One betting round, from its start: 6 decision nodes (-, c, cr, crr, r, rr;
    # 3 per player), 4 folds (crf, crrf, rf, rrf) and 5 ways to end by a call
    # (cc, crc, crrc, rc, rrc). Private deals: 6 x 5 = 30.
    #   chance:   root + 6 (player 1's deal) + 30 x 5 (public card)      =  157
    #   decision: 30 x 6 (round 1) + 30 x 5 x 4 x 6 (round 2)           = 3780
    #   terminal: 30 x 4 (round-1 folds) + 30 x 5 x 4 x (4 + 5)          = 5520
    assert kinds == {"chance": 157, "decision": 3780, "terminal": 5520}
    assert sum(kinds.values()) == 9457  # OpenSpiel's leduc_poker history count
    # Per player: 6 cards x 3 round-1 nodes + 6 x 5 public x 5 round-1 endings x 3.
    assert len(infosets[0]) == len(infosets[1]) == 6 * 3 + 6 * 5 * 5 * 3 == 468
    assert len(infosets[0] | infosets[1]) == 936


def test_chance_sums_to_one_and_returns_are_zero_sum(tree):
    payoffs = set()
    for _, game in tree:
        if game.is_chance:
            outcomes = game.chance_outcomes()
            assert math.isclose(sum(p for _, p in outcomes), 1.0, abs_tol=1e-15)
            dealt = {*game.private_cards, game.public_card}
            assert [a for a, _ in outcomes] == [c for c in range(6) if c not in dealt]
        elif game.is_terminal:
            r0, r1 = game.returns()
            assert r0 + r1 == 0.0
            payoffs.add(abs(r0))
    # Folds lose 1, 3, 5 (round 1) or 3..9 (round 2); showdowns win 1..13 or split.
    assert payoffs == {0.0, 1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0}


# --- hand-played sequences ---------------------------------------------------------


def test_check_check_twice_pair_wins():
    # Player 0 J (0), player 1 Q (2); check-check; public J (1); check-check.
    game = play(0, 2, CALL, CALL)
    assert game.is_chance and game.round == 1
    game.apply(1)
    assert game.current_player == 0
    game.apply(CALL)
    game.apply(CALL)
    assert game.is_terminal and game.returns() == (1.0, -1.0)
    # Public K instead: no pair, the higher private rank (Q) wins.
    assert play(0, 2, CALL, CALL, 4, CALL, CALL).returns() == (-1.0, 1.0)


def test_raise_raise_call_then_showdown():
    # Player 0 K (4), player 1 J (1). Round 1: raise (3), re-raise (5), call (5).
    game = play(4, 1, RAISE, RAISE)
    assert game.contributions == (3, 5)
    assert game.legal_actions() == [FOLD, CALL]  # two raises: no third
    game.apply(CALL)
    assert game.is_chance and game.contributions == (5, 5)
    game.apply(3)  # public Q: nobody pairs, K beats J
    game.apply(RAISE)  # round 2 raises by 4
    assert game.contributions == (9, 5)
    game.apply(RAISE)
    assert game.contributions == (9, 13)
    game.apply(CALL)
    assert game.is_terminal and game.returns() == (13.0, -13.0)  # the largest pot


def test_folds_and_fold_legality():
    root = play(3, 5)
    assert root.legal_actions() == [CALL, RAISE]  # no bet to face: fold is illegal
    with pytest.raises(ValueError, match=r"illegal action 0 for player 0: legal are 1 \(call\)"):
        root.apply(FOLD)
    after_raise = root.child(RAISE)
    assert after_raise.legal_actions() == [FOLD, CALL, RAISE]
    folded = after_raise.child(FOLD)
    assert folded.is_terminal and folded.returns() == (1.0, -1.0)  # player 1 loses the ante
    # Round 2: r c | public | r r f: player 0 folds having put in 3 + 4.
    game = play(3, 5, RAISE, CALL, 0, RAISE, RAISE, FOLD)
    assert game.returns() == (-7.0, 7.0)
    # After a check, player 1's bet makes fold legal for player 0.
    assert play(3, 5, CALL, RAISE).legal_actions() == [FOLD, CALL, RAISE]


def test_equal_ranks_split_and_pair_beats_higher_rank():
    assert play(0, 1, RAISE, CALL, 4, CALL, CALL).returns() == (0.0, 0.0)  # J vs J
    assert play(4, 2, CALL, CALL, 3, CALL, CALL).returns() == (-1.0, 1.0)  # Q pair beats K


def test_round_ends_only_after_the_last_raise_is_called():
    game = play(0, 2, CALL, RAISE)  # c r: player 0 to respond
    assert game.current_player == 0 and game.round == 0
    game.apply(RAISE)  # c r r
    assert game.current_player == 1 and game.legal_actions() == [FOLD, CALL]
    game.apply(CALL)
    assert game.is_chance and game.sequences == ([CALL, RAISE, RAISE, CALL], [])


# --- encoding, information states, API ----------------------------------------------


def test_constants_match_the_kernel():
    state = leduc.LeducState()
    assert state.num_actions == leduc.NUM_ACTIONS == 3
    assert state.encoding_size == leduc.ENCODING_SIZE == 30
    stops = [s.stop for s in leduc.ENCODING_SLICES.values()]
    assert stops[-1] == leduc.ENCODING_SIZE
    assert [s.start for s in leduc.ENCODING_SLICES.values()] == [0, *stops[:-1]]


def test_encoding_of_a_known_state():
    # Player 0 Qh (3), player 1 Kh (5); round 1: c r c; public Js (0); round 2: r.
    game = play(3, 5, CALL, RAISE, CALL, 0, RAISE)
    expected = np.zeros(30, dtype=np.float32)
    expected[1] = 1  # observer: player 1
    expected[2 + 5] = 1  # private Kh
    expected[8 + 0] = 1  # public Js
    expected[[14 + 0, 14 + 3, 14 + 4]] = 1  # round 1: call, raise, call
    expected[22 + 1] = 1  # round 2: raise
    e1 = game.encode(1)
    assert e1.dtype == np.float32
    np.testing.assert_array_equal(e1, expected)
    e0 = game.encode(0)
    np.testing.assert_array_equal(e0[leduc.ENCODING_SLICES["player"]], [1, 0])
    np.testing.assert_array_equal(e0[leduc.ENCODING_SLICES["private"]], np.eye(6)[3])
    np.testing.assert_array_equal(e0[14:], e1[14:])
    # A fold sets no betting bit.
    assert play(3, 5, RAISE, FOLD).encode(0)[14:].tolist() == [0, 1] + [0] * 14


def test_information_state_strings_follow_openspiel():
    game = play(3, 5)
    assert game.information_state(0) == (
        "[Observer: 0][Private: 3][Round 1][Player: 0][Pot: 2][Money: 99 99][Round1: ][Round2: ]"
    )
    game = play(3, 5, RAISE, CALL, 0)
    assert game.information_state(1) == (
        "[Observer: 1][Private: 5][Round 2][Player: 0][Pot: 6][Money: 97 97][Public: 0]"
        "[Round1: 2 1][Round2: ]"
    )
    assert play(3).information_state(1).startswith("[Observer: 1][Private: -10000]")


def test_encoding_is_a_function_of_the_information_state(tree):
    """Same information state <=> same encoding, for each player at every decision node."""
    for player in (0, 1):
        seen: dict[str, bytes] = {}
        for _, game in tree:
            if game.current_player == player:
                key = game.information_state(player)
                assert seen.setdefault(key, game.encode(player).tobytes()) == seen[key]
        assert len(set(seen.values())) == len(seen) == 468


def test_wrapper_errors():
    game = LeducGame.new()
    with pytest.raises(ValueError, match="illegal chance outcome 6"):
        game.apply(6)
    with pytest.raises(ValueError, match="not a chance node"):
        play(0, 1).chance_outcomes()
    with pytest.raises(ValueError, match="terminal"):
        play(0, 1).returns()
    with pytest.raises(ValueError, match="player must be 0 or 1"):
        play(0, 1).information_state(-1)
    with pytest.raises(TypeError, match="wraps a LeducState"):
        LeducGame(object())
    assert play(4, 1, RAISE, RAISE).render() == (
        "cards Ks Jh | public ? | betting rr / - | in 3 5 | player 0 to act"
    )


def test_clone_and_kernel_copies_are_independent():
    game = play(2, 4, RAISE)
    copy = game.clone()
    copy.apply(CALL)
    copy.apply(0)
    assert game.sequences == ([RAISE], []) and game.public_card == -1
    assert copy.sequences == ([RAISE, CALL], []) and copy.public_card == 0
    kernel_copy = game.kernel.copy()
    kernel_copy.step(RAISE)
    assert game.kernel.contributions() == (3, 1) and kernel_copy.contributions() == (3, 5)
    target = leduc.LeducState()
    target.assign(copy.kernel)  # the C copy_from
    target.step(RAISE)  # round 2 raises by 4
    assert copy.contributions == (3, 3) and target.contributions() == (7, 3)


# --- C-level playouts --------------------------------------------------------------


def _uniform_moments(game: LeducGame) -> np.ndarray:
    """Exact [1, E[steps], E[steps^2], E[r0], E[r0^2]] of uniformly random play."""
    if game.is_terminal:
        r0 = game.returns()[0]
        return np.array([1.0, 0.0, 0.0, r0, r0 * r0])
    legal = game.legal_actions()
    branches = game.chance_outcomes() if game.is_chance else [(a, 1 / len(legal)) for a in legal]
    out = np.zeros(5)
    for action, prob in branches:
        _, s, s2, r, r2 = _uniform_moments(game.child(action))
        out += prob * np.array([1.0, s + 1, s2 + 2 * s + 1, r, r2])
    return out


def test_random_playouts_match_the_exact_uniform_moments():
    games = 400_000
    _, steps_mean, steps_sq, ret_mean, ret_sq = _uniform_moments(LeducGame.new())
    assert ret_mean == pytest.approx(-0.078125, abs=1e-12)
    steps, total = _state.random_playouts(leduc.LeducState(), games, 2024)
    assert (steps, total) == _state.random_playouts(
        leduc.LeducState(), games, 2024
    )  # keyed, deterministic
    for observed, mean, sq in ((steps, steps_mean, steps_sq), (total, ret_mean, ret_sq)):
        sigma = math.sqrt((sq - mean * mean) / games)
        assert abs(observed / games - mean) < 5 * sigma
