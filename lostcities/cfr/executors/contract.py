"""The executor contract: who runs an iteration's traversals. Only the partition of the ID
list varies.

The trainer hands an executor the canonical list of traversal IDs of one
(iteration, player) and the current sigma; the executor yields the results as
consecutive slices of that list, in ID order (one ``TraversalResult`` per ID), so the
trainer merges each slice into its memories as it arrives and never holds a whole
iteration's samples. Every random number of a traversal is keyed by its ID, so which
process ran it, with which neighbours, cannot change its result. ``run``'s optional
``on_progress(done)`` hears how many results are in, for a progress display.

The same pool also runs other work keyed by ID (lostcities/cfr/executors/tasks.py): the
IDs are then a task's (e.g. ``TeacherGameId``) and the payload in sigma's place a
:class:`~lostcities.cfr.executors.tasks.TaskPayload`, whose snapshot names the task a
worker builds; its results come back in ID order as traversals' do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import TraversalId, TraversalResult


class WorkerError(RuntimeError):
    """Traversals failed in a worker beyond the allowed retries (one-line message)."""


class Executor(Protocol):
    num_workers: int  # 0: the traversals run in the trainer's process

    def run(
        self,
        ids: list[TraversalId],
        sigma: AdvantagePolicy,
        on_progress: Callable[[int], None] | None = None,
    ) -> Iterator[list[TraversalResult]]:
        """Consecutive slices of the results of ``ids``, in ID order."""
        ...

    @property
    def description(self) -> str:
        """Where the traversals run, for the run's header line."""
        ...

    def close(self) -> None: ...


def payload_key(payload) -> tuple[str, int]:
    """What a worker holds, so a payload is sent once per worker: sigma's version, or a
    task payload's; the kind keeps the two apart."""
    return (type(payload).__name__, payload.version)


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
