"""Deep CFR traversals: the documented face of the Cython kernel, and its Python twin.

A traversal is identified by ``TraversalId(iteration, player, index)``; every
random number it draws comes from streams keyed by (seed, iteration, player,
index, purpose), so its result depends on the ID alone. The trainer builds
the canonical list of IDs per iteration and player, and an executor decides
only how that list is split across processes.

Schemes (see ``_traverse.pyx`` for the algorithms):
``external``: textbook external sampling, for Kuhn and Leduc.
``rollout``: fixed-policy trajectory plus branching nodes valued by
on-policy rollouts, for Lost Cities (and checked on Leduc). Its action values come
from playouts to the end or from sigma's learned history value (``action_values``).

A traversal is a regret traversal (``kind`` ``regret``: advantage and strategy
samples) or, with learned action values, a value traversal (``value``: the value
network's training samples, from streams keyed apart from the regret traversal of
the same (iteration, player, index)).

Its pure-Python twin, ``lostcities.reference.traversal.PyTraverser``, re-implements
both schemes over the same game kernels and streams; property tests require identical
samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from lostcities.cfr._traverse import SCHEMES, Traverser
from lostcities.cfr.initial import make_initial_strategy
from lostcities.config import (
    DeterminismConfig,
    GameConfig,
    NetworkConfig,
    TraversalConfig,
    ValueConfig,
)
from lostcities.games._state import GameState

CHANCE, TERMINAL = -1, -2
REGRET, VALUE = "regret", "value"  # the kinds of traversal

__all__ = [
    "REGRET",
    "SCHEMES",
    "VALUE",
    "Samples",
    "TraversalId",
    "TraversalResult",
    "TraversalSpec",
    "ValueSamples",
    "make_traverser",
    "run_traversals",
    "traverser_of",
]


class TraversalId(NamedTuple):
    """Stable identity of one traversal; sorting by it fixes the merge order (a call
    runs IDs of one kind)."""

    iteration: int
    player: int
    index: int
    kind: str = REGRET

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.iteration, self.player, self.index)


class Samples(NamedTuple):
    """states uint8 (n, C): compact information states (``GameState.compact``, C =
    compact_size; ``lostcities.games.expand_states`` gives their features), masks uint8
    (n, A), targets float32 (n, A)."""

    states: np.ndarray
    masks: np.ndarray
    targets: np.ndarray


class ValueSamples(NamedTuple):
    """states uint8 (n, 2C): both seats' compact information states, the valued seat's
    first; targets float32 (n,): that seat's final utility under sigma."""

    states: np.ndarray
    targets: np.ndarray


@dataclass
class TraversalResult:
    id: TraversalId
    advantage: Samples | None  # targets = instantaneous regrets of the traverser
    strategy: Samples | None  # targets = sigma of the opponent at its sampled nodes
    stats: dict[str, int]
    values: ValueSamples | None = None  # a value traversal's samples (None otherwise)


@dataclass(frozen=True)
class TraversalSpec:
    """What traversal needs, in one piece: the trainer and every executor take it whole,
    and a worker process or Ray actor rebuilds its traverser from it (configs and plain
    values only, so it pickles)."""

    game: GameConfig
    network: NetworkConfig
    traversal: TraversalConfig
    seed: int
    determinism: DeterminismConfig = field(default_factory=DeterminismConfig)
    value: ValueConfig = field(default_factory=ValueConfig)

    @property
    def utility_scale(self) -> float:
        """Payoff units per game point."""
        return self.game.utility_scale

    @property
    def win_loss(self) -> bool:
        """Payoffs are +1 / 0 / -1 (win, draw, loss), not the score difference."""
        return self.game.utility == "win_loss"

    @property
    def batch_invariant(self) -> bool:
        """Every forward gives each row a result independent of its batch."""
        return self.determinism.batch_invariant_inference


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
        explore = cfg.sampling_explore

        def sampling(players, features, masks, out):
            out[:] = fixed(players, features, masks)
            if explore > 0:
                legal = masks.astype(np.float64)
                out *= 1.0 - explore
                out += explore * legal / legal.sum(axis=1, keepdims=True)

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
        value_fn=policy.values if cfg.action_values == "learned" else None,
        action_values=cfg.action_values,
        value_record=cfg.value_record,
    )


def traverser_of(spec: TraversalSpec, prototype: GameState, policy) -> Traverser:
    """The Cython traverser that ``spec`` describes, over ``prototype`` (the game kernel's
    initial state) with ``policy`` as sigma."""
    return make_traverser(
        prototype, policy, spec.traversal, spec.seed, spec.utility_scale, spec.win_loss
    )


def run_traversals(traverser, ids: list[TraversalId]) -> list[TraversalResult]:
    """Run ``ids`` in order with one traverser (kernel or twin)."""
    results = []
    for tid in ids:
        if tid.kind == VALUE:
            (states, targets), stats = traverser.run_values(*tid.key)
            results.append(TraversalResult(tid, None, None, stats, ValueSamples(states, targets)))
        else:
            adv, strat, stats = traverser.run(*tid.key)
            results.append(TraversalResult(tid, Samples(*adv), Samples(*strat), stats))
    return results
