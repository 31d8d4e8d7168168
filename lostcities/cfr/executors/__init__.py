"""Executors: who runs an iteration's traversals (lostcities/cfr/executors/contract.py).

``contract``: the interface and the ordered merge; ``scheduler``: chunks, ID order and
named reruns, shared by the pools; ``worker``: what a pooled worker runs; ``inline``,
``processes``, ``ray_actors``: the three places traversals run; ``factory``: the only
module that names them all.
"""

from lostcities.cfr.executors.contract import Executor, WorkerError, ordered_results, run_all
from lostcities.cfr.executors.factory import make_executor
from lostcities.cfr.executors.inline import InlineExecutor

__all__ = [
    "Executor",
    "InlineExecutor",
    "WorkerError",
    "make_executor",
    "ordered_results",
    "run_all",
]
