"""Deep CFR (Brown et al. 2019) over any game of the C-level interface.

Per iteration t (1-based) and player p:
1. build the canonical traversal IDs (t, p, k), k < traversals_at(t),
   and let the executor run them (inline, in worker processes or on Ray, see
   lostcities/cfr/executors/: only the partition of the list may depend on the number
   of workers);
2. insert their samples into the reservoir memories in ID order (advantage
   memory of p, shared strategy memory), slice by slice as the executor
   yields them;
3. train p's advantage network (from scratch by default) on a
   t-weighted MSE over legal actions (linear CFR weighting), and make it
   p's sigma for every later traversal: right away with ``alternating``
   updates, after both players traversed with ``simultaneous`` ones.
The policy (average strategy) network is trained on the strategy memory
either from scratch whenever it is needed (``optim.policy_training=scratch``,
from streams keyed by (seed, iteration)) or a little more at the end of every
iteration (``continual``): either way evaluation and checkpoint cadence cannot
change it.
With ``optim.augment_symmetries`` every training row is relabelled by a
random symmetry of the game (Lost Cities: a color permutation) first.

Every network is fitted by the one loop of lostcities/cfr/fitting.py, each step
through :class:`lostcities.perf.step.TrainingStep`, the one owner of the performance
switches (AMP, torch.compile, the GradScaler, gradient clipping). With
``traversal.action_values=learned`` a :class:`~lostcities.cfr.values.ValueLearner`
fits sigma_t's history value before the regret traversals of each iteration (of each
player, with alternating updates). Networks are re-initialised in place every
iteration (weights copied from a freshly built network: bit-identical to building it),
so a compiled wrapper compiles once; sigma, weight pushes, evaluation and checkpoints
only ever see the plain module.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from lostcities.cfr import targets
from lostcities.cfr.executors import Executor, InlineExecutor, ordered_results
from lostcities.cfr.fitting import Fit, action_relabel, fit, held_out_r2
from lostcities.cfr.memory import ReservoirMemory
from lostcities.cfr.networks import build_network
from lostcities.cfr.policy import (
    AdvantagePolicy,
    NetworkForward,
    masked_softmax,
    regret_matching,
    regret_weight,
)
from lostcities.cfr.traversal import TraversalId, TraversalSpec
from lostcities.cfr.values import ValueLearner
from lostcities.config import (
    AmpConfig,
    CompileConfig,
    MemoryConfig,
    NetworkConfig,
    OptimConfig,
    TraversalConfig,
)
from lostcities.games import GameSpec
from lostcities.perf.step import TrainingStep
from lostcities.rng import NetworkOwner, Purpose, Stream, stream_key, torch_seed


@dataclass(frozen=True)
class AgentView:
    """What evaluation reads of a run: the agent as it stands after ``iteration``, not the
    trainer (its memories, optimisers and fits stay out of reach). The callables answer
    for the trainer's current networks; ``iteration_advantage_nets[p][t - 1]`` holds
    player p's advantage weights after iteration t."""

    spec: TraversalSpec
    encoding_size: int
    num_actions: int
    iteration: int
    iteration_advantage_nets: list[list[dict[str, torch.Tensor]]]
    # features (n, d), masks (n, A) -> (n, A): the policy net's average strategy
    policy_probs: Callable[[np.ndarray, np.ndarray], np.ndarray]
    # players (n,), features (n, d), masks (n, A) -> (n, A): sigma_{t+1}, regret matching
    regret_matching_probs: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    # players (n,), features (n, d), masks (n, A) -> (n, A): sigma_1
    initial_strategy: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

    @property
    def dims(self) -> tuple[int, int]:
        """(encoding size, actions) of the game's networks."""
        return self.encoding_size, self.num_actions


def _new_memory(game: GameSpec, memory: MemoryConfig, capacity: int) -> ReservoirMemory:
    """An empty reservoir of ``capacity`` compact samples of ``game``."""
    return ReservoirMemory(
        capacity,
        game.compact_size,
        game.num_actions,
        game.expand,
        game.max_legal_actions,
        memory.precision,
    )


class DeepCFRTrainer:
    def __init__(
        self,
        game: GameSpec,
        spec: TraversalSpec,
        memory: MemoryConfig,
        optim: OptimConfig,
        device: str = "cpu",
        executor: Executor | None = None,
        amp: AmpConfig | None = None,
        compile: CompileConfig | None = None,
        fit_threads: int = 0,
    ) -> None:
        """``spec``: the network, the traversal and its seed, the learned history value's
        settings (used with ``traversal.action_values=learned``) and whether every forward
        is batch-invariant (determinism=strict). ``executor``: runs the traversals
        (lostcities/cfr/executors/; None: inline, on this trainer's sigma). ``amp``: mixed
        precision of ``_fit`` (None: off). ``compile``: torch.compile of the fitted networks
        and/or the policy's evaluation forward (None: the group is absent, nothing compiled);
        with a batch-invariant spec the row-wise evaluation kernel takes precedence over
        ``compile.inference``. ``fit_threads``: torch threads while fitting (0: unchanged).
        The config values are validated by lostcities/config_checks.py."""
        network, traversal = spec.network, spec.traversal
        batch_invariant = spec.batch_invariant
        self.spec = spec
        self.game = game
        self.optim = optim
        self.device = torch.device(device)
        self.iteration = 0  # completed iterations
        # fit/* metrics of the running iteration's advantage fits: steps, passes, R^2
        self.fit_metrics: dict[str, float] = {}
        # forward, loss, backward, clipping and optimiser step under AMP / compile
        self.step = TrainingStep(
            amp or AmpConfig(),
            compile,
            network,
            self.device,
            optim.grad_clip,
            batch_invariant,
            fit_threads,
            gate_batch=optim.advantage_batch_size,
        )

        self.advantage_memories = [
            _new_memory(game, memory, memory.advantage_capacity) for _ in range(2)
        ]
        self.strategy_memory = _new_memory(game, memory, memory.strategy_capacity)
        self._init_networks()
        self.policy_forward = self._policy_forward()
        self.symmetries: tuple[torch.Tensor, torch.Tensor] | None = None
        if optim.augment_symmetries:  # a game with symmetries: lostcities/config_checks.py
            self.symmetries = tuple(torch.from_numpy(i).to(self.device) for i in game.symmetries)
        self.sigma = AdvantagePolicy.from_config(traversal, device, batch_invariant)
        self.values = self._value_learner()
        self.executor = executor or InlineExecutor(spec)
        # progress(phase, done, total), for a display (lostcities/progress.py): phases
        # "traversal p0|p1", "advantage p0|p1" and "policy", each from done=0 to done=total
        # in coarse steps (~1%, never per sample). None: not called.
        self.progress: Callable[[str, int, int], None] | None = None

    # --- the spec's parts, as the trainer names them ----------------------------------
    @property
    def network_cfg(self) -> NetworkConfig:
        return self.spec.network

    @property
    def traversal_cfg(self) -> TraversalConfig:
        return self.spec.traversal

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def batch_invariant(self) -> bool:
        return self.spec.batch_invariant

    # --- building blocks --------------------------------------------------------------
    def _init_networks(self) -> None:
        """No advantage net yet (sigma_1 plays); a fresh policy net and its optimiser."""
        self.advantage_nets: list[torch.nn.Module | None] = [None, None]
        self.advantage_optimizers: list[torch.optim.Optimizer | None] = [None, None]
        # iteration_advantage_nets[p][t - 1]: player p's advantage weights after iteration t
        # (clean CPU copies): the strategies sigma_{t+1} that single Deep CFR
        # (lostcities/eval/agents.py) samples from at play time.
        self.iteration_advantage_nets: list[list[dict[str, torch.Tensor]]] = [[], []]
        self.policy_net = self._new_net(Purpose.NETWORK_INIT, 0, NetworkOwner.POLICY)
        lr = self.optim.strategy_lr
        self.policy_optimizer = torch.optim.Adam(self.policy_net.parameters(), lr=lr)
        self.policy_trained_at = 0  # iteration the policy net last saw
        self.policy_loss = float("nan")  # its loss then

    def _value_learner(self) -> ValueLearner | None:
        """sigma_t's learned history value (``traversal.action_values=learned``), else None."""
        traversal = self.spec.traversal
        if traversal.action_values != "learned":
            return None
        per_player = traversal.value_traversals_per_player
        return ValueLearner(
            self.spec.value, per_player, self.game, self.seed, self.device, self.symmetries
        )

    def _new_net(self, purpose: int, iteration: int, player: int) -> torch.nn.Module:
        key = stream_key(self.seed, iteration, player, 0, purpose)
        net = build_network(
            self.network_cfg, self.game.encoding_size, self.game.num_actions, seed=torch_seed(key)
        )
        return net.to(self.device)

    def _reinit(
        self, net: torch.nn.Module | None, purpose: int, iteration: int, player: int
    ) -> torch.nn.Module:
        """The network of stream (purpose, iteration, player), freshly initialised: ``net``
        itself re-initialised in place when given (its compiled wrapper stays valid, so
        dynamo does not recompile), else a new one. The weights are copied from a newly
        built network, so both ways are bit-identical."""
        fresh = self._new_net(purpose, iteration, player)
        if net is None:
            return fresh
        self.step.reinitialise(net, fresh.state_dict())
        return net

    def _policy_forward(self) -> NetworkForward:
        """The policy's batched evaluation forward (compiled with ``compile.inference``
        unless the batch-invariant row-wise kernel is asked for: it takes precedence)."""
        net = self.step.inference_forward_of(self.policy_net)
        return NetworkForward(net, self.device, self.batch_invariant)

    def _generator(self, iteration: int, player: int, purpose: int) -> np.random.Generator:
        return np.random.Generator(
            np.random.PCG64(stream_key(self.seed, iteration, player, 0, purpose))
        )

    # --- one iteration ------------------------------------------------------------------
    def run_iteration(self) -> dict[str, float]:
        """Traverse and train both players for iteration t = self.iteration + 1."""
        t = self.iteration + 1
        totals: Counter[str] = Counter()  # traversal stats, summed in traversal-ID order
        n_adv = n_strat = 0
        time_traversal = time_train = 0.0
        losses = []
        self.fit_metrics = {}
        value: dict[str, float] = {}
        alternating = self.traversal_cfg.updates == "alternating"
        for player in (0, 1):
            if self.values is not None and (alternating or player == 0):
                learned = self.values.learn(
                    t, (player,) if alternating else (0, 1), self.executor, self.sigma,
                    self.step, self.progress,
                )  # fmt: skip
                value = _summed(value, learned)
            start = time.perf_counter()
            added = self._traverse(t, player, totals)
            n_adv, n_strat = n_adv + added[0], n_strat + added[1]
            time_traversal += time.perf_counter() - start
            if self.traversal_cfg.updates == "alternating":
                start = time.perf_counter()
                losses.append(self._train_advantage(player, t))
                time_train += time.perf_counter() - start
        if self.traversal_cfg.updates == "simultaneous":
            start = time.perf_counter()
            losses = [self._train_advantage(player, t) for player in (0, 1)]
            time_train += time.perf_counter() - start
        self.iteration = t
        policy = {}
        if self.optim.policy_training == "continual":
            start = time.perf_counter()
            policy["loss/strategy"] = self.train_policy()
            policy["time/strategy_train_seconds"] = time.perf_counter() - start
        traversal = {f"traversal/{key}": value for key, value in totals.items()}
        perf = self.step.metrics()
        return {
            **policy,
            **traversal,
            **value,
            **perf,
            **self.fit_metrics,
            "loss/advantage": float(np.mean(losses)),
            "loss/advantage_p0": losses[0],
            "loss/advantage_p1": losses[1],
            "traversal/traversals": 2 * self.traversals_at(t),
            "traversal/nodes_per_second": totals["nodes"] / max(time_traversal, 1e-9),
            "samples/advantage": n_adv,
            "samples/strategy": n_strat,
            "memory/advantage": sum(m.size for m in self.advantage_memories),
            "memory/strategy": self.strategy_memory.size,
            "memory/bytes_per_sample": self.strategy_memory.bytes_per_sample,
            "time/traversal_seconds": time_traversal,
            "time/advantage_train_seconds": time_train,
        }

    def _traverse(self, t: int, player: int, totals: Counter[str]) -> tuple[int, int]:
        """Run ``player``'s traversals of iteration t and merge their samples into the
        memories in ID order, adding their stats to ``totals``; (advantage, strategy)
        samples added."""
        ids = [TraversalId(t, player, k) for k in range(self.traversals_at(t))]
        on_progress = None
        if self.progress is not None:
            on_progress = _phase_progress(self.progress, f"traversal p{player}", len(ids))
        memory_stream = Stream(stream_key(self.seed, t, player, 0, Purpose.MEMORY))
        if self.optim.advantage_target == "bootstrapped":
            self.advantage_memories[player].clear()  # this iteration's samples only
        n_adv = n_strat = 0
        for result in ordered_results(self.executor, ids, self.sigma, on_progress):
            self.advantage_memories[player].add(*result.advantage, t, memory_stream)
            self.strategy_memory.add(*result.strategy, t, memory_stream)
            n_adv += len(result.advantage.states)
            n_strat += len(result.strategy.states)
            totals.update(result.stats)
        return n_adv, n_strat

    def traversals_at(self, t: int) -> int:
        """Traversals per player at iteration t."""
        first = self.traversal_cfg.first_traversals_per_player
        return first if t == 1 and first > 0 else self.traversal_cfg.traversals_per_player

    def _weights(self, iterations: torch.Tensor, t: int) -> torch.Tensor:
        """Linear CFR: a sample of iteration i weighs i, divided by i's traversal count
        (relative to the usual count) so that a larger iteration 1 adds samples, not weight.
        iterations: (b,) float -> (b,) float, scaled by 1/t to keep losses near unit size."""
        weights = iterations / t
        if self.traversals_at(1) != self.traversal_cfg.traversals_per_player:
            scale = self.traversal_cfg.traversals_per_player / self.traversals_at(1)
            weights = torch.where(iterations == 1, weights * scale, weights)
        return weights

    def _train_advantage(self, player: int, t: int) -> float:
        """Fit player's advantage net; returns the mean loss of the last 10% of steps."""
        memory = self.advantage_memories[player]
        if memory.size == 0:
            return float("nan")
        net = self.advantage_nets[player]
        bootstrapped = self.optim.advantage_target == "bootstrapped"
        # A_{t-1}, frozen before the net is refitted or reinitialised in place
        previous = copy.deepcopy(net).eval() if bootstrapped and net is not None else None
        if net is None or self.optim.reinit_advantage:
            net = self._reinit(net, Purpose.NETWORK_INIT, t, player)
            self.advantage_optimizers[player] = torch.optim.Adam(
                net.parameters(), lr=self.optim.advantage_lr
            )
        batch = self.optim.advantage_batch_size
        share = self.optim.advantage_holdout
        stride = round(1 / share) if share > 0 else 0  # every stride-th slot is held out
        trained = memory.size - len(memory.held_out(stride)) if stride else memory.size
        steps = targets.fit_steps(
            self.optim.advantage_steps, self.optim.advantage_passes, batch, trained
        )
        how = self._fit_settings(t, steps, batch, targets.regret_loss)
        how.holdout_stride = stride
        if bootstrapped:
            how.weigh = torch.ones_like  # one iteration's samples: no linear-CFR weights
            how.transform = None if previous is None else targets.bootstrapped(previous, t)
        if self.optim.magnet > 0:
            how.transform = targets.with_magnet(
                self._magnet(player), self.optim.magnet, how.transform
            )
        loss = fit(
            net,
            self.advantage_optimizers[player],
            memory,
            how,
            self._generator(t, player, Purpose.TRAINING),
            self.step,
            self.device,
            self._fit_progress(f"advantage p{player}"),
        )
        net.eval()
        self.fit_metrics[f"fit/advantage_steps_p{player}"] = steps
        self.fit_metrics[f"fit/advantage_passes_p{player}"] = steps * batch / memory.size
        if stride:
            r2 = held_out_r2(net, memory, how, self.device)
            self.fit_metrics[f"fit/advantage_r2_p{player}"] = r2
        self.advantage_nets[player] = net
        snapshots = self.iteration_advantage_nets[player]
        del snapshots[t - 1 :]  # a resumed run re-trains iteration t: keep one copy
        snapshots.append({k: v.clone() for k, v in self.step.weights(net).items()})
        self.sigma.set_network(player, net, regret_weight(t), t)
        return loss

    def _magnet(self, player: int):
        """The moving magnet of iteration t's fits (``optim.magnet``): the policy network's
        average strategy of iterations 1..t-1 (it trains after the advantage nets), or
        sigma_1 before its first training. features (b, d), masks (b, A) bool -> (b, A)."""
        if self.policy_trained_at == 0:
            initial = self.sigma.initial

            def sigma_1(features: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
                players = np.full(len(features), player, dtype=np.int8)
                rows = initial(players, features.cpu().numpy(), masks.cpu().numpy())
                return torch.from_numpy(rows).to(features.device, torch.float32)

            return sigma_1
        net = self.policy_net

        def average(features: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                logits = net(features).float()
            return torch.softmax(logits.masked_fill(~masks, -torch.inf), dim=1)

        return average

    def train_policy(self) -> float:
        """Bring the policy network to iteration t (once per t; returns its loss).

        ``scratch``: a fresh network and optimiser keyed by (seed, t). ``continual``: the
        running network, ``strategy_steps`` more (run_iteration calls this every
        iteration, so later calls at the same t change nothing).
        """
        t = self.iteration
        if self.strategy_memory.size == 0 or self.policy_trained_at == t:
            return self.policy_loss
        if self.optim.policy_training == "scratch":
            self.policy_net = self._reinit(
                self.policy_net, Purpose.NETWORK_INIT, t, NetworkOwner.POLICY
            )
            self.policy_optimizer = torch.optim.Adam(
                self.policy_net.parameters(), lr=self.optim.strategy_lr
            )
        batch, memory = self.optim.strategy_batch_size, self.strategy_memory
        steps = targets.fit_steps(
            self.optim.strategy_steps, self.optim.strategy_passes, batch, memory.size
        )
        how = self._fit_settings(t, steps, batch, targets.policy_loss)
        self.policy_loss = fit(
            self.policy_net,
            self.policy_optimizer,
            self.strategy_memory,
            how,
            self._generator(t, NetworkOwner.POLICY, Purpose.TRAINING),
            self.step,
            self.device,
            self._fit_progress("policy"),
        )
        self.policy_net.eval()
        self.policy_forward = self._policy_forward()
        self.policy_trained_at = t
        return self.policy_loss

    def _fit_settings(self, t: int, steps: int, batch_size: int, loss_fn) -> Fit:
        """How the advantage and policy nets are fitted at iteration t: linear CFR's
        weights, rows relabelled by a random symmetry (``optim.augment_symmetries``)."""
        relabel = None if self.symmetries is None else action_relabel(self.symmetries)
        return Fit(
            steps,
            batch_size,
            loss_fn,
            weigh=lambda iterations: self._weights(iterations, t),
            relabel=relabel,
            lr_schedule=self.optim.lr_schedule,
        )

    def _fit_progress(self, phase: str):
        """``self.progress`` for one fit (``phase``), or None."""
        if self.progress is None:
            return None
        progress = self.progress
        return lambda done, total: progress(phase, done, total)

    # --- the learned strategies -------------------------------------------------------------
    def policy_probs(self, features: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Average strategy from the policy network: (n, A) probabilities over legal actions."""
        return masked_softmax(self.policy_forward(features), masks)

    def regret_matching_probs(
        self, players: np.ndarray, features: np.ndarray, masks: np.ndarray
    ) -> np.ndarray:
        """The current strategy sigma_t (regret matching on advantage nets), (n, A)."""
        out = np.zeros(masks.shape)
        self.sigma(players, features, masks, out)  # the traversal's own callback
        return out

    # --- checkpoint payload -------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "iteration": self.iteration,
            "policy_trained_at": self.policy_trained_at,
            "policy_loss": self.policy_loss,
            "advantage_nets": [
                None if n is None else self.step.weights(n) for n in self.advantage_nets
            ],
            # reinitialised nets get a fresh optimiser every iteration: nothing to carry
            "advantage_optimizers": [
                None if o is None or self.optim.reinit_advantage else o.state_dict()
                for o in self.advantage_optimizers
            ],
            "iteration_advantage_nets": self.iteration_advantage_nets,
            "policy_net": self.step.weights(self.policy_net),
            "policy_optimizer": self.policy_optimizer.state_dict(),
            "advantage_memories": [m.state_dict() for m in self.advantage_memories],
            "strategy_memory": self.strategy_memory.state_dict(),
            "network": asdict(self.network_cfg),
            "amp": self.step.state_dict(),
            "values": None if self.values is None else self.values.state_dict(self.step),
        }

    def agent_view(self) -> AgentView:
        """The agent as evaluation sees it (no trainer attributes)."""
        return AgentView(
            self.spec,
            self.game.encoding_size,
            self.game.num_actions,
            self.iteration,
            self.iteration_advantage_nets,
            self.policy_probs,
            self.regret_matching_probs,
            self.sigma.initial,
        )

    def agent_state(self) -> dict:
        """What playing needs and nothing else (no memories, no optimisers): the weights of
        the policy net, of the latest advantage nets and of every iteration's advantage
        nets, the iteration and the network config. A few MB where a checkpoint is
        about a hundred (lostcities/eval/agents.py plays it)."""
        return {
            "iteration": self.iteration,
            "network": asdict(self.network_cfg),
            "policy_net": self.step.weights(self.policy_net),
            "advantage_nets": [
                None if n is None else self.step.weights(n) for n in self.advantage_nets
            ],
            "iteration_advantage_nets": self.iteration_advantage_nets,
        }

    def load_state_dict(self, state: dict) -> None:
        self.step.forget_compiled()  # wrappers of the networks replaced below
        self.iteration = int(state["iteration"])
        self.policy_trained_at = int(state["policy_trained_at"])
        for player in (0, 1):
            weights = state["advantage_nets"][player]
            if weights is None:
                continue
            net = self._new_net(Purpose.NETWORK_INIT, self.iteration, player)
            net.load_state_dict(weights)
            net.eval()
            optimizer = torch.optim.Adam(net.parameters(), lr=self.optim.advantage_lr)
            if state["advantage_optimizers"][player] is not None:
                optimizer.load_state_dict(state["advantage_optimizers"][player])
            self.advantage_nets[player] = net
            self.advantage_optimizers[player] = optimizer
            self.sigma.set_network(player, net, regret_weight(self.iteration), self.iteration)
        # older checkpoints have no per-iteration weights: single Deep CFR is then unavailable
        self.iteration_advantage_nets = [
            list(nets) for nets in state.get("iteration_advantage_nets", [[], []])
        ]
        self.policy_loss = float(state.get("policy_loss", float("nan")))
        self.policy_net.load_state_dict(state["policy_net"])
        self.policy_optimizer.load_state_dict(state["policy_optimizer"])
        self.policy_net.eval()
        self.policy_forward = self._policy_forward()
        if "amp" in state:  # older checkpoints have none
            self.step.load_state_dict(state["amp"])
        if self.values is not None and state.get("values") is not None:
            self.values.load_state_dict(state["values"], self.sigma)
        for memory, saved in zip(self.advantage_memories, state["advantage_memories"], strict=True):
            memory.load_state_dict(saved)
        self.strategy_memory.load_state_dict(state["strategy_memory"])


def _summed(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Two value phases' metrics of one iteration (alternating updates) as one: counts and
    times add up, the loss and variance are the second phase's."""
    if not a:
        return b
    return {k: b[k] if k in ("value/loss", "value/target_variance") else a[k] + b[k] for k in b}


def _phase_progress(progress, phase: str, total: int) -> Callable[[int], None]:
    """``progress`` as an executor's ``on_progress(done)`` for one phase (tells done=0 now)."""
    progress(phase, 0, total)
    return lambda done: progress(phase, done, total)


__all__ = ["DeepCFRTrainer", "regret_matching"]
