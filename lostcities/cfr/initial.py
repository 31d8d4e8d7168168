"""sigma_1: the strategy a player follows before its first advantage network exists.

Regret matching needs no particular first strategy: its regret bound only
uses sigma_t = RM(R_{t-1}) for t >= 2 (with R_0 = 0 any sigma_1 adds nothing
to the bound), so CFR may start from any fixed strategy. The textbook start
is uniform. On Lost Cities a uniform start makes the first iterations'
rollouts open every color at random, so early regrets say "playing any card
is fine" and CFR needs many iterations to unlearn it; starting from a simple
heuristic makes the first regrets relative to sensible play.

Each initial strategy maps (players int8 (n,), features float32 (n, d),
masks uint8 (n, A)) to sigma float64 (n, A), reading only the acting
player's information-state features.

The Lost Cities heuristic is evaluated on every queried row of a traversal
(as sigma_1, the warm-start seed and the traverser's sampling policy), so it
has twins: ``lost_cities_heuristic`` runs the C kernel (``_heuristic.pyx``),
and ``lost_cities_heuristic_reference`` is the readable numpy rule it is
property-tested against (``tests/cfr/test_heuristic_kernel.py``), with
bit-identical float64 output required.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lostcities.cfr._heuristic import lost_cities_heuristic_into
from lostcities.games import lost_cities_spec as spec

InitialStrategy = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def uniform(players: np.ndarray, features: np.ndarray, masks: np.ndarray) -> np.ndarray:
    legal = masks.astype(np.float64)
    return legal / legal.sum(axis=1, keepdims=True)


# Lost Cities heuristic ------------------------------------------------------------------------
EXPLORE = 0.1  # probability mass spread uniformly over legal actions (keeps full support)
OPEN_POINTS = 25  # open a color only holding this many playable number points of it
_S = spec.ENCODING_SLICES
RANK_VALUES = np.array([0] + list(range(2, 11)), dtype=np.float64)  # face value by rank


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


def lost_cities_heuristic(
    players: np.ndarray,
    features: np.ndarray,
    masks: np.ndarray,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The Lost Cities heuristic (rule: :func:`lost_cities_heuristic_reference`), in C.

    ``players`` int8 (n,) is accepted for the initial-strategy signature and not
    read; ``features`` (n, d) is used as float32 and ``masks`` (n, A) as uint8,
    copied only when they are not already C-contiguous arrays of those dtypes
    (read-only arrays are fine). Returns sigma float64 (n, A), bit-identical to
    the reference; pass ``out`` (float64 (n, A), C-contiguous, writeable) to
    have it written in place and returned instead of a new array.
    """
    features = np.ascontiguousarray(features, dtype=np.float32)
    masks = np.ascontiguousarray(masks, dtype=np.uint8)
    if features.ndim != 2 or masks.ndim != 2 or len(features) != len(masks):
        raise ValueError(
            f"features (n, d) and masks (n, A) must be 2-D with the same n, "
            f"got {features.shape} and {masks.shape}"
        )
    if np.shape(players) != (len(masks),):
        raise ValueError(f"players must have shape ({len(masks)},), got {np.shape(players)}")
    if out is None:
        out = np.empty(masks.shape, dtype=np.float64)
    elif not (
        isinstance(out, np.ndarray)
        and out.dtype == np.float64
        and out.shape == masks.shape
        and out.flags.c_contiguous
        and out.flags.writeable
    ):
        raise ValueError(
            f"out must be a writeable C-contiguous float64 array of shape {masks.shape}"
        )
    lost_cities_heuristic_into(features, masks, out, RANK_VALUES, EXPLORE, OPEN_POINTS)
    return out


INITIAL_STRATEGIES: dict[str, InitialStrategy] = {
    "uniform": uniform,
    "lost_cities_heuristic": lost_cities_heuristic,
}


def make_initial_strategy(name: str) -> InitialStrategy:
    if name not in INITIAL_STRATEGIES:
        raise ValueError(
            f"traversal.initial_strategy must be one of {sorted(INITIAL_STRATEGIES)}, got {name!r}"
        )
    return INITIAL_STRATEGIES[name]
