"""sigma_t's learned history value, for regret targets without playouts (ESCHER).

With ``traversal.action_values=learned`` the value of an action at a branching node is
not a playout of sigma_t to the end but a learned estimate of it (McAleer et al. 2022,
"ESCHER"): a network V(h) from both seats' information states (the valued seat's first,
2 * encoding_size floats) to that seat's expected utility under sigma_t. Once sigma_t is
a network a playout costs one forward per step (~60 per action); V costs one row.

Each iteration, before its regret traversals, :class:`ValueLearner` fits V to sigma_t:
1. value traversals (IDs (t, p, k), k < ``traversal.value_traversals_per_player``, in
   the executor like any traversal): the regret traversal's trajectory, then at each
   branching node a uniformly random action and a playout of sigma_t to the end; the
   states after the random action are reached by sigma_t alone, so their final utilities
   are unbiased samples of V there (lostcities/cfr/_traverse.pyx);
2. the samples, merged in ID order into a reservoir that holds sigma_t's data only;
3. ``value.steps`` Adam steps of mean squared error, continuing the previous iteration's
   network (sigma moves little from one iteration to the next), on rows relabelled by a
   random symmetry of the game where it has them.
Then V goes to the traversals with sigma_t (one snapshot for the workers).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import numpy as np
import torch

from lostcities.cfr.executors import Executor, ordered_results
from lostcities.cfr.fitting import Fit, fit, history_relabel
from lostcities.cfr.memory import ReservoirMemory
from lostcities.cfr.networks import value_network
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import VALUE, TraversalId
from lostcities.config import ValueConfig
from lostcities.games import GameSpec
from lostcities.perf.step import TrainingStep
from lostcities.rng import NetworkOwner, Purpose, Stream, stream_key, torch_seed


def value_loss(pred, masks, targets, weights):
    # pred, targets: (b, 1); weights: (b,). Mean squared error, fp32 whatever the forward's
    # precision.
    return (weights * (pred.float()[:, 0] - targets[:, 0]) ** 2).mean()


class ValueLearner:
    """The value network of one trainer, refitted to sigma_t every iteration."""

    def __init__(
        self,
        cfg: ValueConfig,
        traversals_per_player: int,
        game: GameSpec,
        seed: int,
        device: torch.device,
        symmetries: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        self.cfg = cfg
        self.traversals_per_player = traversals_per_player
        self.seed = seed
        self.device = device
        key = stream_key(seed, 0, NetworkOwner.VALUE, 0, Purpose.NETWORK_INIT)
        self.net = value_network(cfg, game.encoding_size, seed=torch_seed(key))
        self.net.to(device)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=cfg.lr)
        # both seats' compact states per row (2 * compact_size bytes), one target
        self.memory = ReservoirMemory(cfg.capacity, 2 * game.compact_size, 1, game.expand, 1)
        self.relabel = None if symmetries is None else history_relabel(symmetries)
        self.trained_at = 0  # the iteration whose sigma the network was last fitted to

    def learn(
        self,
        t: int,
        players: tuple[int, ...],
        executor: Executor,
        sigma: AdvantagePolicy,
        step: TrainingStep,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> dict[str, float]:
        """Fit the network to ``sigma`` (iteration ``t``) from the value traversals of
        ``players``, and hand it to ``sigma``; returns ``value/*`` metrics."""
        start = time.perf_counter()
        self.memory.clear()
        ids = [
            TraversalId(t, p, k, VALUE)
            for p in players
            for k in range(self.traversals_per_player * (2 // len(players)))
        ]
        stream = Stream(stream_key(self.seed, t, players[0], 0, Purpose.VALUE_MEMORY))
        totals: Counter[str] = Counter()
        on_progress = None if progress is None else _phase(progress, "value traversal", len(ids))
        for result in ordered_results(executor, ids, sigma, on_progress):
            states, targets = result.values
            self.memory.add(states, np.ones((len(targets), 1)), targets[:, None], t, stream)
            totals.update(result.stats)
        traversal_seconds = time.perf_counter() - start
        start = time.perf_counter()
        how = Fit(
            self.cfg.steps,
            self.cfg.batch_size,
            value_loss,
            weigh=torch.ones_like,
            relabel=self.relabel,
            lr_schedule="cosine",
        )
        generator = np.random.Generator(
            np.random.PCG64(stream_key(self.seed, t, players[0], 0, Purpose.VALUE_TRAINING))
        )
        fit_progress = None if progress is None else _phase(progress, "value fit", None)
        loss = float("nan")
        if self.memory.size:
            loss = fit(self.net, self.optimizer, self.memory, how, generator, step, self.device,
                       fit_progress)  # fmt: skip
        self.net.eval()
        self.trained_at = t
        sigma.set_value_network(self.net)
        return {
            "value/loss": loss,
            "value/samples": totals["value_samples"],
            "value/target_variance": float(
                np.var(self.memory.targets[: self.memory.size], dtype=np.float64)
            ),
            "value/traversals": len(ids),
            "value/nodes": totals["nodes"],
            "time/value_traversal_seconds": traversal_seconds,
            "time/value_train_seconds": time.perf_counter() - start,
        }

    def state_dict(self, step: TrainingStep) -> dict:
        """The network and its optimiser (the memory is refilled every iteration)."""
        return {
            "net": step.weights(self.net),
            "optimizer": self.optimizer.state_dict(),
            "trained_at": self.trained_at,
        }

    def load_state_dict(self, state: dict, sigma: AdvantagePolicy) -> None:
        self.net.load_state_dict(state["net"])
        self.net.eval()
        self.optimizer.load_state_dict(state["optimizer"])
        self.trained_at = int(state["trained_at"])
        if self.trained_at:
            sigma.set_value_network(self.net)


def _phase(progress, phase: str, total: int | None):
    """``progress(phase, done, total)`` as a per-phase callback."""
    if total is None:
        return lambda done, steps: progress(phase, done, steps)
    progress(phase, 0, total)
    return lambda done: progress(phase, done, total)
