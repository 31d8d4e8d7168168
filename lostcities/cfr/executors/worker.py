"""A traversal worker: what runs in a spawned process or a Ray actor, rebuilt from a
:class:`lostcities.cfr.traversal.TraversalSpec` alone (configs and plain values), with one
torch thread and the run's determinism settings. Its sigma is replaced by each weight
snapshot it is sent (one per iteration and player); a task payload's snapshot
(lostcities/cfr/executors/tasks.py) makes it build that task, which then runs the chunks
of the task's IDs."""

from __future__ import annotations

import os

import torch

from lostcities.cfr.executors.tasks import build_task, is_task_snapshot, is_traversal
from lostcities.cfr.networks import build_network, value_network
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import (
    TraversalSpec,
    run_traversals,
    traverser_of,
)


def build_worker_traverser(spec: TraversalSpec):
    """(traverser, sigma, new_net, new_value_net) of a worker; sigma starts at sigma_1
    (no networks)."""
    from lostcities.games import make_game  # the game kernels load in the worker only

    game = make_game(spec.game)
    sigma = AdvantagePolicy.from_config(spec.traversal, "cpu", spec.batch_invariant)
    traverser = traverser_of(spec, game.prototype, sigma)

    def new_net() -> torch.nn.Module:  # the weights are loaded over the initial ones
        return build_network(spec.network, game.encoding_size, game.num_actions, seed=0)

    def new_value_net() -> torch.nn.Module:
        return value_network(spec.value, game.encoding_size, seed=0)

    return traverser, sigma, new_net, new_value_net


class TraversalWorker:
    """One worker's traverser and sigma (in a spawned process or a Ray actor)."""

    def __init__(self, spec: TraversalSpec) -> None:
        from lostcities.perf.determinism import apply_determinism

        torch.set_num_threads(1)
        apply_determinism(spec.determinism)
        self.traverser, self.sigma, self.new_net, self.new_value_net = build_worker_traverser(spec)
        self.task = None  # the task of the last task payload, if any

    def load(self, snapshot: dict) -> None:
        """Play sigma as ``snapshot`` (AdvantagePolicy.snapshot) describes it, or build the
        task a task payload's snapshot names."""
        if is_task_snapshot(snapshot):
            self.task = build_task(snapshot)
        else:
            self.sigma.load_snapshot(snapshot, self.new_net, self.new_value_net)

    def run(self, ids: list) -> list:
        """Results of ``ids`` in order: traversals (TraversalId), or the loaded task's."""
        if is_traversal(ids):
            return run_traversals(self.traverser, ids)
        if self.task is None:
            raise RuntimeError(f"a chunk of {ids[0].kind} IDs reached a worker with no task")
        return self.task.run(ids)

    def pid(self) -> int:
        """The process this worker runs in (a Ray actor's is not known otherwise)."""
        return os.getpid()
