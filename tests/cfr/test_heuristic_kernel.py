"""Lost Cities heuristic: the C kernel against the numpy reference.

Property tests (hypothesis) play Lost Cities from random deals, collect the
acting player's information states in both phases (play/discard and draw),
and require the kernel's sigma to equal the reference's bit for bit
(``np.array_equal`` on float64), in batches and row by row.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities.cfr.initial import INITIAL_STRATEGIES, lost_cities_heuristic
from lostcities.games import lost_cities_spec as spec
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.reference.heuristic import lost_cities_heuristic_reference
from lostcities.rng import Stream

SEEDS = st.integers(min_value=0, max_value=2**63 - 1)
PHASE = spec.ENCODING_SLICES["phase"].start  # 1.0 in a play/discard row, else a draw row


def positions(
    deal_seeds: list[int], choice_seed: int, guided: bool, max_rows_per_game: int = 400
) -> tuple[np.ndarray, np.ndarray]:
    """Information states met while playing the deals: features float32 (n, d), masks uint8 (n, A).

    Moves are uniform over the legal actions, or with ``guided`` drawn from the
    heuristic's own sigma, which reaches the positions a traversal's fixed
    sampling policy visits (open colors extended, discard piles drawn from).
    """
    choices = Stream(choice_seed)
    features, masks = [], []
    for deal_seed in deal_seeds:
        game = LostCitiesGame.from_seed(deal_seed)
        rows = 0
        while not game.is_terminal and rows < max_rows_per_game:
            player = game.current_player
            row, mask = game.encode(player), game.legal_mask()
            features.append(row)
            masks.append(mask)
            rows += 1
            if guided:
                sigma = lost_cities_heuristic(np.array([player], np.int8), row[None], mask[None])
                game.apply(choices.choice(sigma[0].tolist()))
            else:
                legal = game.legal_actions()
                game.apply(legal[choices.below(len(legal))])
    return np.array(features, dtype=np.float32), np.array(masks, dtype=np.uint8)


def both(features: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kernel, reference) sigma, each float64 (n, A)."""
    players = np.zeros(len(features), np.int8)  # neither implementation reads the seat
    return (
        lost_cities_heuristic(players, features, masks),
        lost_cities_heuristic_reference(players, features, masks),
    )


@settings(max_examples=15, deadline=None)
@given(deal_seeds=st.lists(SEEDS, min_size=1, max_size=3), choice_seed=SEEDS, guided=st.booleans())
def test_kernel_matches_reference_on_played_positions(deal_seeds, choice_seed, guided):
    features, masks = positions(deal_seeds, choice_seed, guided)
    phase_play = features[:, PHASE] == 1.0
    assert phase_play.any() and (~phase_play).any()  # both phases are in the batch
    fast, reference = both(features, masks)
    assert fast.dtype == np.float64 and fast.shape == masks.shape
    assert np.array_equal(fast, reference)
    for i in range(0, len(features), 7):  # single rows too (every 7th keeps the test fast)
        fast_row, reference_row = both(features[i : i + 1], masks[i : i + 1])
        assert np.array_equal(fast_row, reference_row)
        assert np.array_equal(fast_row[0], fast[i])


def test_played_positions_reach_every_branch_of_the_rule():
    """Keeps the equality tests meaningful: the positions make the rule choose
    each kind of action (extend, open, discard, draw the deck, draw a pile)."""
    batches = [positions([1, 2, 3], 4, guided) for guided in (False, True)]
    features = np.concatenate([f for f, _ in batches])
    masks = np.concatenate([m for _, m in batches])
    sigma = lost_cities_heuristic_reference(np.zeros(len(masks), np.int8), features, masks)
    best = sigma.argmax(axis=1)
    own = features[:, spec.ENCODING_SLICES["own_expedition"]]
    opened = own.reshape(len(features), spec.NUM_COLORS, spec.RANKS_PER_COLOR).sum(axis=2) > 0
    plays = np.flatnonzero(best < spec.DISCARD)
    extends = opened[plays, best[plays] // spec.RANKS_PER_COLOR]
    assert extends.any() and (~extends).any()
    assert ((best >= spec.DISCARD) & (best < spec.DRAW_DECK)).any()
    assert (best == spec.DRAW_DECK).any() and (best >= spec.DRAW_PILE).any()


@settings(max_examples=15, deadline=None)
@given(data_seed=SEEDS, rows=st.integers(1, 64))
def test_kernel_matches_reference_on_arbitrary_count_rows(data_seed, rows):
    """Count-valued rows no game reaches (several cards per type, unplayable
    expeditions, multi-hot pile tops, random masks): the rule's edge cases,
    e.g. every legal score -inf, where numpy's argmax falls back to action 0."""
    generator = np.random.default_rng(data_seed)
    features = np.zeros((rows, spec.ENCODING_SIZE), np.float32)
    for name, high in (("own_hand", 3), ("own_expedition", 2), ("opp_expedition", 2)):
        part = spec.ENCODING_SLICES[name]
        features[:, part] = generator.integers(0, high + 1, (rows, part.stop - part.start))
    discards = features[:, spec.ENCODING_SLICES["discards"]].reshape(
        rows, spec.NUM_COLORS, spec.MAX_PILE, spec.RANKS_PER_COLOR
    )  # a view: writes land in features
    discards[:, :, 0, :] = generator.random((rows, spec.NUM_COLORS, spec.RANKS_PER_COLOR)) < 0.15
    # random legal sets over all actions, over the phase-0 actions only, or over the draws
    # only (where a pile's 1.0 has to beat the deck's 0.0); at least one legal per row
    masks = (generator.random((rows, spec.NUM_ACTIONS)) < generator.random((rows, 1))).astype(
        np.uint8
    )
    phase = generator.integers(0, 3, rows)
    masks[phase == 1, spec.DRAW_DECK :] = 0
    masks[phase == 2, : spec.DRAW_DECK] = 0
    masks[np.arange(rows), generator.integers(0, spec.NUM_ACTIONS, rows)] = 1
    masks *= generator.integers(1, 3, (rows, 1), dtype=np.uint8)  # numpy weighs a 2 twice
    fast, reference = both(features, masks)
    assert np.array_equal(fast, reference)


def test_rows_without_legal_actions_match_the_reference_bit_for_bit():
    """No game reaches them, but both give the same NaN row (0 / 0 shares)."""
    features, masks = positions([2], choice_seed=2, guided=False, max_rows_per_game=3)
    masks[1] = 0
    with np.errstate(invalid="ignore"):
        fast, reference = both(features, masks)
    assert np.isnan(fast[1]).all()
    assert np.array_equal(fast.view(np.uint64), reference.view(np.uint64))


@settings(max_examples=10, deadline=None)
@given(deal_seed=SEEDS, choice_seed=SEEDS, order_seed=SEEDS)
def test_batch_composition_does_not_matter(deal_seed, choice_seed, order_seed):
    features, masks = positions([deal_seed], choice_seed, guided=True, max_rows_per_game=120)
    players = np.zeros(len(features), np.int8)
    whole = lost_cities_heuristic(players, features, masks)
    # a shuffled subset with repeats: row i of any batch is sigma of row i alone
    rows = np.random.default_rng(order_seed).integers(0, len(features), len(features))
    subset = lost_cities_heuristic(players, features[rows], masks[rows])
    assert np.array_equal(subset, whole[rows])
    for i in range(0, len(features), 5):
        alone = lost_cities_heuristic(players[:1], features[i : i + 1], masks[i : i + 1])
        assert np.array_equal(alone[0], whole[i])


def test_read_only_and_non_contiguous_inputs_work():
    features, masks = positions([11, 12], choice_seed=3, guided=False)
    players = np.zeros(len(features), np.int8)
    expected = lost_cities_heuristic_reference(players, features, masks)
    features.flags.writeable = False
    masks.flags.writeable = False
    assert np.array_equal(lost_cities_heuristic(players, features, masks), expected)
    # every other row (strided), float64 features and bool masks are normalised first
    strided = lost_cities_heuristic(players[::2], features[::2], masks[::2])
    assert np.array_equal(strided, expected[::2])
    converted = lost_cities_heuristic(players, features.astype(np.float64), masks.astype(bool))
    assert np.array_equal(converted, expected)


def test_out_is_written_in_place():
    features, masks = positions([5], choice_seed=6, guided=True, max_rows_per_game=50)
    players = np.zeros(len(features), np.int8)
    out = np.full(masks.shape, np.nan)
    returned = lost_cities_heuristic(players, features, masks, out=out)
    assert returned is out
    assert np.array_equal(out, lost_cities_heuristic_reference(players, features, masks))
    with pytest.raises(ValueError, match="out must be"):
        lost_cities_heuristic(players, features, masks, out=np.empty(masks.shape, np.float32))
    with pytest.raises(ValueError, match="out must be"):
        lost_cities_heuristic(players, features, masks, out=np.empty(masks.shape[::-1]).T)


def test_bad_shapes_are_rejected_and_empty_batches_work():
    features, masks = positions([9], choice_seed=1, guided=False, max_rows_per_game=4)
    players = np.zeros(len(features), np.int8)
    with pytest.raises(ValueError, match="same n"):
        lost_cities_heuristic(players, features[:3], masks)
    with pytest.raises(ValueError, match="players"):
        lost_cities_heuristic(players[:3], features, masks)
    with pytest.raises(ValueError, match="columns"):
        lost_cities_heuristic(players, features, masks[:, :-1])
    with pytest.raises(ValueError, match="columns"):
        lost_cities_heuristic(players, features[:, :100], masks)
    empty = lost_cities_heuristic(players[:0], features[:0], masks[:0])
    assert empty.shape == (0, spec.NUM_ACTIONS)


def test_the_registry_uses_the_kernel():
    assert INITIAL_STRATEGIES["lost_cities_heuristic"] is lost_cities_heuristic
