"""The one place that names every executor: ``executor=inline|processes|ray`` (a config
group, lostcities/conf/executor/) to the executor that runs the traversals."""

from __future__ import annotations

from lostcities.cfr.executors.contract import Executor
from lostcities.cfr.executors.inline import InlineExecutor
from lostcities.cfr.traversal import TraversalSpec
from lostcities.config import ExecutorConfig


def make_executor(spec: TraversalSpec, cfg: ExecutorConfig) -> Executor:
    """The executor ``cfg.name`` names (one of EXECUTORS, validated by
    lostcities/config_checks.py), running the traversals ``spec`` describes."""
    if cfg.name == "inline":
        return InlineExecutor(spec)
    if cfg.name == "ray":
        from lostcities.cfr.executors.ray_actors import RayExecutor  # ray: an optional extra

        return RayExecutor(spec, cfg.num_workers, cfg.chunk_size, cfg.retries, cfg.ray_address)
    from lostcities.cfr.executors.processes import ProcessExecutor

    return ProcessExecutor(spec, cfg.num_workers, cfg.chunk_size, cfg.retries)
