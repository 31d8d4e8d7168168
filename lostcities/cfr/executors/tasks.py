"""Work other than traversals on the traversal executor: games keyed by ID.

A task is a class whose instances a worker builds from a snapshot (plain values and
numpy weights) and then asks to ``run(ids)``, returning one result per ID, each with its
``id``, in ID order. Every random number of an ID's work must be keyed by the ID, so the
worker count cannot change a result (the contract of lostcities/cfr/executors/contract.py).

The caller hands the executor a :class:`TaskPayload` in sigma's place. Its snapshot names
the task class by import path (``"package.module:Class"``), so this package does not
import the packages whose tasks it runs: the play-time search's teacher games
(lostcities/teacher/games.py) are one.

    >>> payload = TaskPayload("lostcities.teacher.games:TeacherGames", {...})
    >>> results = run_all(executor, ids, payload)   # ids: e.g. TeacherGameId(round, k)
"""

from __future__ import annotations

import importlib
import itertools
from typing import Protocol

_versions = itertools.count(1)  # distinct per payload made in this process


class Task(Protocol):
    def run(self, ids: list) -> list: ...


class TaskPayload:
    """A task for the workers: ``task`` its class's import path, ``config`` what the
    class is built from (picklable by value). ``version`` tells the executor when the
    workers need the new one."""

    def __init__(self, task: str, config: dict) -> None:
        self.task = task
        self.config = config
        self.version = next(_versions)

    def snapshot(self) -> dict:
        return {"task": self.task, "config": self.config}


def is_task_snapshot(snapshot: dict) -> bool:
    return "task" in snapshot


def build_task(snapshot: dict) -> Task:
    """The task object a :class:`TaskPayload`'s snapshot describes."""
    module_name, _, class_name = snapshot["task"].partition(":")
    task_class = getattr(importlib.import_module(module_name), class_name)
    return task_class(snapshot["config"])


def is_traversal(ids: list) -> bool:
    """Whether a chunk of IDs is traversals (TraversalId), not a task's."""
    from lostcities.cfr.traversal import TraversalId

    return not ids or isinstance(ids[0], TraversalId)
