"""Deep CFR traversals: the documented face of the Cython kernel, and its Python twin.

A traversal is identified by ``TraversalId(iteration, player, index)``; every
random number it draws comes from streams keyed by (seed, iteration, player,
index, purpose), so its result depends on the ID alone. The trainer builds
the canonical list of IDs per iteration and player, and an executor decides
only how that list is split across processes.

Schemes (see ``_traverse.pyx`` for the algorithms):
``external``: textbook external sampling, for Kuhn and Leduc.
``rollout``: fixed-policy trajectory plus branching nodes valued by
on-policy rollouts, for Lost Cities (and measured on Leduc).

Its pure-Python twin, ``lostcities.reference.traversal.PyTraverser``, re-implements
both schemes over the same game kernels and streams; property tests require identical
samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lostcities.cfr._traverse import SCHEMES, Traverser
from lostcities.cfr.initial import make_initial_strategy
from lostcities.config import TraversalConfig
from lostcities.games._state import GameState

CHANCE, TERMINAL = -1, -2

__all__ = [
    "SCHEMES",
    "Samples",
    "TraversalId",
    "TraversalResult",
    "make_traverser",
    "run_traversals",
]


class TraversalId(NamedTuple):
    """Stable identity of one traversal; sorting by it fixes the merge order."""

    iteration: int
    player: int
    index: int


class Samples(NamedTuple):
    """features float32 (n, d), masks uint8 (n, A), targets float32 (n, A)."""

    features: np.ndarray
    masks: np.ndarray
    targets: np.ndarray


@dataclass
class TraversalResult:
    id: TraversalId
    advantage: Samples  # targets = instantaneous regrets of the traverser
    strategy: Samples  # targets = sigma of the opponent at its sampled nodes
    stats: dict[str, int]


def make_traverser(
    prototype: GameState,
    policy,
    cfg: TraversalConfig,
    seed: int,
    utility_scale: float = 1.0,
    win_loss: bool = False,
) -> Traverser:
    """The Cython traverser for one game; ``policy`` is the sigma callback
    (see ``lostcities.cfr.policy.AdvantagePolicy``). ``cfg``'s values are validated by
    lostcities/config_checks.py."""
    sampling = None
    if cfg.sampling_policy != "uniform":  # uniform is the kernel's own fast path
        fixed = make_initial_strategy(cfg.sampling_policy)

        def sampling(players, features, masks, out):
            out[:] = fixed(players, features, masks)

    return Traverser(
        prototype,
        policy,
        scheme=cfg.scheme,
        seed=seed,
        branch_prob=cfg.branch_prob,
        rollouts=cfg.rollouts,
        utility_scale=utility_scale,
        win_loss=win_loss,
        sampling_policy=sampling,
        inference_batch=cfg.inference_batch,
        debug_checks=cfg.debug_checks,
    )


def run_traversals(traverser, ids: list[TraversalId]) -> list[TraversalResult]:
    """Run ``ids`` in order with one traverser (kernel or twin)."""
    results = []
    for tid in ids:
        adv, strat, stats = traverser.run(tid.iteration, tid.player, tid.index)
        results.append(TraversalResult(tid, Samples(*adv), Samples(*strat), stats))
    return results
