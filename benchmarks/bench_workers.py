"""Traversal executors side by side: inline vs worker processes, determinism off vs strict.

    python benchmarks/bench_workers.py [--traversals 24] [--rounds 2] [--overrides ...]

Runs the same Lost Cities traversal IDs (the shipped config: `game=lost_cities`, its
network, warm start and rollout scheme; networks freshly initialised, as at iteration 2)
with every executor, interleaved over rounds so a busy neighbour hurts every arm alike:
- inline (the trainer's process, 1 torch thread) and processes with 1 and 2 workers;
- each with determinism=off and determinism=strict.
Reports nodes/s per arm, the parallel efficiency of 2 workers over 1 (target >= 85%) and
the cost of strict over off (target <= 5%). Then, inline, it splits traversal time into
network forward, heuristic seed (sigma_1 / warm start / sampling policy), the rest of the
policy glue, game logic and the kernel's own work, and compares the traversal's nodes/s
with the raw forward throughput of the same network at the batch sizes the traversal
actually asked for (how close the traversal runs to its forward limit).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import replace

import numpy as np
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lostcities.cfr.executors import run_all
from lostcities.cfr.executors.processes import ProcessExecutor
from lostcities.cfr.executors.worker import build_worker_traverser
from lostcities.cfr.networks import build_network, value_network
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import TraversalId, TraversalSpec, run_traversals
from lostcities.config import TrainConfig, register_configs
from lostcities.games._state import op_costs
from lostcities.train import traversal_spec

ITERATION = 2  # sigma from advantage networks (iteration 1 plays the heuristic alone)


def compose_config(overrides: list[str]) -> TrainConfig:
    register_configs()
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        return OmegaConf.to_object(compose("train", overrides=["game=lost_cities", *overrides]))


def traverser_at_iteration_2(spec: TraversalSpec, cfg: TrainConfig):
    """(traverser, sigma) of a worker built from ``spec``, sigma holding the networks of
    iteration 2 (:func:`with_networks`)."""
    traverser, sigma, *_ = build_worker_traverser(spec)
    with_networks(sigma, cfg, traverser.dim, traverser.num_actions)
    return traverser, sigma


def with_networks(sigma: AdvantagePolicy, cfg: TrainConfig, dim: int, actions: int) -> None:
    """Sigma of iteration 2: advantage networks and, with learned action values, a history
    value network (freshly initialised: the traversal's cost does not depend on fit)."""
    for player in (0, 1):
        net = build_network(cfg.network, dim, actions, seed=player).eval()
        sigma.set_network(player, net, regret_weight=1.0, iteration=ITERATION - 1)
    if cfg.traversal.action_values == "learned":
        sigma.set_value_network(value_network(cfg.value, dim, seed=2).eval())


class Timed:
    """Wraps a callable, accumulating its wall time and the row count of its first argument."""

    def __init__(self, fn, rows_of=None) -> None:
        self.fn, self.seconds, self.rows_of = fn, 0.0, rows_of
        self.batches: Counter[int] = Counter()

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        out = self.fn(*args, **kwargs)
        self.seconds += time.perf_counter() - start
        if self.rows_of is not None:
            self.batches[len(args[self.rows_of])] += 1
        return out


def run_arm(arm: str, cfg: TrainConfig, ids, pools) -> tuple[float, int]:
    """Seconds and nodes of the ID list on one arm."""
    traverser, sigma = traverser_at_iteration_2(spec_of(cfg), cfg)
    start = time.perf_counter()
    if arm == "inline":
        results = run_traversals(traverser, ids)
    else:
        results = run_all(pools[arm], ids, sigma)
    seconds = time.perf_counter() - start
    return seconds, sum(r.stats["nodes"] for r in results)


def spec_of(cfg: TrainConfig) -> TraversalSpec:
    return traversal_spec(cfg)


def shares(cfg: TrainConfig, ids) -> None:
    """Where inline traversal time goes, and the forward limit at the traversal's batches."""
    traverser, sigma = traverser_at_iteration_2(spec_of(cfg), cfg)
    forwards = [Timed(f, rows_of=0) for f in sigma.forwards]
    sigma.forwards = forwards
    seed = sigma.initial = Timed(sigma.initial)
    # the sampling policy of the trajectory calls the same heuristic: time it too
    start = time.perf_counter()
    results = run_traversals(traverser, ids)
    total = time.perf_counter() - start
    nodes = sum(r.stats["nodes"] for r in results)
    forward = sum(f.seconds for f in forwards)
    costs = op_costs(traverser_prototype(cfg), 20_000, 7)
    game = 1e-9 * (
        traverser.ops_mask * costs["legal_mask"]
        + traverser.ops_encode * costs["encode"]
        + traverser.ops_apply * costs["copy_apply"]
        + traverser.ops_reshuffle * costs["copy_reshuffle"]
    )
    # policy callback time = everything the kernel does not do itself
    queries = sum(r.stats["query_rows"] for r in results)
    other = total - forward - seed.seconds - game
    print(f"\ninline time shares ({len(ids)} traversals, {nodes:,} nodes, {queries:,} rows):")
    for name, seconds in [
        ("network forward", forward),
        ("heuristic seed (C kernel)", seed.seconds),
        ("game logic", game),
        ("policy glue + kernel's own work", other),
    ]:
        print(f"  {name:<34}{seconds:7.2f} s  {100 * seconds / total:5.1f}%")
    # raw forward throughput at exactly the traversal's batch sizes
    batches = sum((f.batches for f in forwards), Counter())
    net = build_network(cfg.network, traverser.dim, traverser.num_actions, seed=0).eval()
    generator = np.random.default_rng(0)
    raw = 0.0
    with torch.inference_mode():
        for size, count in batches.items():
            x = torch.from_numpy(generator.random((size, traverser.dim), dtype=np.float32))
            start = time.perf_counter()
            for _ in range(count):
                net(x)
            raw += time.perf_counter() - start
    mean_batch = sum(s * c for s, c in batches.items()) / max(sum(batches.values()), 1)
    print(
        f"  forwards: {sum(batches.values()):,} calls, mean {mean_batch:.1f} rows; raw torch "
        f"forward of those batches {raw:.2f} s -> forward limit {nodes / raw:,.0f} nodes/s; "
        f"traversal {nodes / total:,.0f} nodes/s = {100 * raw / total:.0f}% of the limit"
    )


def differing(cfg: TrainConfig, ids, inference_batch: int) -> tuple[int, int]:
    """(traversals whose samples change, rows whose forward output changes) when the
    traversal's forwards are capped at ``inference_batch`` rows instead of uncapped."""
    runs = []
    for cap in (0, inference_batch):
        capped = replace(cfg.traversal, inference_batch=cap)
        traverser, sigma = traverser_at_iteration_2(replace(spec_of(cfg), traversal=capped), cfg)
        runs.append(run_traversals(traverser, ids))
    changed = sum(
        any(
            not np.array_equal(x, y)
            for x, y in zip(a.advantage + a.strategy, b.advantage + b.strategy, strict=True)
        )
        or a.stats != b.stats
        for a, b in zip(*runs, strict=True)
    )
    return changed, len(ids)


def traverser_prototype(cfg: TrainConfig):
    from lostcities.games import make_game

    return make_game(cfg.game).prototype


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traversals", type=int, default=24, help="traversal IDs per arm")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--overrides", nargs="*", default=[], help="Hydra overrides")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # inline arm: one thread, like each worker
    ids = [TraversalId(ITERATION, k % 2, k) for k in range(args.traversals)]
    modes = {m: compose_config([f"determinism={m}", *args.overrides]) for m in ("off", "strict")}
    arms = ["inline", "processes-1", "processes-2"]
    print(
        f"Lost Cities, shipped traversal config ({modes['off'].network.hidden}x"
        f"{modes['off'].network.layers}), {args.traversals} traversals per arm, "
        f"{args.rounds} rounds; inline and every worker use 1 torch thread"
    )
    pools = {}
    try:
        for mode, cfg in modes.items():
            for workers in (1, 2):
                pool = ProcessExecutor(spec_of(cfg), num_workers=workers)
                warm_up = traverser_at_iteration_2(spec_of(cfg), cfg)[1]
                run_all(pool, ids[:2], warm_up)  # start-up and imports out of the timing
                pools[(mode, workers)] = pool
        seconds: Counter[tuple[str, str]] = Counter()
        nodes: Counter[tuple[str, str]] = Counter()
        for _ in range(args.rounds):
            for mode, cfg in modes.items():
                # the inline arm runs in this process: its torch flags follow the mode
                torch.use_deterministic_algorithms(cfg.determinism.torch_deterministic)
                for arm in arms:
                    by_arm = {f"processes-{w}": pools[(mode, w)] for w in (1, 2)}
                    s, n = run_arm(arm, cfg, ids, by_arm)
                    seconds[(mode, arm)] += s
                    nodes[(mode, arm)] += n
    finally:
        for pool in pools.values():
            pool.close()
    rate = {key: nodes[key] / seconds[key] for key in seconds}
    print(f"\n  {'arm':<14}{'off nodes/s':>14}{'strict nodes/s':>16}{'strict cost':>13}")
    for arm in arms:
        off, strict = rate[("off", arm)], rate[("strict", arm)]
        print(f"  {arm:<14}{off:14,.0f}{strict:16,.0f}{100 * (off / strict - 1):12.1f}%")
    same = all(nodes[("off", arm)] == nodes[("off", "inline")] for arm in arms)
    print(f"  same node counts in every executor (off): {same}")
    for mode in modes:
        efficiency = rate[(mode, "processes-2")] / (2 * rate[(mode, "processes-1")])
        print(f"  parallel efficiency, 2 workers over 1 ({mode}): {100 * efficiency:.0f}%")
    for mode, cfg in modes.items():
        torch.use_deterministic_algorithms(cfg.determinism.torch_deterministic)
        changed, total = differing(cfg, ids, inference_batch=16)
        print(
            f"  traversals whose samples change with inference_batch 16 vs uncapped ({mode}): "
            f"{changed}/{total}"
        )
    shares(modes["off"], ids)
    return {f"{mode}/{arm}": value for (mode, arm), value in rate.items()}


if __name__ == "__main__":
    main(sys.argv[1:])
