"""Pure-Python twin of the traversal kernel (``lostcities/cfr/_traverse.pyx``).

``PyTraverser`` takes the ``Traverser``'s arguments and draws the same random numbers
from the same keyed streams, in plain Python over the same game kernels: the property
tests (tests/cfr/test_traversal.py) require identical samples, stats and playout starts.
Slow; for tests and benchmarks only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lostcities.games._state import GameState
from lostcities.rng import Purpose, Stream, ValueStream, stream_key

CHANCE, TERMINAL = -1, -2
STATS = ("nodes", "terminals", "branch_nodes", "playouts", "queries", "query_rows")


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
        value_fn=None,
        action_values: str = "playout",
        value_record: float = 0.0,
    ) -> None:
        self.prototype = prototype.copy()
        self.value_fn = value_fn
        self.action_values = action_values
        self.value_record = value_record
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

    def _value_query(self, players: list[int], features: list) -> np.ndarray:
        self.stats["value_queries"] += 1
        self.stats["value_rows"] += len(players)
        out = np.zeros(len(players))
        self.value_fn(np.array(players, dtype=np.int8), np.array(features, np.float32), out)
        return out

    @staticmethod
    def _history(state, player: int) -> np.ndarray:
        return np.concatenate([state.encoding(player), state.encoding(1 - player)])

    @staticmethod
    def _compact_history(state, player: int) -> np.ndarray:
        # the value sample's compact form: both seats' compact states, player's first
        return np.concatenate([state.compact_view(player), state.compact_view(1 - player)])

    def _begin(self, key: Callable[[int], int]) -> None:
        # key(purpose): the traversal's stream key for that purpose
        self.chance, self.opp = Stream(key(Purpose.CHANCE)), Stream(key(Purpose.OPPONENT))
        self.trav, self.branch = Stream(key(Purpose.TRAVERSER)), Stream(key(Purpose.BRANCH))
        self.rollout_key = key(Purpose.ROLLOUT)
        self.adv: list[tuple] = []
        self.strat: list[tuple] = []
        self.stats = dict.fromkeys(STATS, 0)
        if self.action_values == "learned":
            self.stats |= {"value_queries": 0, "value_rows": 0}

    def run(self, iteration: int, player: int, index: int):
        def key(purpose: int) -> int:
            return stream_key(self.seed, iteration, player, index, purpose)

        self._begin(key)
        root = self.prototype.copy()
        root.reset_from_state(key(Purpose.DEAL))
        if self.scheme == "external":
            self._external(root, player)
        else:
            self._rollout_scheme(root, player, values=False)
        return self._pack(self.adv), self._pack(self.strat), self.stats

    def run_values(self, iteration: int, player: int, index: int):
        """The twin of ``Traverser.run_values``: (compact histories, targets), stats."""
        base = stream_key(self.seed, iteration, player, index, Purpose.VALUE)

        def key(word: int) -> int:
            return stream_key(base, word, 0, 0, 0)

        self._begin(key)
        self.record = Stream(key(ValueStream.RECORD))
        self.explore_key = key(ValueStream.EXPLORE)
        self.vals: list[tuple] = []  # (compact history, playout, seat)
        root = self.prototype.copy()
        root.reset_from_state(key(Purpose.DEAL))
        targets = self._rollout_scheme(root, player, values=True)
        width = 2 * self.prototype.compact_size
        states = np.array([h for h, _, _ in self.vals], np.uint8).reshape(-1, width)
        self.stats["value_samples"] = len(self.vals)
        return (states, np.array(targets, np.float32)), self.stats

    def _pack(self, rows: list[tuple]):
        c, a = self.prototype.compact_size, self.num_actions
        if not rows:
            return (
                np.zeros((0, c), np.uint8),
                np.zeros((0, a), np.uint8),
                np.zeros((0, a), np.float32),
            )
        s, m, y = zip(*rows, strict=True)
        return (np.array(s, np.uint8), np.array(m, np.uint8), np.array(y, np.float32))

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
            self.adv.append((state.compact_view(cur), mask, regrets.astype(np.float32)))
            return value
        self.strat.append((state.compact_view(cur), mask, sigma.astype(np.float32)))
        child = state.copy()
        child.step(self.opp.choice(sigma))
        return self._external(child, traverser)

    # --- trajectory + branching with rollouts ---------------------------------------
    def _rollout_scheme(self, state, traverser: int, values: bool):
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
            if not values:
                self.strat.append((state.compact_view(cur), mask, sigma.astype(np.float32)))
            state.step(self.opp.choice(sigma))
        if not branches:
            return []
        if values:
            return self._value_playouts(branches, traverser)
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
        if self.action_values == "learned":
            action_value = self._child_values(starts, streams, traverser)
        else:
            action_value = self._playouts(starts, streams, traverser)
        q = np.zeros((len(branches), self.num_actions))
        for (b, a), value in zip(owners, action_value, strict=True):
            q[b, a] += value / self.rollouts
        for b in range(len(branches)):
            v = 0.0
            for a in range(self.num_actions):
                v += sigma[b, a] * q[b, a]
            regrets = np.where(masks[b].astype(bool), q[b] - v, 0.0)
            compact = branches[b].compact_view(traverser)
            self.adv.append((compact, masks[b], regrets.astype(np.float32)))
        return []

    def _value_playouts(self, branches: list, traverser: int) -> list[float]:
        starts, streams = [], []
        for b, branch in enumerate(branches):
            start = branch.copy()
            legal = start.legal()
            explore = Stream(stream_key(self.explore_key, b, 0, 0, 0))
            start.step(int(legal[explore.below(len(legal))]))
            starts.append(start)
        for b, start in enumerate(starts):
            playout = Stream(stream_key(self.rollout_key, b, 0, 0, 0))
            playout.state = start.reshuffle_from_state(playout.state)
            streams.append(playout)
        self.stats["branch_nodes"] = self.stats["playouts"] = len(branches)
        value = self._playouts(starts, streams, traverser, record=True)
        return [value[j] if seat == traverser else -value[j] for _, j, seat in self.vals]

    def _past_chance(self, state, stream: Stream) -> int:
        """The kernel's ``_past_chance``: ``state`` through its chance nodes with a
        playout's ``stream``; the player to act, or TERMINAL. Counts the nodes passed."""
        while (cur := state.player()) == CHANCE:
            self.stats["nodes"] += 1
            self._sample_chance(state, stream)
        self.stats["nodes"] += 1
        return cur

    def _child_values(self, states: list, streams: list[Stream], traverser: int) -> list[float]:
        values = [0.0] * len(states)
        rows, features = [], []
        for j, state in enumerate(states):
            cur = self._past_chance(state, streams[j])
            if cur == TERMINAL:
                self.stats["terminals"] += 1
                values[j] = self._utility(state.payoffs()[traverser])
                continue
            rows.append(j)
            features.append(self._history(state, traverser))
        if rows:
            out = self._value_query([traverser] * len(rows), features)
            for i, j in enumerate(rows):
                values[j] = float(out[i])
        return values

    def _playouts(
        self, states: list, streams: list[Stream], traverser: int, record: bool = False
    ) -> list[float]:
        values = [0.0] * len(states)
        live = [True] * len(states)
        first = [True] * len(states)
        while True:
            rows, players, features, masks = [], [], [], []
            for j, state in enumerate(states):
                if not live[j]:
                    continue
                cur = self._past_chance(state, streams[j])
                if cur == TERMINAL:
                    self.stats["terminals"] += 1
                    values[j] = self._utility(state.payoffs()[traverser])
                    live[j] = False
                    continue
                if record and (first[j] or self.record.uniform() < self.value_record):
                    for seat in (cur, 1 - cur):
                        self.vals.append((self._compact_history(state, seat), j, seat))
                first[j] = False
                rows.append(j)
                players.append(cur)
                masks.append(state.mask())
                features.append(state.encoding(cur))
            if not rows:
                return values
            out = self._query(players, features, masks)
            for i, j in enumerate(rows):
                states[j].step(streams[j].choice(out[i]))
