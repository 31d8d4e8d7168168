"""The scheduling every pooled executor shares: chunks of an ID list go to idle workers in
ID order, results come back in ID order, and a chunk whose worker raised or died is
named and rerun in a fresh worker (identical results: every stream is keyed by traversal
ID) up to ``retries`` times, then the run stops with one line. How a chunk reaches a
worker and comes back is the transport's (lostcities/cfr/executors/processes.py,
ray_actors.py)."""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Iterator

from lostcities.cfr.executors.contract import WorkerError
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import REGRET, VALUE, TraversalId, TraversalResult

TASKS_PER_WORKER = 4  # automatic chunk size: about this many chunks per worker and call
# ... and at most this many traversals: a Lost Cities rollout traversal sends ~0.35 MB of
# samples back, and chunks that finish ahead of an earlier one wait in the trainer.
MAX_AUTO_CHUNK = 64

log = logging.getLogger(__name__)


def describe_ids(ids: list[TraversalId]) -> str:
    """A chunk's IDs in one short phrase: chunks are consecutive indices of one (t, p)."""
    first, last = ids[0], ids[-1]
    what = {VALUE: "value traversal", REGRET: "traversal"}.get(first.kind, first.kind)
    if len(ids) == 1:
        return f"{what} ID {first.key}"
    return f"{what} IDs {first.key}..{last.key} ({len(ids)} IDs)"


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
                f"{attempt + 1} time(s) (executor.retries={self.retries}): {cause}"
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
