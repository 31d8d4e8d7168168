"""Strategies from networks: regret matching on predicted advantages.

``AdvantagePolicy`` is the callback the traversal kernel queries at every
decision node: it holds each player's current advantage network and turns
predicted advantages into sigma by regret matching. ``NetworkForward`` is the
one place where traversal and evaluation run a network on a batch of rows:
torch's batched forward, or with ``batch_invariant`` a forward whose per-row
result does not depend on the other rows of the batch (determinism=strict).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from lostcities.cfr.inference import RowwiseMLP
from lostcities.cfr.initial import InitialStrategy, make_initial_strategy
from lostcities.cfr.initial import uniform as uniform_initial
from lostcities.config import NetworkConfig, TraversalConfig
from lostcities.perf.compile import state_dict_arrays


class NonFiniteError(ValueError):
    """A network predicted NaN or inf where a strategy is computed; the one-line message
    names the network's player and iteration."""


class NetworkForward:
    """``net`` applied to features float32 (n, d) -> float32 (n, A), no autograd.

    With ``batch_invariant`` each row's output is bit-identical whatever rows share its
    batch: an MLP runs on the fixed-order per-row kernel (lostcities/cfr/inference.py,
    measured in benchmarks/bench_inference.py); any other module runs one row per forward
    (a fixed shape, so a fixed BLAS path). Without it, an MLP on the CPU still takes the
    per-row kernel for batches of at most ``SMALL_BATCH`` rows: it skips the zero inputs
    (~93 of Lost Cities' 1077) and torch's per-call overhead, so it wins for single rows
    (the traversal's trajectory queries) and breaks even by ``SMALL_BATCH``;
    ``small_batch`` sets the bound (the value network, whose input is twice as sparse, runs
    it at every size). benchmarks/bench_inference.py measures both. Weights are read when
    this object is made: build a new one after training the network.
    """

    SMALL_BATCH = 64

    def __init__(
        self,
        net: torch.nn.Module,
        device: torch.device,
        batch_invariant: bool,
        small_batch: int = SMALL_BATCH,
    ) -> None:
        self.net = net
        self.small_batch = small_batch
        self.device = device
        self.rowwise: RowwiseMLP | None = None  # every batch (batch_invariant)
        self.small: RowwiseMLP | None = None  # batches of at most SMALL_BATCH rows
        self.per_row = False
        try:
            kernel = RowwiseMLP.from_module(net)
        except TypeError:  # not an MLP
            kernel = None
            self.per_row = batch_invariant
        if batch_invariant:
            self.rowwise = kernel
        elif torch.device(device).type == "cpu":
            self.small = kernel

    def __call__(self, features: np.ndarray) -> np.ndarray:
        if self.rowwise is not None:
            return self.rowwise.forward(np.ascontiguousarray(features, dtype=np.float32))
        if self.small is not None and len(features) <= self.small_batch:
            return self.small.forward(np.ascontiguousarray(features, dtype=np.float32))
        with torch.inference_mode():
            # np.require copies only read-only input (e.g. GameTree encodings), not the hot path
            x = torch.from_numpy(np.require(features, np.float32, "CW")).to(self.device)
            if self.per_row:
                out = torch.cat([self.net(x[i : i + 1]) for i in range(len(x))])
            else:
                out = self.net(x)
        return out.float().cpu().numpy()


def regret_matching(advantages: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """sigma from advantages, both (n, A); masks (n, A) uint8/bool.

    Positive advantages, normalised over legal actions. A row with no positive
    legal advantage plays its argmax legal action (Brown et al. 2019 found the
    argmax measurably better than uniform there).
    """
    legal = masks.astype(bool)
    positive = np.where(legal, np.maximum(advantages, 0.0), 0.0).astype(np.float64)
    totals = positive.sum(axis=1, keepdims=True)
    sigma = np.divide(positive, totals, out=np.zeros_like(positive), where=totals > 0)
    flat = totals[:, 0] <= 0
    if flat.any():
        masked = np.where(legal[flat], advantages[flat], -np.inf)
        sigma[np.flatnonzero(flat), masked.argmax(axis=1)] = 1.0
    return sigma


def regret_weight(t: int) -> float:
    """W_t = 1 + 2 + ... + t: the linear-CFR weight behind an advantage net of iteration t."""
    return t * (t + 1) / 2


def masked_softmax(logits: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The policy network's distribution: softmax of logits float32 (n, A) over the legal
    actions of masks uint8 (n, A) -> float64 (n, A)."""
    out = torch.from_numpy(logits).masked_fill(~torch.from_numpy(masks.astype(bool)), -torch.inf)
    return torch.softmax(out, dim=1).double().numpy()


class AdvantagePolicy:
    """sigma_t for both players: regret matching on each player's advantage net.

    A player without a trained network yet plays ``initial`` (uniform by default;
    see :mod:`lostcities.cfr.initial`). With ``warm_start`` c > 0 the initial
    strategy also seeds the regrets (Brown & Sandholm 2016, strategy-based warm
    starting): sigma_{t+1} = RM(c * sigma_1 + R_t), where R_t = sum_i i * r_i is the
    linear-CFR cumulative regret. The network predicts the weighted mean
    R_t / W_t (W_t = sum_i i, passed to ``set_network``), so sigma is
    RM(prediction + c / W_t * sigma_1): the seed counts fully at first and fades
    as regrets accumulate. RM(c * sigma_1) = sigma_1, so iteration 1 is unchanged,
    and a constant initial regret leaves regret matching's average-regret
    bound going to zero.
    With ``cache=True`` sigma is memoised per (player, features) until the
    networks change: exact, and on Kuhn/Leduc nearly every query is a hit.
    It also carries sigma's learned history value (``set_value_network``, queried by
    ``values``) when the traversals value actions with it, so that one snapshot takes
    both to the workers.
    Rows are evaluated one player group at a time; a row's result depends
    only on its own features.
    """

    def __init__(
        self,
        device: str = "cpu",
        cache: bool = False,
        initial: InitialStrategy = uniform_initial,
        warm_start: float = 0.0,
        batch_invariant: bool = False,
        anchor: float = 0.0,
        anchor_decay: float = 0.0,
    ) -> None:
        self.nets: list[torch.nn.Module | None] = [None, None]
        self.forwards: list[NetworkForward | None] = [None, None]
        self.regret_weights = [1.0, 1.0]  # W_t of each player's network
        self.net_iterations = [0, 0]  # iteration each player's network was trained at
        self.initial = initial
        self.warm_start = warm_start  # >= 0: validated by lostcities/config_checks.py
        self.anchor = anchor  # >= 0: likewise
        self.anchor_decay = anchor_decay  # >= 0: likewise
        self.batch_invariant = batch_invariant
        self.device = torch.device(device)
        self.cache: dict[tuple[int, bytes], np.ndarray] | None = {} if cache else None
        self.value_net: torch.nn.Module | None = None
        self.value_forward: NetworkForward | None = None
        self.version = 0  # bumped on every network change; executors push on a new version

    @classmethod
    def from_config(
        cls, cfg: TraversalConfig, device: str = "cpu", batch_invariant: bool = False
    ) -> AdvantagePolicy:
        """sigma_1 of ``cfg`` (no networks yet): the trainer's and every worker's copy."""
        return cls(
            device,
            cache=cfg.cache_strategies,
            initial=make_initial_strategy(cfg.initial_strategy),
            warm_start=cfg.warm_start,
            batch_invariant=batch_invariant,
            anchor=cfg.anchor,
            anchor_decay=cfg.anchor_decay,
        )

    def set_network(
        self,
        player: int,
        net: torch.nn.Module | None,
        regret_weight: float = 1.0,
        iteration: int = 0,
    ) -> None:
        """``regret_weight``: W_t, the total linear-CFR weight of the regrets the
        network's mean prediction stands for (scales the warm start); ``iteration``:
        when it was trained (named in errors)."""
        self.nets[player] = net
        self.forwards[player] = (
            None if net is None else NetworkForward(net, self.device, self.batch_invariant)
        )
        self.regret_weights[player] = regret_weight
        self.net_iterations[player] = iteration
        self.version += 1
        if self.cache is not None:
            self.cache.clear()

    def set_value_network(self, net: torch.nn.Module | None) -> None:
        """sigma's learned history value: ``net`` maps both seats' information states
        (n, 2d) to the first seat's utility (n, 1)."""
        self.value_net = net
        self.value_forward = (
            None
            if net is None
            else NetworkForward(net, self.device, self.batch_invariant, small_batch=2**31)
        )
        self.version += 1

    def values(self, players: np.ndarray, features: np.ndarray, out: np.ndarray) -> None:
        """The traversal kernel's value callback: write the learned value of each history
        (features (n, 2d), ``players[i]``'s seat first) into ``out`` (n,)."""
        if self.value_forward is None:
            raise RuntimeError("the traversal asked for learned values before any was trained")
        values = self.value_forward(features)[:, 0]
        if not np.isfinite(values).all():
            raise NonFiniteError("non-finite prediction from the value network")
        out[:] = values

    def snapshot(self) -> dict:
        """Everything a worker's copy needs to play this sigma, picklable by value:
        both players' clean weights (numpy), W_t and iterations, and the value net's."""
        return {
            "version": self.version,
            "weights": [None if n is None else state_dict_arrays(n) for n in self.nets],
            "regret_weights": list(self.regret_weights),
            "iterations": list(self.net_iterations),
            "value": None if self.value_net is None else state_dict_arrays(self.value_net),
        }

    def load_snapshot(
        self,
        snapshot: dict,
        new_net: Callable[[], torch.nn.Module],
        new_value_net: Callable[[], torch.nn.Module] | None = None,
    ) -> None:
        """Become the policy of ``snapshot``; ``new_net()`` builds a network to load into,
        ``new_value_net()`` a value network (needed when the snapshot has one)."""
        for player in (0, 1):
            self.set_network(
                player,
                _loaded(snapshot["weights"][player], new_net),
                snapshot["regret_weights"][player],
                snapshot["iterations"][player],
            )
        if snapshot.get("value") is not None or self.value_net is not None:
            self.set_value_network(_loaded(snapshot.get("value"), new_value_net))
        self.version = snapshot["version"]

    def advantages(self, player: int, features: np.ndarray) -> np.ndarray:
        """Predicted advantages (n, A) of ``player``'s network for features (n, d).
        Raises NonFiniteError on a NaN or inf prediction: regret matching would turn it
        into an all-zero row, and the sampler into action -1."""
        out = self.forwards[player](features)
        if not np.isfinite(out).all():
            raise NonFiniteError(
                f"non-finite advantage prediction from player {player}'s network of iteration "
                f"{self.net_iterations[player]} (NaN or inf weights or inputs)"
            )
        return out

    def strategy(self, player: int, features: np.ndarray, masks: np.ndarray) -> np.ndarray:
        if self.nets[player] is None:
            return self.initial(np.full(len(masks), player, dtype=np.int8), features, masks)
        return regret_matching(self.regret_scores(player, features, masks), masks)

    def regret_scores(self, player: int, features: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Regret matching's input (n, A): predicted advantages plus the pull towards
        sigma_1, (a_t + c / W_t) * sigma_1 with a_t = anchor * t^-anchor_decay (t: the
        network's iteration), so ``strategy`` is ``regret_matching`` of these. Their order
        is sigma's wherever sigma's probabilities differ, and it still orders the actions
        regret matching gives probability 0. Before any network: sigma_1 itself."""
        if self.nets[player] is None:
            return self.initial(np.full(len(masks), player, dtype=np.int8), features, masks)
        advantages = self.advantages(player, features).astype(np.float64)
        pull = self.anchor_pull(player) + self.warm_start / self.regret_weights[player]
        if pull > 0:
            seed = self.initial(np.full(len(masks), player, dtype=np.int8), features, masks)
            advantages = advantages + pull * seed
        return advantages

    def anchor_pull(self, player: int) -> float:
        """a_t = anchor * t^-anchor_decay for ``player``'s network of iteration t."""
        if self.anchor == 0 or self.anchor_decay == 0:
            return self.anchor
        return self.anchor * max(self.net_iterations[player], 1) ** -self.anchor_decay

    def __call__(
        self, players: np.ndarray, features: np.ndarray, masks: np.ndarray, out: np.ndarray
    ) -> None:
        """The traversal kernel's callback: write sigma rows (n, A) into ``out``."""
        if self.cache is not None:
            self._cached(players, features, masks, out)
            return
        self.by_player(self.strategy, players, features, masks, out)

    @staticmethod
    def by_player(method, players, features, masks, out) -> None:
        """Write ``method(player, features, masks)`` (``strategy`` or ``regret_scores``)
        into the rows of ``out`` (n, A), one call per player present in ``players``."""
        first = int(players[0])
        if len(players) == 1 or (players == first).all():
            out[:] = method(first, features, masks)
            return
        for player in (0, 1):
            rows = np.flatnonzero(players == player)
            if len(rows):
                out[rows] = method(player, features[rows], masks[rows])

    def _cached(self, players, features, masks, out) -> None:
        for i in range(len(players)):
            key = (int(players[i]), features[i].tobytes())
            row = self.cache.get(key)
            if row is None:
                row = self.strategy(key[0], features[i : i + 1], masks[i : i + 1])[0]
                self.cache[key] = row
            out[i] = row


def _loaded(weights: dict | None, new_net) -> torch.nn.Module | None:
    """A network built by ``new_net()`` holding ``weights`` (numpy arrays), in eval mode;
    None for None."""
    if weights is None:
        return None
    net = new_net()
    # arrays from Ray's object store are read-only (shared memory): torch needs its own copy
    net.load_state_dict(
        {k: torch.from_numpy(v if v.flags.writeable else v.copy()) for k, v in weights.items()}
    )
    return net.eval()


def iteration_strategies(
    network: NetworkConfig,
    traversal: TraversalConfig,
    per_iteration: Sequence[Sequence[dict]],
    dims: tuple[int, int],
    batch_invariant: bool = False,
    first_iteration: int = 1,
) -> list[IterationStrategy]:
    """sigma_{t+1} for t = 1..T: regret matching (with ``traversal``'s warm start) on both
    players' advantage weights ``per_iteration[p][t - 1]`` (as the trainer keeps them), each
    as (players int8 (n,), features (n, d), masks (n, A)) -> float64 (n, A). ``dims``:
    (encoding size, number of actions). Single Deep CFR's average strategy mixes them with
    weights t. ``first_iteration``: the t of ``per_iteration[p][0]``."""
    from lostcities.cfr.networks import build_network

    strategies = []
    for t, weights in enumerate(zip(*per_iteration, strict=True), start=first_iteration):
        policy = AdvantagePolicy.from_config(traversal, "cpu", batch_invariant)
        for player in (0, 1):
            net = build_network(network, *dims, seed=0)
            net.load_state_dict(weights[player])
            policy.set_network(player, net.eval(), regret_weight(t), t)
        strategies.append(IterationStrategy(policy))
    return strategies


class IterationStrategy:
    """One iteration's sigma as a strategy: (players int8 (n,), features (n, d), masks
    (n, A)) -> float64 (n, A). ``scores`` gives regret matching's input on the same rows
    (:meth:`AdvantagePolicy.regret_scores`): what play-time search ranks moves by."""

    def __init__(self, policy: AdvantagePolicy) -> None:
        self.policy = policy

    def __call__(self, players: np.ndarray, features: np.ndarray, masks: np.ndarray) -> np.ndarray:
        out = np.zeros(masks.shape)
        self.policy(np.asarray(players, dtype=np.int8), features, masks, out)
        return out

    def scores(self, players: np.ndarray, features: np.ndarray, masks: np.ndarray) -> np.ndarray:
        out = np.zeros(masks.shape)
        players = np.asarray(players, dtype=np.int8)
        self.policy.by_player(self.policy.regret_scores, players, features, masks, out)
        return out

    def advantages(
        self, players: np.ndarray, features: np.ndarray, masks: np.ndarray
    ) -> np.ndarray:
        """The advantage nets' predictions (n, A) on the same rows, in the traversal's
        utility units, without the pull towards sigma_1: each action's learned regret against
        sigma_t (its value minus sigma_t's), which play-time search can blend with its
        playout values."""
        out = np.zeros(masks.shape)
        players = np.asarray(players, dtype=np.int8)

        def predict(player, rows_features, rows_masks):
            return self.policy.advantages(player, rows_features)

        self.policy.by_player(predict, players, features, masks, out)
        return out
