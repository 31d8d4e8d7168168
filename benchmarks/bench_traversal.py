"""Traversal benchmark: Lost Cities traversals at the shipped training settings.

    python benchmarks/bench_traversal.py [--traversals 6] [--threads 1] [--hidden H]
        [--layers L] [--branch-prob P] [--rollouts R] [--warm-start C]
        [--sampling-policy NAME] [--initial-strategy NAME] [OVERRIDE ...]

Every default comes from composing the shipped Hydra config (``train``: game lost_cities,
its compact 256x2 network, rollout scheme, branch_prob, rollouts, warm start, heuristic
sampling policy and sigma_1, turn cap, utility scale), so the benchmark measures what
training runs and cannot drift from it. OVERRIDEs are Hydra overrides applied to that
config (e.g. ``network=default traversal.branch_prob=0.05``); the flags apply on top.

Reports nodes/s and splits traversal time into
- network forward: time inside the network forward calls of sigma (and of the learned
  value, with ``traversal.action_values=learned``: the shipped setting);
- policy glue: the rest of the policy callback (numpy, regret matching, call overhead,
  and with a warm start the heuristic seed evaluated on every queried row);
- game logic: the kernel's game-operation counts (legal masks, encodes,
  copy+apply, reshuffles) times each operation's cost measured in C by
  ``lostcities.games._state.op_costs``;
- kernel's own work: what remains (traversal bookkeeping, sampling, buffers).
All measured in one process, side by side; shares are what to compare.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lostcities.cfr.networks import build_network, value_network
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import make_traverser
from lostcities.config import TrainConfig, register_configs
from lostcities.games import make_game
from lostcities.games._state import op_costs

# flag -> (config section, field): the settings most often varied by hand
FLAGS = {
    "hidden": ("network", "hidden"),
    "layers": ("network", "layers"),
    "branch_prob": ("traversal", "branch_prob"),
    "rollouts": ("traversal", "rollouts"),
    "warm_start": ("traversal", "warm_start"),
    "sampling_policy": ("traversal", "sampling_policy"),
    "initial_strategy": ("traversal", "initial_strategy"),
}


def shipped_config(overrides: list[str]) -> TrainConfig:
    """The typed training config exactly as ``python -m lostcities.train OVERRIDES`` sees it."""
    register_configs()
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        return OmegaConf.to_object(compose("train", overrides=overrides))


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, TrainConfig]:
    """The flags, and the shipped config with the overrides, then the flags, applied."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides")
    parser.add_argument("--traversals", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (workers use 1)")
    parser.add_argument("--hidden", type=int, help="network width (default: shipped)")
    parser.add_argument("--layers", type=int, help="network depth (default: shipped)")
    parser.add_argument("--branch-prob", type=float, help="default: shipped")
    parser.add_argument("--rollouts", type=int, help="playouts per action (default: shipped)")
    parser.add_argument("--warm-start", type=float, help="heuristic regret seed c (shipped)")
    parser.add_argument("--sampling-policy", help="trajectory policy (default: shipped)")
    parser.add_argument("--initial-strategy", help="sigma_1 and the seed (default: shipped)")
    parser.add_argument(
        "--kind", choices=("regret", "value"), default="regret", help="which traversals to time"
    )
    args = parser.parse_args(argv)
    cfg = shipped_config(args.overrides)
    if cfg.game.name != "lost_cities":
        parser.error(f"this benchmark times Lost Cities traversals, got game {cfg.game.name!r}")
    for flag, (section, field) in FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            changed = dataclasses.replace(getattr(cfg, section), **{field: value})
            cfg = dataclasses.replace(cfg, **{section: changed})
    return args, cfg


class TimedForward:
    """Wraps a network forward (``NetworkForward``) and accumulates the wall time of its
    calls."""

    def __init__(self, forward) -> None:
        self.forward = forward
        self.seconds = 0.0

    def __call__(self, x):
        start = time.perf_counter()
        out = self.forward(x)
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

    @property
    def values(self):
        # the learned-value callback, untimed here: its forward is timed by its
        # TimedForward, the rest counts as the kernel's own work
        return self.policy.values


def main(argv: list[str] | None = None) -> dict[str, float]:
    args, cfg = parse_args(argv)
    torch.set_num_threads(args.threads)
    spec = make_game(cfg.game)
    prototype = spec.prototype
    invariant = cfg.determinism.batch_invariant_inference
    sigma = AdvantagePolicy.from_config(cfg.traversal, batch_invariant=invariant)
    for player in (0, 1):
        net = build_network(cfg.network, spec.encoding_size, spec.num_actions, seed=player)
        sigma.set_network(player, net.eval())
    nets = [TimedForward(forward) for forward in sigma.forwards]
    sigma.forwards = list(nets)
    if cfg.traversal.action_values == "learned":
        sigma.set_value_network(value_network(cfg.value, spec.encoding_size, seed=2).eval())
        nets.append(TimedForward(sigma.value_forward))
        sigma.value_forward = nets[-1]
    policy = TimedPolicy(sigma)
    win_loss = cfg.game.utility == "win_loss"
    traverser = make_traverser(
        prototype, policy, cfg.traversal, 1, cfg.game.utility_scale, win_loss
    )

    start = time.perf_counter()
    nodes = samples = 0
    for k in range(args.traversals):
        if args.kind == "value":
            (features, _), stats = traverser.run_values(1, k % 2, k)
            samples += len(features)
        else:
            adv, _, stats = traverser.run(1, k % 2, k)
            samples += len(adv[0])
        nodes += stats["nodes"]
    total = time.perf_counter() - start

    costs = op_costs(prototype, 20_000, 7)
    game = 1e-9 * (
        traverser.ops_mask * costs["legal_mask"]
        + traverser.ops_encode * costs["encode"]
        + traverser.ops_apply * costs["copy_apply"]
        + traverser.ops_reshuffle * costs["copy_reshuffle"]
    )
    forward = sum(net.seconds for net in nets)
    value_calls = nets[2].seconds if len(nets) > 2 else 0.0  # outside the policy callback
    glue = policy.seconds - (forward - value_calls)
    own = total - policy.seconds - value_calls - game
    shares = {
        "network forward": forward,
        "policy glue (numpy, regret matching)": glue,
        "game logic": game,
        "kernel's own work": own,
    }
    network, tr = cfg.network, cfg.traversal
    print(
        f"Lost Cities {tr.scheme} {args.kind} traversals, action values {tr.action_values}, "
        f"{network.name} {network.kind} "
        f"{network.hidden}x{network.layers}, "
        f"branch_prob {tr.branch_prob}, rollouts {tr.rollouts}, sampling {tr.sampling_policy}, "
        f"sigma_1 {tr.initial_strategy}, warm start {tr.warm_start}, "
        f"torch threads {args.threads}"
    )
    print(
        f"  {args.traversals} traversals, {nodes} nodes, {samples} samples "
        f"in {total:.2f} s: {nodes / total:,.0f} nodes/s, {total / max(samples, 1) * 1e3:.2f} ms "
        f"per {'value' if args.kind == 'value' else 'advantage'} sample, "
        f"{samples / total:,.0f} samples/s"
    )
    print("  op costs (ns): " + ", ".join(f"{k} {v:.0f}" for k, v in costs.items()))
    for name, seconds in shares.items():
        print(f"  {name:<40}{seconds:8.2f} s  {100 * seconds / total:5.1f}%")
    return {"nodes_per_second": nodes / total, **{k: v / total for k, v in shares.items()}}


if __name__ == "__main__":
    main(sys.argv[1:])
