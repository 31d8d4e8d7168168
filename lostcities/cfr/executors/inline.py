"""The inline executor: the traversals run in the trainer's process, on the sigma the
trainer passes (its own), in slices so that a long call reports progress and its
samples reach the memories as it goes. A task payload's IDs (lostcities/cfr/executors/
tasks.py) run here the same way, on the task built from the payload's snapshot."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from lostcities.cfr.executors.contract import payload_key
from lostcities.cfr.executors.scheduler import MAX_AUTO_CHUNK
from lostcities.cfr.executors.tasks import build_task, is_traversal
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import (
    TraversalId,
    TraversalResult,
    TraversalSpec,
    run_traversals,
    traverser_of,
)

PROGRESS_STEPS = 100  # a call reports progress about this many times


class InlineExecutor:
    """Runs a list of traversal IDs in this process, in order. The traverser is built on
    the first sigma it is given and kept while the caller passes that same object (the
    trainer's sigma changes its weights in place)."""

    num_workers = 0

    def __init__(self, spec: TraversalSpec) -> None:
        from lostcities.games import make_game

        self.spec = spec
        self.prototype = make_game(spec.game).prototype
        self._sigma: AdvantagePolicy | None = None
        self._traverser = None
        self._task: tuple[tuple[str, int], object] | None = None  # (payload_key, task)

    @property
    def description(self) -> str:
        return "inline"

    def traverser(self, sigma: AdvantagePolicy):
        """The traverser that plays ``sigma`` (built once per sigma object)."""
        if sigma is not self._sigma:
            self._traverser = traverser_of(self.spec, self.prototype, sigma)
            self._sigma = sigma
        return self._traverser

    def run(
        self,
        ids: list[TraversalId],
        sigma: AdvantagePolicy,
        on_progress: Callable[[int], None] | None = None,
    ) -> Iterator[list[TraversalResult]]:
        # In slices of ~1% (at most MAX_AUTO_CHUNK): the results do not change.
        if is_traversal(ids):
            traverser = self.traverser(sigma)
            run = lambda chunk: run_traversals(traverser, chunk)  # noqa: E731
        else:  # a task payload in sigma's place
            if self._task is None or self._task[0] != payload_key(sigma):
                self._task = (payload_key(sigma), build_task(sigma.snapshot()))
            run = self._task[1].run
        step = max(1, min(MAX_AUTO_CHUNK, math.ceil(len(ids) / PROGRESS_STEPS)))
        for i in range(0, len(ids), step):
            yield run(ids[i : i + step])
            if on_progress is not None:
                on_progress(min(i + step, len(ids)))

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
