"""Traversal in a pool of spawned worker processes: ``executor=processes``.

The pool lives for the whole run. Each worker rebuilds its own game kernel, sigma and
traverser from the :class:`lostcities.cfr.traversal.TraversalSpec`, runs one torch
thread, receives the weights once per (iteration, player) as one message of clean numpy
state dicts, and answers each chunk of IDs with that chunk's results in one message, so
a chunk is either merged whole or not at all. A worker that raises or dies is named with
its traversal IDs and the cause and replaced (lostcities/cfr/executors/scheduler.py).
Workers never log to MLflow: stats travel back with the results and the trainer logs them.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import weakref
from collections import deque
from multiprocessing.connection import Connection, wait

from lostcities.cfr.executors.contract import payload_key
from lostcities.cfr.executors.scheduler import ChunkedExecutor
from lostcities.cfr.executors.worker import TraversalWorker
from lostcities.cfr.traversal import TraversalId, TraversalResult, TraversalSpec

STOP_TIMEOUT_S = 5.0  # an idle worker gets this long to exit after "stop"

log = logging.getLogger(__name__)


def _worker_main(spec: TraversalSpec, conn: Connection) -> None:
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


class _Worker:
    def __init__(self, context, spec: TraversalSpec) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main, args=(spec, child), daemon=True, name="lostcities-traversal"
        )
        self.process.start()
        child.close()  # the parent keeps one end: EOF reaches the worker if the parent dies
        self.version: tuple[str, int] | None = None  # payload_key of what it holds
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


class ProcessExecutor(ChunkedExecutor):
    """A pool of ``num_workers`` spawned traversal workers that lives until ``close``
    (``num_workers`` 0: the cores this process may use)."""

    def __init__(
        self, spec: TraversalSpec, num_workers: int = 0, chunk_size: int = 0, retries: int = 1
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
                if worker.version != payload_key(sigma):
                    if not snapshot:
                        snapshot.append(sigma.snapshot())
                    worker.conn.send(("policy", snapshot[0]))
                    worker.version = payload_key(sigma)
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
