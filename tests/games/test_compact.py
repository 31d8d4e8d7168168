"""Compact information states: each kernel's ``compact``/``expand`` against the pure-Python
twins (lostcities.reference.compact), and expansion against ``encode``, bit for bit.

Property tests (hypothesis) play random games (Lost Cities in lockstep with the reference
rules) and, at every decision state and for both seats, require: the kernel's compact bytes
equal the twin's; expanding them, in the kernel and in the twin, gives exactly the kernel's
encoding; rows of both seats' states side by side expand to both encodings side by side;
and a redeal of what the viewer cannot see leaves the viewer's bytes unchanged. The small
games are also walked whole: compact bytes and information states determine each other.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from exact_tree import histories
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities.config import GameConfig
from lostcities.games import expand_states, make_game
from lostcities.games import lost_cities_spec as spec
from lostcities.games._state import GameState
from lostcities.games.kuhn import KuhnGame
from lostcities.games.leduc import LeducGame
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.reference.compact import (
    KUHN_COMPACT_SIZE,
    LEDUC_COMPACT_SIZE,
    kuhn_compact,
    kuhn_expand,
    leduc_compact,
    leduc_expand,
    lost_cities_compact,
    lost_cities_expand,
)
from lostcities.reference.lost_cities_rules import RulesState
from lostcities.rng import Stream

SEEDS = st.integers(min_value=0, max_value=2**63 - 1)
SMALL_GAMES = {
    "kuhn": (KuhnGame, kuhn_compact, kuhn_expand),
    "leduc": (LeducGame, leduc_compact, leduc_expand),
}
SIZES = {"lost_cities": spec.COMPACT_SIZE, "kuhn": KUHN_COMPACT_SIZE, "leduc": LEDUC_COMPACT_SIZE}
PROTOTYPES = {name: make_game(GameConfig(name=name)).prototype for name in SIZES}


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal float32 bit patterns (so -0.0 != 0.0 and a NaN only equals itself)."""
    assert actual.dtype == expected.dtype == np.float32
    np.testing.assert_array_equal(actual.view(np.uint32), expected.view(np.uint32))


def check_both_seats(
    name: str,
    kernel: GameState,
    twin_compact: Callable[[int], np.ndarray],
    twin_expand: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Checks (a)-(d) at one state; returns its history row (both seats' compact states
    side by side) and both encodings side by side."""
    prototype, size = PROTOTYPES[name], SIZES[name]
    compacts, encodings = [], []
    for player in (0, 1):
        compact = kernel.compact_view(player)
        assert compact.dtype == np.uint8 and compact.shape == (size,)
        np.testing.assert_array_equal(compact, twin_compact(player))
        encoding = kernel.encoding(player)
        assert_same_bits(expand_states(prototype, compact[None])[0], encoding)
        assert_same_bits(twin_expand(compact), encoding)
        compacts.append(compact)
        encodings.append(encoding)
    row, features = np.concatenate(compacts), np.concatenate(encodings)
    assert_same_bits(expand_states(prototype, row[None])[0], features)
    return row, features


def assert_batch_expands(name: str, rows: list[np.ndarray], features: list[np.ndarray]) -> None:
    """Many history rows at once expand to their encodings, row by row."""
    if rows:
        assert_same_bits(expand_states(PROTOTYPES[name], np.stack(rows)), np.stack(features))


# --------------------------------------------------------------------- Lost Cities


def pick(game: LostCitiesGame, choices: Stream, pile_bias: bool) -> int:
    """A random legal action; with ``pile_bias``, discards and pile draws when there are
    any (long piles, wagers stacked in one pile, many known cards in the opponent's hand)."""
    legal = game.legal_actions()
    if pile_bias:
        piles = [a for a in legal if spec.DISCARD <= a < spec.DRAW_DECK or a >= spec.DRAW_PILE]
        legal = piles or legal
    return legal[choices.below(len(legal))]


@settings(max_examples=12, deadline=None)
@given(
    cards=st.permutations(spec.sorted_deck()),
    first=st.integers(0, 1),
    choice_seed=SEEDS,
    pile_bias=st.booleans(),
)
def test_lost_cities_compact_matches_the_reference_and_expands_to_encode(
    cards, first, choice_seed, pile_bias
):
    hands, pile = (cards[:8], cards[8:16]), cards[16:]
    fast = LostCitiesGame.from_deal(hands, pile, first_player=first)
    ref = RulesState.from_deal(hands, pile, first_player=first)
    choices = Stream(choice_seed)
    rows, features = [], []
    while not fast.is_terminal:
        row, encodings = check_both_seats(
            "lost_cities", fast.kernel, lambda p: lost_cities_compact(ref, p), lost_cities_expand
        )
        rows.append(row)
        features.append(encodings)
        # Redealing what the viewer cannot see keeps the viewer's information state.
        viewer, key = choices.below(2), choices.next64()
        seen = row[spec.COMPACT_SIZE * viewer : spec.COMPACT_SIZE * (viewer + 1)]
        redealt, ref_redealt = fast.clone(), ref.clone()
        redealt.determinize(viewer, key)
        ref_redealt.determinize(viewer, key)
        np.testing.assert_array_equal(redealt.kernel.compact_view(viewer), seen)
        np.testing.assert_array_equal(lost_cities_compact(ref_redealt, viewer), seen)
        action = pick(fast, choices, pile_bias)
        fast.apply(action)
        ref.apply(action)
    assert_batch_expands("lost_cities", rows, features)


def test_lost_cities_compact_of_a_fresh_deal():
    game = LostCitiesGame.from_seed(5)
    for player in (0, 1):
        compact = game.kernel.compact_view(player)
        codes = compact[: spec.NUM_CARDS]
        assert (codes == spec.LOC_HAND).sum() == spec.HAND_SIZE
        assert (codes == spec.LOC_UNSEEN).sum() == spec.NUM_CARDS - spec.HAND_SIZE
        assert list(compact[spec.NUM_CARDS :]) == [spec.INITIAL_DRAW_PILE, 0, 0, player]
        deck = spec.sorted_deck()
        assert sorted(deck[i] for i in np.flatnonzero(codes == spec.LOC_HAND)) == game.hand(player)


# --------------------------------------------------------------------- Kuhn and Leduc


@pytest.mark.parametrize("name", SMALL_GAMES)
@settings(max_examples=25, deadline=None)
@given(choice_seed=SEEDS)
def test_small_game_compact_matches_the_twin_and_expands_to_encode(name, choice_seed):
    game_class, twin_compact, twin_expand = SMALL_GAMES[name]
    game = game_class.new()
    choices = Stream(choice_seed)
    rows, features = [], []
    while not game.is_terminal:
        if game.is_chance:
            outcomes = [a for a, _ in game.chance_outcomes()]
            game.apply(outcomes[choices.below(len(outcomes))])
            continue
        kernel = game.kernel
        row, encodings = check_both_seats(
            name, kernel, lambda p, k=kernel: twin_compact(k, p), twin_expand
        )
        rows.append(row)
        features.append(encodings)
        legal = game.legal_actions()
        game.apply(legal[choices.below(len(legal))])
    assert_batch_expands(name, rows, features)


@pytest.mark.parametrize("name", SMALL_GAMES)
def test_small_game_compact_states_are_the_information_states(name):
    """Over the whole tree (chance and terminal states too): the twin agrees and expansion
    gives encode; at decision states, equal information states give equal bytes and
    different ones different bytes, for both seats."""
    game_class, twin_compact, twin_expand = SMALL_GAMES[name]
    prototype = PROTOTYPES[name]
    by_infostate: dict[str, bytes] = {}
    by_bytes: dict[bytes, str] = {}
    acting = set()  # the information states of the player to act
    rows, features = [], []
    for _, game in histories(game_class.new()):
        kernel = game.kernel
        row = []
        for player in (0, 1):
            compact = kernel.compact_view(player)
            np.testing.assert_array_equal(compact, twin_compact(kernel, player))
            assert_same_bits(twin_expand(compact), kernel.encoding(player))
            row.append(compact)
            if game.is_chance or game.is_terminal:
                continue
            infostate, raw = f"{player}:{game.information_state(player)}", compact.tobytes()
            assert by_infostate.setdefault(infostate, raw) == raw
            assert by_bytes.setdefault(raw, infostate) == infostate
            if player == game.current_player:
                acting.add(infostate)
        rows.append(np.concatenate(row))
        features.append(np.concatenate([kernel.encoding(0), kernel.encoding(1)]))
    assert_same_bits(expand_states(prototype, np.stack(rows)), np.stack(features))
    assert len(by_infostate) == len(by_bytes)
    assert len(acting) == {"kuhn": 12, "leduc": 936}[name]  # the games' information sets


# --------------------------------------------------------------------- sizes and errors


@pytest.mark.parametrize("name", SIZES)
def test_compact_sizes(name):
    spec_of_game = make_game(GameConfig(name=name))
    assert spec_of_game.compact_size == spec_of_game.prototype.compact_size == SIZES[name]
    assert {"lost_cities": 64, "kuhn": 6, "leduc": 13}[name] == SIZES[name]


@pytest.mark.parametrize("name", SIZES)
def test_expand_states_shapes_and_errors(name):
    prototype, size = PROTOTYPES[name], SIZES[name]
    before = prototype.encoding(0)
    for k in (1, 2, 3):
        out = expand_states(prototype, np.zeros((0, k * size), np.uint8))
        assert out.shape == (0, k * prototype.encoding_size) and out.dtype == np.float32
    row = prototype.compact_view(0)
    assert_same_bits(
        expand_states(prototype, np.tile(row, (4, 3)))[3, -prototype.encoding_size :], before
    )
    assert_same_bits(prototype.encoding(0), before)  # the prototype is not scratch
    bad = [
        np.zeros((2, size), np.int8),
        np.zeros((2, size), np.int64),
        np.zeros((2, size), np.float32),
        np.zeros((2, size + 1), np.uint8),
        np.zeros((2, 2 * size - 1), np.uint8),
        np.zeros(size, np.uint8),
        np.zeros((1, 1, size), np.uint8),
    ]
    for states in bad:
        with pytest.raises(ValueError, match="compact states"):
            expand_states(prototype, states)
