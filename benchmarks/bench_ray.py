"""Traversal on Ray actors against the process pool, side by side in one run.

    python benchmarks/bench_ray.py [--traversals 48] [--rounds 3] [--cores 64]

Both executors get the same Lost Cities traversal IDs (the shipped config, networks
freshly initialised as at iteration 2), interleaved over rounds so a busy neighbour hurts
every arm alike, with 1 and 2 workers each (a local Ray started here; each worker and
actor runs 1 torch thread). Each round is one "iteration": a new sigma version, so the
weights travel once per call, as in training. Reports:
- nodes/s per arm, the ratio ray / processes at 2 workers, and each executor's parallel
  efficiency of 2 workers over 1;
- the fixed cost of one call (new weights, 2 chunks of 1 traversal each on Kuhn: the
  round trip with next to no work), per executor;
- a projection for a cluster of ``--cores`` CPUs: one worker's measured rate times the
  cores, times the measured 2-worker efficiency (an upper bound: a cluster adds network
  hops and more workers per head than one machine has).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter

import ray
import torch
from bench_workers import ITERATION, compose_config, spec_of, traverser_at_iteration_2

from lostcities.cfr.executors import run_all
from lostcities.cfr.executors.processes import ProcessExecutor
from lostcities.cfr.executors.ray_actors import RayExecutor, connect
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import TraversalId

EXECUTORS = {"processes": ProcessExecutor, "ray": RayExecutor}
# sigma versions no worker holds yet: an executor pushes weights when the version changes
VERSIONS = itertools.count(1_000_000)


def fresh_sigma(cfg) -> AdvantagePolicy:
    """Sigma of iteration 2 with a version no executor has seen (its weights travel)."""
    sigma = traverser_at_iteration_2(spec_of(cfg), cfg)[1]
    sigma.version = next(VERSIONS)
    return sigma


def call_overhead(executors: dict[str, object], rounds: int) -> dict[str, float]:
    """Seconds of one call with new weights and 2 one-traversal chunks of Kuhn."""
    ids = [TraversalId(ITERATION, 0, k) for k in range(2)]
    seconds: Counter[str] = Counter()
    for _ in range(rounds):
        for name, executor in executors.items():
            sigma = AdvantagePolicy()
            sigma.version = next(VERSIONS)
            start = time.perf_counter()
            run_all(executor, ids, sigma)
            seconds[name] += time.perf_counter() - start
    return {name: s / rounds for name, s in seconds.items()}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traversals", type=int, default=48, help="traversal IDs per call")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--cores", type=int, default=64, help="cluster size to project to")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg = compose_config([])
    kuhn = compose_config(["game=kuhn"])
    ids = [TraversalId(ITERATION, k % 2, k) for k in range(args.traversals)]
    print(
        f"Lost Cities, shipped traversal config ({cfg.network.hidden}x{cfg.network.layers}), "
        f"{args.traversals} traversals per call, {args.rounds} rounds; every worker and "
        "actor uses 1 torch thread; Ray: a local instance"
    )
    arms = [(name, workers) for workers in (1, 2) for name in EXECUTORS]
    pools: dict[tuple[str, int], object] = {}
    small: dict[str, object] = {}
    # One local Ray for every Ray arm: 1 + 2 + 2 actors of 1 logical CPU each, which
    # take turns on this machine's cores like the process pools do.
    connect(None, num_cpus=5)
    try:
        for name, workers in arms:
            pool = EXECUTORS[name](spec_of(cfg), num_workers=workers)
            run_all(pool, ids[:2], fresh_sigma(cfg))  # start-up and imports out of the timing
            pools[(name, workers)] = pool
        for name in EXECUTORS:
            small[name] = EXECUTORS[name](spec_of(kuhn), num_workers=2)
        seconds: Counter[tuple[str, int]] = Counter()
        nodes: Counter[tuple[str, int]] = Counter()
        for _ in range(args.rounds):
            sigma = fresh_sigma(cfg)  # one iteration: new weights for every arm
            for arm in arms:
                start = time.perf_counter()
                results = run_all(pools[arm], ids, sigma)
                seconds[arm] += time.perf_counter() - start
                nodes[arm] += sum(r.stats["nodes"] for r in results)
        overhead = call_overhead(small, 5 * args.rounds)
    finally:
        for pool in [*pools.values(), *small.values()]:
            pool.close()
        ray.shutdown()
    rate = {arm: nodes[arm] / seconds[arm] for arm in arms}
    print(f"\n  {'arm':<16}{'nodes/s':>12}{'s per call':>12}")
    for arm in arms:
        per_call = seconds[arm] / args.rounds
        print(f"  {arm[0] + '-' + str(arm[1]):<16}{rate[arm]:12,.0f}{per_call:12.2f}")
    same = len({nodes[arm] for arm in arms}) == 1
    print(f"  same node counts in every arm: {same}")
    ratio = rate[("ray", 2)] / rate[("processes", 2)]
    print(f"  ray / processes at 2 workers: {ratio:.2f}x nodes/s")
    result = {"ratio_ray_over_processes": ratio}
    for name in EXECUTORS:
        efficiency = rate[(name, 2)] / (2 * rate[(name, 1)])
        # one worker's rate, times the cores, times the efficiency 2 workers kept
        projected = rate[(name, 1)] * args.cores * min(efficiency, 1.0)
        print(
            f"  {name}: parallel efficiency 2 over 1 {100 * efficiency:.0f}%; fixed cost of a "
            f"call {1000 * overhead[name]:.1f} ms; {args.cores} cores at the measured "
            f"per-worker rate and efficiency: {projected:,.0f} nodes/s"
        )
        result[f"{name}/efficiency"] = efficiency
        result[f"{name}/call_seconds"] = overhead[name]
        result[f"{name}/nodes_per_second"] = rate[(name, 2)]
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
