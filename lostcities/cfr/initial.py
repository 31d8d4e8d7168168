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
has twins: ``lost_cities_heuristic`` runs the C kernel (``_heuristic.pyx``), and
``lostcities.reference.heuristic.lost_cities_heuristic_reference`` is the readable numpy
rule it is property-tested against (``tests/cfr/test_heuristic_kernel.py``), with
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


def lost_cities_heuristic(
    players: np.ndarray,
    features: np.ndarray,
    masks: np.ndarray,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The Lost Cities heuristic (rule: its numpy twin in lostcities/reference/heuristic.py), in C.

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
