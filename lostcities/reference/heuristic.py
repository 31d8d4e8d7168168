"""Pure-numpy twin of the Lost Cities heuristic kernel (``lostcities/cfr/_heuristic.pyx``).

The readable rule that ``lostcities.cfr.initial.lost_cities_heuristic`` (the C kernel:
sigma_1, the warm-start seed and the traverser's sampling policy) computes; the property
tests (tests/cfr/test_heuristic_kernel.py) require bit-identical float64 output.
"""

from __future__ import annotations

import numpy as np

from lostcities.cfr.initial import EXPLORE, OPEN_POINTS, RANK_VALUES, uniform
from lostcities.games import lost_cities_spec as spec

_S = spec.ENCODING_SLICES


def lost_cities_heuristic_reference(
    players: np.ndarray, features: np.ndarray, masks: np.ndarray
) -> np.ndarray:
    """Extend open colors with the smallest gap, open a color only with
    ``OPEN_POINTS`` playable points in hand (lowest card first), otherwise
    discard the card least useful to both sides; draw a discard only when it
    extends an open color with no gap, else draw from the deck. Mixed with
    ``EXPLORE`` uniform so every legal action keeps positive probability."""
    n = len(features)
    colors, ranks = spec.NUM_COLORS, spec.RANKS_PER_COLOR
    hand = features[:, _S["own_hand"]].reshape(n, colors, ranks).astype(np.float64)
    mine = features[:, _S["own_expedition"]].reshape(n, colors, ranks)
    theirs = features[:, _S["opp_expedition"]].reshape(n, colors, ranks)
    rank_idx = np.arange(ranks)
    # highest number rank played per color (0 when none), and whether the color is open
    top = np.where(mine[:, :, 1:] > 0, rank_idx[1:], 0).max(axis=2)  # (n, colors)
    opened = mine.sum(axis=2) > 0
    above = rank_idx[None, None, :] > top[:, :, None]  # (n, colors, ranks)
    playable_points = (hand * RANK_VALUES * above).sum(axis=2)  # (n, colors)

    score = np.full(masks.shape, -np.inf)
    # --- phase 0: plays -------------------------------------------------------------------
    gap = rank_idx[None, None, :] - top[:, :, None] - 1  # skipped ranks if played now
    extend = np.where(opened[:, :, None] & (rank_idx[None, None, :] > 0), 3.0 - 0.5 * gap, -np.inf)
    lowest = np.argmax((hand[:, :, 1:] > 0) & above[:, :, 1:], axis=2) + 1  # lowest playable
    rich = (playable_points >= OPEN_POINTS)[:, :, None]
    opening = np.where(
        ~opened[:, :, None] & rich & ((rank_idx == 0) | (rank_idx == lowest[:, :, None])),
        2.0,
        -np.inf,
    )
    play = np.maximum(extend, opening).reshape(n, spec.NUM_CARD_TYPES)
    score[:, spec.PLAY : spec.DISCARD] = play
    # --- phase 0: discards (only when no play is worth it) -----------------------------------
    dead = (~above).reshape(n, -1) & opened.repeat(ranks, axis=1)  # can no longer play it
    value = np.tile(RANK_VALUES / 10.0, colors)[None, :]
    helps_them = (theirs.sum(axis=2) > 0).repeat(ranks, axis=1)
    score[:, spec.DISCARD : spec.DRAW_DECK] = 0.5 + dead - value - 0.5 * helps_them - 1.0
    # --- phase 1: draws ---------------------------------------------------------------------
    score[:, spec.DRAW_DECK] = 0.0
    tops = features[:, _S["discards"]].reshape(n, colors, spec.MAX_PILE, ranks)[:, :, 0, :]
    top_rank = np.where(tops.sum(axis=2) > 0, tops.argmax(axis=2), -1)  # (n, colors)
    no_gap = opened & (top_rank == top + 1)
    score[:, spec.DRAW_PILE :] = np.where(no_gap, 1.0, -np.inf)

    legal = masks.astype(bool)
    score = np.where(legal, score, -np.inf)
    best = score.argmax(axis=1)
    sigma = EXPLORE * uniform(players, features, masks)
    sigma[np.arange(n), best] += 1.0 - EXPLORE
    return sigma
