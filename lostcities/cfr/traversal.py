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

``PyTraverser`` re-implements both schemes in plain Python over the same
game kernels and streams; property tests require identical samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lostcities.cfr._traverse import SCHEMES, Traverser
from lostcities.cfr.initial import make_initial_strategy
from lostcities.config import TraversalConfig
from lostcities.games._state import GameState
from lostcities.rng import Purpose, Stream, stream_key

CHANCE, TERMINAL = -1, -2

__all__ = [
    "SCHEMES",
    "PyTraverser",
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


class PyTraverser:
    """Pure-Python twin of the Cython ``Traverser``: same arguments, same draws."""

    def __init__(
        self,
        prototype: GameState,
        policy,
        scheme: str = "external",
        seed: int = 0,
        branch_prob: float = 0.1,
        rollouts: int = 1,
        utility_scale: float = 1.0,
        win_loss: bool = False,
        sampling_policy=None,
    ) -> None:
        self.prototype = prototype.copy()
        self.policy = policy
        self.scheme = scheme
        self.seed = seed
        self.branch_prob = branch_prob
        self.rollouts = rollouts
        self.utility_scale = utility_scale
        self.win_loss = win_loss
        self.sampling_policy = sampling_policy
        self.num_actions = prototype.num_actions

    # --- shared helpers ---------------------------------------------------------
    def _utility(self, payoff: float) -> float:
        if self.win_loss:
            payoff = float(int(payoff > 0) - int(payoff < 0))
        return payoff * self.utility_scale

    def _query(self, players: list[int], features: list, masks: list) -> np.ndarray:
        self.stats["queries"] += 1
        self.stats["query_rows"] += len(players)
        out = np.zeros((len(players), self.num_actions))
        self.policy(
            np.array(players, dtype=np.int8),
            np.array(features, dtype=np.float32),
            np.array(masks, dtype=np.uint8),
            out,
        )
        return out

    def run(self, iteration: int, player: int, index: int):
        def stream(purpose: int) -> Stream:
            return Stream(stream_key(self.seed, iteration, player, index, purpose))

        self.chance, self.opp = stream(Purpose.CHANCE), stream(Purpose.OPPONENT)
        self.trav, self.branch = stream(Purpose.TRAVERSER), stream(Purpose.BRANCH)
        self.rollout_key = stream_key(self.seed, iteration, player, index, Purpose.ROLLOUT)
        self.adv: list[tuple] = []
        self.strat: list[tuple] = []
        self.stats = dict.fromkeys(
            ("nodes", "terminals", "branch_nodes", "playouts", "queries", "query_rows"), 0
        )
        root = self.prototype.copy()
        root.reset_from_state(stream_key(self.seed, iteration, player, index, Purpose.DEAL))
        if self.scheme == "external":
            self._external(root, player)
        else:
            self._rollout_scheme(root, player)
        return self._pack(self.adv), self._pack(self.strat), self.stats

    def _pack(self, rows: list[tuple]):
        d, a = self.prototype.encoding_size, self.num_actions
        if not rows:
            return (
                np.zeros((0, d), np.float32),
                np.zeros((0, a), np.uint8),
                np.zeros((0, a), np.float32),
            )
        f, m, y = zip(*rows, strict=True)
        return (np.array(f, np.float32), np.array(m, np.uint8), np.array(y, np.float32))

    def _sample_chance(self, state, stream: Stream) -> None:
        actions, probs = state.chance()
        state.step(int(actions[stream.choice(probs)]))

    # --- external sampling --------------------------------------------------------
    def _external(self, state, traverser: int) -> float:
        self.stats["nodes"] += 1
        cur = state.player()
        if cur == TERMINAL:
            self.stats["terminals"] += 1
            return self._utility(state.payoffs()[traverser])
        if cur == CHANCE:
            child = state.copy()
            self._sample_chance(child, self.chance)
            return self._external(child, traverser)
        mask = state.mask()
        features = state.encoding(cur)
        sigma = self._query([cur], [features], [mask])[0]
        if cur == traverser:
            values = np.zeros(self.num_actions)
            value = 0.0
            for a in range(self.num_actions):
                if mask[a]:
                    child = state.copy()
                    child.step(a)
                    values[a] = self._external(child, traverser)
                    value += sigma[a] * values[a]
            regrets = np.where(mask.astype(bool), values - value, 0.0)
            self.adv.append((features, mask, regrets.astype(np.float32)))
            return value
        self.strat.append((features, mask, sigma.astype(np.float32)))
        child = state.copy()
        child.step(self.opp.choice(sigma))
        return self._external(child, traverser)

    # --- trajectory + branching with rollouts ---------------------------------------
    def _rollout_scheme(self, state, traverser: int) -> None:
        branches = []
        while True:
            cur = state.player()
            self.stats["nodes"] += 1
            if cur == TERMINAL:
                self.stats["terminals"] += 1
                break
            if cur == CHANCE:
                self._sample_chance(state, self.chance)
                continue
            if cur == traverser:
                legal = state.legal()
                if self.branch.uniform() < self.branch_prob:
                    branches.append(state.copy())
                if self.sampling_policy is None:
                    state.step(int(legal[self.trav.below(len(legal))]))
                else:
                    probs = np.zeros((1, self.num_actions))
                    self.sampling_policy(
                        np.array([cur], np.int8),
                        state.encoding(cur)[None],
                        state.mask()[None],
                        probs,
                    )
                    state.step(self.trav.choice(probs[0]))
                continue
            mask, features = state.mask(), state.encoding(cur)
            sigma = self._query([cur], [features], [mask])[0]
            self.strat.append((features, mask, sigma.astype(np.float32)))
            state.step(self.opp.choice(sigma))
        if not branches:
            return
        self.stats["branch_nodes"] = len(branches)
        features = [b.encoding(traverser) for b in branches]
        masks = [b.mask() for b in branches]
        sigma = self._query([traverser] * len(branches), features, masks)
        starts, streams, owners = [], [], []
        for b, branch in enumerate(branches):
            for a in range(self.num_actions):
                if masks[b][a]:
                    for r in range(self.rollouts):
                        # common random numbers across the actions of (b, r)
                        playout = Stream(stream_key(self.rollout_key, b, r, 0, 0))
                        start = branch.copy()
                        start.step(a)
                        playout.state = start.reshuffle_from_state(playout.state)
                        starts.append(start)
                        streams.append(playout)
                        owners.append((b, a))
        self.stats["playouts"] = len(starts)
        # (branch, action, start state) of every playout, kept for inspection by tests
        self.playout_starts = [
            (b, a, start.copy()) for (b, a), start in zip(owners, starts, strict=True)
        ]
        values = self._playouts(starts, streams, traverser)
        q = np.zeros((len(branches), self.num_actions))
        for (b, a), value in zip(owners, values, strict=True):
            q[b, a] += value / self.rollouts
        for b in range(len(branches)):
            v = 0.0
            for a in range(self.num_actions):
                v += sigma[b, a] * q[b, a]
            regrets = np.where(masks[b].astype(bool), q[b] - v, 0.0)
            self.adv.append((features[b], masks[b], regrets.astype(np.float32)))

    def _playouts(self, states: list, streams: list[Stream], traverser: int) -> list[float]:
        values = [0.0] * len(states)
        live = [True] * len(states)
        while True:
            rows, players, features, masks = [], [], [], []
            for j, state in enumerate(states):
                if not live[j]:
                    continue
                while (cur := state.player()) == CHANCE:
                    self.stats["nodes"] += 1
                    self._sample_chance(state, streams[j])
                self.stats["nodes"] += 1
                if cur == TERMINAL:
                    self.stats["terminals"] += 1
                    values[j] = self._utility(state.payoffs()[traverser])
                    live[j] = False
                    continue
                rows.append(j)
                players.append(cur)
                masks.append(state.mask())
                features.append(state.encoding(cur))
            if not rows:
                return values
            out = self._query(players, features, masks)
            for i, j in enumerate(rows):
                states[j].step(streams[j].choice(out[i]))
