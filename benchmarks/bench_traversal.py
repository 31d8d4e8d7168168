"""Traversal benchmark: Lost Cities rollout-scheme traversals with the 512x3 network.

    python benchmarks/bench_traversal.py [--traversals 6] [--hidden 512] [--layers 3]
                                         [--warm-start 1.0]

Reports nodes/s and splits traversal time into
- network forward: time inside the torch forward calls of the policy;
- policy glue: the rest of the policy callback (numpy, regret matching, call overhead,
  and with ``--warm-start`` the heuristic seed evaluated on every queried row);
- game logic: the kernel's game-operation counts (legal masks, encodes,
  copy+apply, reshuffles) times each operation's cost measured in C by
  ``lostcities.games._state.op_costs``;
- kernel's own work: what remains (traversal bookkeeping, sampling, buffers).
All measured in one process, side by side; shares are what to compare.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from lostcities.cfr.initial import lost_cities_heuristic
from lostcities.cfr.networks import build_network
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import make_traverser
from lostcities.config import NetworkConfig, TraversalConfig
from lostcities.games._state import op_costs
from lostcities.games.lost_cities import LostCitiesGame


class TimedNet(torch.nn.Module):
    """Wraps a network and accumulates the wall time of its forward calls."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net
        self.seconds = 0.0

    def forward(self, x):
        start = time.perf_counter()
        out = self.net(x)
        self.seconds += time.perf_counter() - start
        return out


class TimedPolicy:
    def __init__(self, policy) -> None:
        self.policy = policy
        self.seconds = 0.0

    def __call__(self, *args) -> None:
        start = time.perf_counter()
        self.policy(*args)
        self.seconds += time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traversals", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--branch-prob", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (workers use 1)")
    parser.add_argument(
        "--warm-start", type=float, default=0.0, help="seed regrets with the heuristic (c)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    prototype = LostCitiesGame.from_seed(0).kernel
    nets = [
        TimedNet(
            build_network(
                NetworkConfig(hidden=args.hidden, layers=args.layers),
                prototype.encoding_size,
                prototype.num_actions,
                seed=p,
            ).eval()
        )
        for p in (0, 1)
    ]
    sigma = AdvantagePolicy(initial=lost_cities_heuristic, warm_start=args.warm_start)
    for player, net in enumerate(nets):
        sigma.set_network(player, net)
    policy = TimedPolicy(sigma)
    cfg = TraversalConfig(scheme="rollout", branch_prob=args.branch_prob, rollouts=1)
    traverser = make_traverser(prototype, policy, cfg, seed=1, utility_scale=0.01)

    start = time.perf_counter()
    nodes = samples = 0
    for k in range(args.traversals):
        adv, _, stats = traverser.run(1, k % 2, k)
        nodes += stats["nodes"]
        samples += len(adv[0])
    total = time.perf_counter() - start

    costs = op_costs(prototype, 20_000, 7)
    game = 1e-9 * (
        traverser.ops_mask * costs["legal_mask"]
        + traverser.ops_encode * costs["encode"]
        + traverser.ops_apply * costs["copy_apply"]
        + traverser.ops_reshuffle * costs["copy_reshuffle"]
    )
    forward = sum(net.seconds for net in nets)
    glue = policy.seconds - forward
    own = total - policy.seconds - game
    shares = {
        "network forward": forward,
        "policy glue (numpy, regret matching)": glue,
        "game logic": game,
        "kernel's own work": own,
    }
    print(
        f"Lost Cities rollout traversals, {args.hidden}x{args.layers} MLP, "
        f"branch_prob {args.branch_prob}, torch threads {args.threads}, "
        f"warm start {args.warm_start}"
    )
    print(
        f"  {args.traversals} traversals, {nodes} nodes, {samples} advantage samples "
        f"in {total:.2f} s: {nodes / total:,.0f} nodes/s, {total / max(samples, 1) * 1e3:.1f} ms "
        "per advantage sample"
    )
    print("  op costs (ns): " + ", ".join(f"{k} {v:.0f}" for k, v in costs.items()))
    for name, seconds in shares.items():
        print(f"  {name:<40}{seconds:8.2f} s  {100 * seconds / total:5.1f}%")
    return {"nodes_per_second": nodes / total, **{k: v / total for k, v in shares.items()}}


if __name__ == "__main__":
    main(sys.argv[1:])
