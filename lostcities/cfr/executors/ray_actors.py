"""Traversal on a Ray cluster: ``executor=ray``.

:class:`RayExecutor` is a :class:`lostcities.cfr.executors.scheduler.ChunkedExecutor`
whose workers are Ray actors: each holds a
:class:`lostcities.cfr.executors.worker.TraversalWorker` rebuilt from the same picklable
:class:`lostcities.cfr.traversal.TraversalSpec` as a worker process, with
one torch thread and one CPU of the cluster. Sigma's weights are put into the object
store once per sigma version (one per iteration and player) and every actor loads them
from there, not from each task; a chunk's results come back whole, tagged by traversal
ID, and are merged in ID order as the process workers' are, so the cluster's size and
layout never change what is learned.

A chunk whose actor died (a lost node, a killed process) or raised is named with its
traversal IDs, rerun in a fresh actor up to ``executor.retries`` times (Ray's
own restarts and task retries are off: a rerun must be visible), then the run stops
with one line. ``close`` kills the actors and closes the connection the executor opened:
a Ray started by the run (``executor.ray_address`` null) stops with it, so an
interrupted run leaves no actor behind. Only this module imports ``ray`` (the ``ray`` extra).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import weakref
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from lostcities.cfr.executors.contract import WorkerError, payload_key
from lostcities.cfr.executors.scheduler import ChunkedExecutor
from lostcities.cfr.executors.worker import TraversalWorker
from lostcities.cfr.traversal import TraversalId, TraversalResult, TraversalSpec
from lostcities.interrupts import deferred_interrupts

START_TIMEOUT_S = 120.0  # actors that have not started by then: the cluster lacks CPUs
WAIT_SLICE_S = 0.25  # longest wait on Ray with signals held back (see _wait)

log = logging.getLogger(__name__)


def _ray():
    try:
        import ray
    except ImportError:
        raise WorkerError(
            "executor=ray: the ray package is not installed "
            "(expected the ray extra: pip install -e '.[ray]')"
        ) from None
    return ray


@dataclass
class _Actor:
    handle: object  # ray.actor.ActorHandle of a TraversalWorker
    pid: int | None = None
    version: tuple[str, int] | None = None  # payload_key of what it holds
    chunk: int | None = None  # index of the chunk in flight, in its run call
    attempt: int = 0
    ref: object = None  # ObjectRef of the chunk's results
    abandoned: bool = False  # killed with its chunk in flight: replaced before it is used


@contextlib.contextmanager
def _python_signal_handlers_kept() -> Iterator[None]:
    """Put back this process's Python handlers of SIGINT and SIGTERM after the block:
    ``ray.init`` installs its own C handler for SIGTERM (it aborts the process), which
    would take SIGTERM away from the run's clean stop (checkpoint kept, exit 143)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in kept.items():
            if handler is not None:  # None: not set from Python, cannot be put back
                signal.signal(signum, handler)


def _wait(ray, refs: list, num_returns: int, timeout: float | None = None) -> tuple[list, list]:
    """``ray.wait`` in slices of WAIT_SLICE_S with SIGINT and SIGTERM held back, each
    raised again between slices: inside ``ray.wait`` a Python signal handler's exception
    comes out as a bare KeyboardInterrupt, so the run would report a SIGTERM as a Ctrl-C
    (exit 130, not 143)."""
    waited = 0.0
    while True:
        step = WAIT_SLICE_S if timeout is None else min(WAIT_SLICE_S, timeout - waited)
        with deferred_interrupts():
            ready, waiting = ray.wait(refs, num_returns=num_returns, timeout=step)
        waited += step
        if len(ready) >= num_returns or (timeout is not None and waited >= timeout):
            return ready, waiting


def _kill_all(actors: list[_Actor], connected: bool) -> None:
    ray = _ray()
    if not ray.is_initialized():
        return
    for actor in actors:
        ray.kill(actor.handle, no_restart=True)
    if connected:
        ray.shutdown()


def connect(address: str | None, num_cpus: int) -> None:
    """Connect this process to the Ray cluster at ``address`` (None: start a local Ray
    with ``num_cpus`` CPUs, even where one runs already), keeping this process's Python
    handlers of SIGINT and SIGTERM; WorkerError (one line) if no cluster answers."""
    ray = _ray()
    options: dict = {"include_dashboard": False, "logging_level": logging.WARNING}
    if address is None:
        options["num_cpus"] = num_cpus
    try:
        with _python_signal_handlers_kept():
            ray.init(address=address or "local", **options)
    except (ConnectionError, RuntimeError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise WorkerError(
            f"executor.ray_address={address}: no Ray cluster reachable there "
            "(expected a running head node, ray start --head, and where it checks "
            f"tokens RAY_AUTH_MODE=token with its token): {first_line}"
        ) from None


class RayExecutor(ChunkedExecutor):
    """``num_workers`` traversal actors on the Ray cluster at ``address`` (None: a local
    Ray started here, with as many CPUs as this process may use or ``num_workers`` if
    more; ``auto``: the cluster this machine joined). ``num_workers`` 0: one actor per
    CPU of the cluster."""

    def __init__(
        self,
        spec: TraversalSpec,
        num_workers: int = 0,
        chunk_size: int = 0,
        retries: int = 1,
        address: str | None = None,
    ) -> None:
        super().__init__(chunk_size, retries)
        ray = _ray()
        self.spec = spec
        self.connected = not ray.is_initialized()  # else: the caller's connection
        if self.connected:
            connect(address, max(num_workers, len(os.sched_getaffinity(0))))
        self.address = address or "local"
        self.num_workers = num_workers or int(ray.cluster_resources().get("CPU", 1))
        # Restarts and task retries off: a lost chunk is rerun by _failed, named.
        self._actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(
            TraversalWorker
        )
        self.actors = [self._new_actor() for _ in range(self.num_workers)]
        self._weights: tuple[tuple[str, int], object] | None = None  # (payload_key, ObjectRef)
        self._finalizer = weakref.finalize(self, _kill_all, self.actors, self.connected)
        self._await_pids(self.actors)

    def _new_actor(self) -> _Actor:
        return _Actor(self._actor_class.remote(self.spec))

    def _await_pids(self, actors: list[_Actor]) -> None:
        """Wait until ``actors`` run (their pids name them in warnings); one line if the
        cluster cannot place them."""
        ray = _ray()
        refs = [actor.handle.pid.remote() for actor in actors]
        _, waiting = _wait(ray, refs, len(refs), START_TIMEOUT_S)
        if waiting:
            cpus = ray.cluster_resources().get("CPU", 0)
            raise WorkerError(
                f"executor.num_workers={self.num_workers}: {len(waiting)} Ray actor(s) "
                f"did not start in {START_TIMEOUT_S:.0f} s (each needs 1 CPU; the cluster "
                f"has {cpus:g})"
            )
        for actor, pid in zip(actors, ray.get(refs), strict=True):
            actor.pid = pid

    @property
    def description(self) -> str:
        return f"{self.num_workers} Ray actors ({self.address})"

    def pids(self) -> list[int | None]:
        return [actor.pid for actor in self.actors]

    def busy_pids(self) -> list[int | None]:
        return [actor.pid for actor in self.actors if actor.chunk is not None]

    def _weights_ref(self, ray, sigma) -> object:
        """Sigma's weights in the object store, put once per sigma version."""
        if self._weights is None or self._weights[0] != payload_key(sigma):
            self._weights = (payload_key(sigma), ray.put(sigma.snapshot()))
        return self._weights[1]

    def _dispatch(
        self, chunks: list[list[TraversalId]], pending: deque, sigma, snapshot: list
    ) -> None:
        ray = _ray()
        for actor in self.actors:
            if not pending:
                break
            if actor.chunk is not None:
                continue
            if actor.abandoned:
                actor = self._replace(actor, "its chunk was abandoned")
            chunk_index, attempt = pending.popleft()
            if actor.version != payload_key(sigma):
                # an actor runs its tasks in submission order: the weights load first
                actor.handle.load.remote(self._weights_ref(ray, sigma))
                actor.version = payload_key(sigma)
            actor.ref = actor.handle.run.remote(chunks[chunk_index])
            actor.chunk, actor.attempt = chunk_index, attempt

    def _collect(
        self, chunks: list[list[TraversalId]], pending: deque
    ) -> list[tuple[int, list[TraversalResult]]]:
        ray = _ray()
        busy = [actor for actor in self.actors if actor.chunk is not None]
        if not busy:
            return []
        ready, _ = _wait(ray, [actor.ref for actor in busy], 1)
        ready_refs = set(ready)
        done = []
        for actor in busy:
            if actor.ref not in ready_refs:
                continue
            chunk_index, attempt, ref = actor.chunk, actor.attempt, actor.ref
            actor.chunk, actor.ref = None, None
            try:
                with deferred_interrupts():  # a ready chunk's results: a short transfer
                    results = ray.get(ref)
                done.append((chunk_index, results))
                continue
            except ray.exceptions.RayActorError as error:
                cause = f"Ray actor pid {actor.pid} died ({type(error).__name__})"
            except ray.exceptions.RayError as error:  # it raised, or its results were lost
                original = getattr(error, "cause", None) or error
                first_line = (str(original).strip().splitlines() or [""])[0]
                cause = f"{type(original).__name__}: {first_line}"
            self._failed(chunks[chunk_index], chunk_index, attempt, cause, pending)
            self._replace(actor, cause)
        return done

    def _replace(self, actor: _Actor, cause: str) -> _Actor:
        """A fresh actor in ``actor``'s place (the old one is killed for good)."""
        ray = _ray()
        ray.kill(actor.handle, no_restart=True)
        fresh = self._new_actor()
        self._await_pids([fresh])
        self.actors[self.actors.index(actor)] = fresh
        self.restarts += 1
        log.info("replaced traversal actor pid %s (%s)", actor.pid, cause)
        return fresh

    def _abandon(self) -> None:
        ray = _ray()
        for actor in self.actors:
            if actor.chunk is not None:
                ray.kill(actor.handle, no_restart=True)  # stops its chunk now
                actor.chunk, actor.ref, actor.abandoned = None, None, True

    def close(self) -> None:
        """Kill every actor and close the connection this executor opened (a local Ray it
        started stops); safe to call twice."""
        if self._finalizer.alive:
            self._finalizer()
