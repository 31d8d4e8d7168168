"""Executors: who runs an iteration's traversals. Only the partition of the ID list varies.

The trainer hands an executor the canonical list of traversal IDs of one
(iteration, player) and the current sigma; the executor yields the results as
consecutive slices of that list, in ID order (one ``TraversalResult`` per ID),
so the trainer merges each slice into its memories as it arrives and never
holds a whole iteration's samples (Lost Cities' default: ~5.6 GB per player).
Every random number of a traversal is keyed by its ID, so which process ran
it, with which neighbours, cannot change its result.

``InlineExecutor`` runs the list in the trainer's process. ``ProcessExecutor``
keeps a pool of spawned worker processes for the whole run: each rebuilds its
own game kernel, sigma and traverser from a :class:`WorkerSpec` (configs and
plain values only), runs one torch thread, receives the weights once per
(iteration, player) as one message of clean numpy state dicts, and answers
each chunk of IDs with that chunk's results in one message, so a chunk is
either merged whole or not at all. A worker that raises or dies is named with
its traversal IDs and the cause; the chunk is rerun in a fresh worker up to
``traversal.worker_retries`` times (identical results, same keyed streams),
then the run stops with a one-line :class:`WorkerError`. Workers never log to
MLflow: stats travel back with the results and the trainer logs them.

The scheduling (chunks in ID order, results yielded in ID order, named reruns) is
:class:`ChunkedExecutor`'s; ``ProcessExecutor`` and
:class:`lostcities.cfr.ray_workers.RayExecutor` (actors on a Ray cluster) differ only in
how a chunk reaches a :class:`TraversalWorker` and comes back. ``run``'s optional
``on_progress(done)`` hears how many results are in, for a progress display.
"""

from __future__ import annotations

import logging
import math
import multiprocessing as mp
import os
import signal
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Protocol

import torch

from lostcities.cfr.networks import build_network
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import (
    VALUE,
    TraversalId,
    TraversalResult,
    make_traverser,
    run_traversals,
)
from lostcities.config import (
    DeterminismConfig,
    GameConfig,
    NetworkConfig,
    TraversalConfig,
    ValueConfig,
)

TASKS_PER_WORKER = 4  # automatic chunk size: about this many chunks per worker and call
# ... and at most this many traversals: a Lost Cities rollout traversal sends ~0.35 MB of
# samples back, and chunks that finish ahead of an earlier one wait in the trainer.
MAX_AUTO_CHUNK = 64
PROGRESS_STEPS = 100  # InlineExecutor reports progress about this many times per call
STOP_TIMEOUT_S = 5.0  # an idle worker gets this long to exit after "stop"

log = logging.getLogger(__name__)


class WorkerError(RuntimeError):
    """Traversals failed in a worker beyond the allowed retries (one-line message)."""


class Executor(Protocol):
    def run(
        self,
        ids: list[TraversalId],
        sigma: AdvantagePolicy,
        on_progress: Callable[[int], None] | None = None,
    ) -> Iterator[list[TraversalResult]]:
        """Consecutive slices of the results of ``ids``, in ID order."""
        ...

    def close(self) -> None: ...


class InlineExecutor:
    """Runs a list of traversal IDs in this process, in order, with a traverser built on
    the trainer's own sigma (so ``run``'s ``sigma`` is already the one it queries)."""

    def __init__(self, traverser) -> None:
        self.traverser = traverser

    def run(
        self,
        ids: list[TraversalId],
        sigma: AdvantagePolicy,
        on_progress: Callable[[int], None] | None = None,
    ) -> Iterator[list[TraversalResult]]:
        # In slices of ~1% (at most MAX_AUTO_CHUNK): a long call reports progress and its
        # samples reach the memories as it goes; the results do not change.
        step = max(1, min(MAX_AUTO_CHUNK, math.ceil(len(ids) / PROGRESS_STEPS)))
        for i in range(0, len(ids), step):
            yield run_traversals(self.traverser, ids[i : i + step])
            if on_progress is not None:
                on_progress(min(i + step, len(ids)))

    def close(self) -> None:
        pass


def run_all(
    executor: Executor, ids: list[TraversalId], sigma: AdvantagePolicy
) -> list[TraversalResult]:
    """Every result of ``ids``, in ID order, in one list (the trainer merges slices as they
    come instead: a list holds all of them at once)."""
    return [result for part in executor.run(ids, sigma) for result in part]


def ordered_results(
    executor: Executor,
    ids: list[TraversalId],
    sigma: AdvantagePolicy,
    on_progress: Callable[[int], None] | None = None,
) -> Iterator[TraversalResult]:
    """The results of ``ids`` one by one, in ID order, as the executor's slices arrive
    (the trainer merges them into its memories as they come: what a memory holds then
    depends on the IDs only, and only a slice of samples is in flight). Raises
    RuntimeError if the executor breaks its contract (order, count)."""
    merged = 0  # results yielded so far: the next one must be ids[merged]
    for part in executor.run(ids, sigma, on_progress):
        if [r.id for r in part] != ids[merged : merged + len(part)]:
            raise RuntimeError(
                f"executor returned results out of ID order after {merged} of {len(ids)}"
            )
        merged += len(part)
        yield from part
    if merged != len(ids):
        raise RuntimeError(f"executor returned {merged} results for {len(ids)} IDs")


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process rebuilds its traverser from: configs and plain values."""

    game: GameConfig
    network: NetworkConfig
    traversal: TraversalConfig
    determinism: DeterminismConfig
    seed: int
    value: ValueConfig = field(default_factory=ValueConfig)


def value_network(cfg: ValueConfig, encoding_size: int, seed: int) -> torch.nn.Module:
    """A fresh history-value MLP: both seats' encodings (2 * encoding_size) -> 1."""
    network = NetworkConfig(name="value", hidden=cfg.hidden, layers=cfg.layers)
    return build_network(network, 2 * encoding_size, 1, seed=seed)


def build_worker_traverser(spec: WorkerSpec):
    """(traverser, sigma, new_net, new_value_net) of a worker; sigma starts at sigma_1
    (no networks)."""
    from lostcities.games import make_game  # the game kernels load in the worker only

    game = make_game(spec.game)
    sigma = AdvantagePolicy.from_config(
        spec.traversal, "cpu", spec.determinism.batch_invariant_inference
    )
    traverser = make_traverser(
        game.prototype,
        sigma,
        spec.traversal,
        spec.seed,
        spec.game.utility_scale,
        spec.game.utility == "win_loss",
    )

    def new_net() -> torch.nn.Module:  # the weights are loaded over the initial ones
        return build_network(spec.network, game.encoding_size, game.num_actions, seed=0)

    def new_value_net() -> torch.nn.Module:
        return value_network(spec.value, game.encoding_size, seed=0)

    return traverser, sigma, new_net, new_value_net


class TraversalWorker:
    """What a worker runs, in a spawned process or a Ray actor: one torch thread, the
    run's determinism settings, and a traverser rebuilt from ``spec`` whose sigma is
    replaced by each weight snapshot it is sent."""

    def __init__(self, spec: WorkerSpec) -> None:
        from lostcities.perf.determinism import apply_determinism

        torch.set_num_threads(1)
        apply_determinism(spec.determinism)
        self.traverser, self.sigma, self.new_net, self.new_value_net = build_worker_traverser(spec)

    def load(self, snapshot: dict) -> None:
        """Play sigma as ``snapshot`` (AdvantagePolicy.snapshot) describes it."""
        self.sigma.load_snapshot(snapshot, self.new_net, self.new_value_net)

    def run(self, ids: list[TraversalId]) -> list[TraversalResult]:
        return run_traversals(self.traverser, ids)

    def pid(self) -> int:
        """The process this worker runs in (a Ray actor's is not known otherwise)."""
        return os.getpid()


def _worker_main(spec: WorkerSpec, conn: Connection) -> None:
    """A worker's loop: ("policy", snapshot) | ("run", task, ids) | ("stop",)."""
    # Ctrl-C reaches the whole process group: the trainer handles it and stops the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = TraversalWorker(spec)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the trainer is gone: exit rather than linger
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "policy":
            worker.load(message[1])
            continue
        _, task, ids = message
        try:
            reply = ("done", task, worker.run(ids))
        except Exception as error:  # reported with the chunk's IDs by the trainer
            reply = ("error", task, f"{type(error).__name__}: {error}")
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return


def describe_ids(ids: list[TraversalId]) -> str:
    """A chunk's IDs in one short phrase: chunks are consecutive indices of one (t, p)."""
    first, last = ids[0], ids[-1]
    what = "value traversal" if first.kind == VALUE else "traversal"
    if len(ids) == 1:
        return f"{what} ID {first.key}"
    return f"{what} IDs {first.key}..{last.key} ({len(ids)} IDs)"


class _Worker:
    def __init__(self, context, spec: WorkerSpec) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main, args=(spec, child), daemon=True, name="lostcities-traversal"
        )
        self.process.start()
        child.close()  # the parent keeps one end: EOF reaches the worker if the parent dies
        self.version = -1  # sigma version this worker holds
        self.chunk: int | None = None  # index of the chunk in flight, in its run call
        self.attempt = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def cause_of_death(self) -> str:
        self.process.join(timeout=1.0)
        code = self.process.exitcode
        if code is not None and code < 0:
            return f"worker pid {self.pid} killed by {signal.Signals(-code).name}"
        return f"worker pid {self.pid} exited with code {code}"

    def stop(self, busy_ok: bool) -> None:
        """Ask an idle worker to exit; terminate a busy one (its chunk is abandoned)."""
        if self.process.is_alive() and self.chunk is None and not busy_ok:
            try:
                self.conn.send(("stop",))
            except (BrokenPipeError, OSError):
                pass
            self.process.join(timeout=STOP_TIMEOUT_S)
        for end in (self.process.terminate, self.process.kill):
            if not self.process.is_alive():
                break
            end()
            self.process.join(timeout=STOP_TIMEOUT_S)
        self.conn.close()


def _stop_all(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.stop(busy_ok=worker.chunk is not None)


class ChunkedExecutor:
    """A pool of ``num_workers`` workers that run chunks of an ID list: the scheduling
    every pooled executor shares. Chunks go to idle workers in ID order; results are
    yielded in ID order (a chunk that finishes ahead of an earlier one waits); a chunk
    whose worker raised or died is named and rerun in a fresh worker up to ``retries``
    times, then the run stops with a one-line :class:`WorkerError`. Subclasses own the
    transport: :meth:`_dispatch`, :meth:`_collect`, :meth:`_abandon` and ``close``.

    ``num_workers``, ``chunk_size`` (0: automatic) and ``retries`` are validated by
    lostcities/config_checks.py."""

    num_workers: int

    def __init__(self, chunk_size: int = 0, retries: int = 1) -> None:
        self.chunk_size = chunk_size
        self.retries = retries
        self.restarts = 0  # workers replaced after a failure, over the pool's life

    def chunks(self, ids: list[TraversalId]) -> list[list[TraversalId]]:
        tasks = TASKS_PER_WORKER * self.num_workers
        size = self.chunk_size or min(MAX_AUTO_CHUNK, max(1, math.ceil(len(ids) / tasks)))
        return [ids[i : i + size] for i in range(0, len(ids), size)]

    def run(
        self,
        ids: list[TraversalId],
        sigma: AdvantagePolicy,
        on_progress: Callable[[int], None] | None = None,
    ) -> Iterator[list[TraversalResult]]:
        """Yields each chunk's results in ID order, as soon as every earlier chunk is in
        (chunks that finish early wait here: about one per worker); ``on_progress(done)``:
        called as each chunk's results arrive (a chunk merges whole). A caller that stops
        early leaves the busy workers stopped, to be replaced on the next call."""
        chunks = self.chunks(ids)
        pending = deque((index, 0) for index in range(len(chunks)))  # (chunk index, attempt)
        finished: dict[int, list[TraversalResult]] = {}  # chunk index -> results, not yielded
        received = 0  # results in, for on_progress
        snapshot: list = []  # sigma's weights, built at most once per call
        try:
            for next_index in range(len(chunks)):
                while next_index not in finished:
                    self._dispatch(chunks, pending, sigma, snapshot)
                    for index, results in self._collect(chunks, pending):
                        finished[index] = results
                        received += len(results)
                        if on_progress is not None:
                            on_progress(received)
                self._dispatch(chunks, pending, sigma, snapshot)  # busy while the caller merges
                yield finished.pop(next_index)
        finally:
            self._abandon()  # only after an early stop: in-flight chunks are dropped

    def _failed(self, chunk, chunk_index: int, attempt: int, cause: str, pending: deque) -> None:
        if attempt >= self.retries:
            raise WorkerError(
                f"{describe_ids(chunk)} failed in a traversal worker "
                f"{attempt + 1} time(s) (traversal.worker_retries={self.retries}): {cause}"
            )
        log.warning("%s failed (%s); rerunning them in a fresh worker", describe_ids(chunk), cause)
        pending.appendleft((chunk_index, attempt + 1))

    def _dispatch(
        self, chunks: list[list[TraversalId]], pending: deque, sigma, snapshot: list
    ) -> None:
        """Send the next pending chunks to the idle workers (the weights first, once per
        sigma version and worker; ``snapshot`` caches them for the call)."""
        raise NotImplementedError

    def _collect(
        self, chunks: list[list[TraversalId]], pending: deque
    ) -> list[tuple[int, list[TraversalResult]]]:
        """Wait until at least one busy worker answers or dies, and handle every one that
        did: (chunk index, results) of each chunk that came back whole."""
        raise NotImplementedError

    def _abandon(self) -> None:
        """Stop the chunks still in flight (their workers are replaced on the next call)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @property
    def description(self) -> str:
        """Where the traversals run, for the run's header line."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ProcessExecutor(ChunkedExecutor):
    """A pool of ``num_workers`` spawned traversal workers that lives until ``close``
    (``num_workers`` 0: the cores this process may use)."""

    def __init__(
        self, spec: WorkerSpec, num_workers: int = 0, chunk_size: int = 0, retries: int = 1
    ) -> None:
        super().__init__(chunk_size, retries)
        self.spec = spec
        self.num_workers = num_workers or len(os.sched_getaffinity(0))
        # spawn: a fresh interpreter, no inherited torch threads or locks (fork is unsafe
        # with threads); everything a worker needs comes from the picklable spec.
        self._context = mp.get_context("spawn")
        self.workers = [_Worker(self._context, spec) for _ in range(self.num_workers)]
        self._task = 0
        # closes the pool even if the caller forgets (interpreter exit, garbage collection)
        self._finalizer = weakref.finalize(self, _stop_all, self.workers)

    @property
    def description(self) -> str:
        return f"{self.num_workers} worker processes"

    def pids(self) -> list[int | None]:
        return [w.pid for w in self.workers]

    def busy_pids(self) -> list[int | None]:
        return [w.pid for w in self.workers if w.chunk is not None]

    def _abandon(self) -> None:
        for worker in self.workers:
            if worker.chunk is not None:
                worker.stop(busy_ok=True)
                worker.chunk = None

    def _dispatch(
        self, chunks: list[list[TraversalId]], pending: deque, sigma, snapshot: list
    ) -> None:
        for index, worker in enumerate(self.workers):
            if not pending:
                break
            if worker.chunk is not None:
                continue
            if not worker.process.is_alive():  # died while idle: nothing to rerun
                worker = self._replace(index, worker.cause_of_death())
            chunk_index, attempt = pending.popleft()
            try:
                if worker.version != sigma.version:
                    if not snapshot:
                        snapshot.append(sigma.snapshot())
                    worker.conn.send(("policy", snapshot[0]))
                    worker.version = sigma.version
                self._task += 1
                worker.conn.send(("run", self._task, chunks[chunk_index]))
            except (BrokenPipeError, OSError):
                pending.appendleft((chunk_index, attempt))  # not started: no attempt used
                self._replace(index, worker.cause_of_death())
                continue
            worker.chunk, worker.attempt = chunk_index, attempt

    def _collect(
        self, chunks: list[list[TraversalId]], pending: deque
    ) -> list[tuple[int, list[TraversalResult]]]:
        busy = [w for w in self.workers if w.chunk is not None]
        if not busy:  # every send failed and was requeued: dispatch again to fresh workers
            return []
        done = []
        ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
        for worker in busy:
            if worker.conn not in ready and worker.process.sentinel not in ready:
                continue
            chunk_index, attempt = worker.chunk, worker.attempt
            cause = None
            try:
                if worker.conn.poll():
                    message = worker.conn.recv()
                    if message[0] == "done":
                        done.append((chunk_index, message[2]))
                        worker.chunk = None
                        continue
                    cause = message[2]
            except (EOFError, OSError):
                pass
            cause = cause or worker.cause_of_death()
            self._failed(chunks[chunk_index], chunk_index, attempt, cause, pending)
            worker.chunk = None
            self._replace(self.workers.index(worker), cause)
        return done

    def _replace(self, index: int, cause: str) -> _Worker:
        """A fresh worker in slot ``index`` (the old one is stopped for good)."""
        old = self.workers[index]
        old.stop(busy_ok=True)
        self.workers[index] = _Worker(self._context, self.spec)
        self.restarts += 1
        log.info("replaced traversal worker pid %s (%s)", old.pid, cause)
        return self.workers[index]

    def close(self) -> None:
        """Stop every worker (idle ones cleanly, busy ones at once); safe to call twice."""
        if self._finalizer.alive:
            self._finalizer.detach()
            _stop_all(self.workers)


def make_executor(spec: WorkerSpec) -> ChunkedExecutor | None:
    """The executor ``spec.traversal.executor`` names (one of EXECUTORS, validated by
    lostcities/config_checks.py); None for ``inline`` (the trainer builds that one on its
    own sigma)."""
    cfg = spec.traversal
    if cfg.executor == "inline":
        return None
    if cfg.executor == "ray":
        from lostcities.cfr.ray_workers import RayExecutor  # ray is an optional extra

        return RayExecutor(
            spec, cfg.num_workers, cfg.chunk_size, cfg.worker_retries, cfg.ray_address
        )
    return ProcessExecutor(spec, cfg.num_workers, cfg.chunk_size, cfg.worker_retries)
