"""The training phase alone: ``lostcities.cfr.fitting.fit`` on a prefilled memory, per arm of
compile (off, trainer) x AMP (off, fp16, bf16).

    python benchmarks/bench_trainer_phase.py [--network wide] [--threads 2] [--steps 5]
        [--warmup 3] [--rounds 8] [--phase advantage|policy] [--batch-size 0]
        [--device cpu] [--force-cpu-amp] [--arms eager-fp32 compiled-fp32 ...]

Each arm is a trainer built from the shipped Lost Cities config (``game=lost_cities``,
``network=<name>`` composed by Hydra, so any network group works, e.g. color_shared)
with its own ``amp`` and ``compile`` sub-configs; the memory holds real Lost Cities
encodings and legal masks (random play) with synthetic targets (regrets or sigma), the
same rows for every arm. A step is one ``fit`` minibatch step (sample, symmetry
relabelling if the game config asks for it, forward, loss, backward, clip, Adam), timed
one by one. Arms run interleaved, ``--steps`` each per round, so machine noise hits all
alike; each arm's first ``--warmup`` steps (compile happens there) are dropped and
reported apart. On a CPU the AMP arms fall back to fp32 (as training does) and say so:
they then measure the noise between identical arms. ``--force-cpu-amp`` runs CPU
autocast for real instead, to measure what the fallback avoids.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
import torch
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from lostcities.cfr import targets
from lostcities.cfr.fitting import fit
from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.cfr.traversal import TraversalSpec
from lostcities.config import AmpConfig, CompileConfig, MemoryConfig, TrainConfig, register_configs
from lostcities.games import make_game
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.perf.amp import MixedPrecision
from lostcities.perf.compile import recompile_count
from lostcities.rng import Purpose, Stream

PRECISIONS = {"fp32": "off", "fp16": "fp16", "bf16": "bf16"}  # arm suffix -> amp.dtype
ARMS = [f"{c}-{p}" for c in ("eager", "compiled") for p in PRECISIONS]  # baseline: eager-fp32


def compose_config(network: str) -> TrainConfig | None:
    register_configs()
    try:
        with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
            cfg = compose("train", overrides=["game=lost_cities", f"network={network}"])
    except ConfigCompositionException as e:
        print(f"skip: network group {network!r} does not compose ({e})")
        return None
    return OmegaConf.to_object(cfg)


def random_play_rows(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Compact information states (rows, 64), as the memories store them, and legal masks
    (rows, 106) of the player to move along random Lost Cities games."""
    choices = np.random.default_rng(seed)
    states, masks = [], []
    game_seed = seed
    while len(states) < rows:
        game = LostCitiesGame.from_seed(game_seed)
        while not game.is_terminal and len(states) < rows:
            states.append(game.kernel.compact_view(game.current_player))
            masks.append(game.legal_mask())
            legal = game.legal_actions()
            game.apply(legal[choices.integers(len(legal))])
        game_seed += 1
    return np.stack(states), np.stack(masks)


def synthetic_targets(masks: np.ndarray, phase: str, seed: int) -> np.ndarray:
    """Regrets (advantage phase: normal, scale 0.3, on legal actions) or sigma (policy
    phase: a random distribution over legal actions), (rows, A) float32."""
    rng = np.random.default_rng(seed)
    legal = masks.astype(bool)
    if phase == "advantage":
        return np.where(legal, rng.normal(0.0, 0.3, masks.shape), 0.0).astype(np.float32)
    weights = np.where(legal, rng.random(masks.shape), 0.0)
    return (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)


class Arm:
    """One trainer with its amp/compile choice, a network and optimizer of its phase."""

    def __init__(self, name: str, cfg: TrainConfig, args, rows) -> None:
        self.name = name
        compiled, precision = name.split("-")
        amp = PRECISIONS[precision]
        compile_cfg = CompileConfig(name="trainer") if compiled == "compiled" else None
        with warnings.catch_warnings(record=True) as caught:  # reported in the table instead
            warnings.simplefilter("always")
            self.trainer = DeepCFRTrainer(
                make_game(cfg.game),
                TraversalSpec(cfg.game, cfg.network, cfg.traversal, seed=0),
                MemoryConfig(len(rows[0]), len(rows[0])),
                cfg.optim,
                device=args.device,
                amp=AmpConfig(name=amp, dtype=amp),
                compile=compile_cfg,
            )
        self.notes = sorted({str(w.message) for w in caught})
        if args.force_cpu_amp and amp != "off":
            self.trainer.step.amp = MixedPrecision(
                AmpConfig(dtype=amp), args.device, allow_cpu=True
            )
        self.policy = args.phase == "policy"
        trainer, t = self.trainer, 2
        memory = trainer.strategy_memory if self.policy else trainer.advantage_memories[0]
        memory.add(*rows, 1, Stream(0))
        self.memory = memory
        player = 2 if self.policy else 0
        self.net = trainer._new_net(Purpose.NETWORK_INIT, t, player)
        lr = cfg.optim.strategy_lr if self.policy else cfg.optim.advantage_lr
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        self.loss_fn = targets.policy_loss if self.policy else targets.regret_loss
        self.batch = args.batch_size or (
            cfg.optim.strategy_batch_size if self.policy else cfg.optim.advantage_batch_size
        )
        self.generator = np.random.default_rng(1)  # the same batches for every arm
        self.t = t
        self.times: list[float] = []
        self.warmup: list[float] = []

    def steps(self, n: int, warmup: bool) -> None:
        for _ in range(n):
            start = time.perf_counter()
            trainer = self.trainer
            how = trainer._fit_settings(self.t, 1, self.batch, self.loss_fn)
            fit(self.net, self.optimizer, self.memory, how, self.generator, trainer.step,
                trainer.device)  # fmt: skip
            if self.trainer.device.type == "cuda":
                torch.cuda.synchronize()
            (self.warmup if warmup else self.times).append(time.perf_counter() - start)

    def describe(self) -> str:
        amp = self.trainer.step.amp
        if amp.requested == "off":
            return "fp32"
        if amp.active:
            forced = " (forced on cpu)" if amp.device.type == "cpu" else ""
            return f"{amp.requested} active{forced}"
        return f"{amp.requested} inactive: fp32 fallback"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--network", default="wide", help="network group (conf/network/)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per arm per round")
    parser.add_argument("--warmup", type=int, default=3, help="dropped first steps per arm")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--phase", choices=("advantage", "policy"), default="advantage")
    parser.add_argument("--batch-size", type=int, default=0, help="0: the game config's")
    parser.add_argument("--rows", type=int, default=4096, help="samples in the memory")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--force-cpu-amp", action="store_true", help="real autocast on a CPU")
    parser.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = compose_config(args.network)
    if cfg is None:
        return 0
    print(
        f"network={args.network} ({cfg.network.kind}, hidden {cfg.network.hidden}, layers "
        f"{cfg.network.layers}, attention {cfg.network.attention_layers}), phase={args.phase}, "
        f"device={args.device}, torch {torch.__version__}, threads={torch.get_num_threads()}"
    )
    states, masks = random_play_rows(args.rows, seed=0)
    rows = (states, masks, synthetic_targets(masks, args.phase, seed=0))
    try:
        arms = [Arm(name, cfg, args, rows) for name in args.arms]
    except ValueError as e:  # e.g. a network kind this checkout's networks.py lacks
        print(f"skip: cannot build network {args.network!r}: {e}")
        return 0
    print(
        f"batch={arms[0].batch}, memory={args.rows} rows, symmetries="
        f"{cfg.optim.augment_symmetries}; {args.rounds} rounds x {args.steps} steps per arm, "
        f"first {args.warmup} steps per arm dropped"
    )
    start_recompiles = recompile_count()
    for round_ in range(args.rounds):
        for arm in arms:
            if round_ == 0:
                arm.steps(args.warmup, warmup=True)
            arm.steps(args.steps, warmup=False)
    base = arms[0]
    base_mean = np.mean(base.times)
    header = f"{'arm':<15} {'precision':<28} {'mean ms':>8} {'p50':>8} {'p95':>8} "
    print(header + f"{'warm-up s':>9} {'vs ' + base.name:>16}")
    for arm in arms:
        ms = 1e3 * np.asarray(arm.times)
        print(
            f"{arm.name:<15} {arm.describe():<28} {ms.mean():8.1f} {np.percentile(ms, 50):8.1f} "
            f"{np.percentile(ms, 95):8.1f} {sum(arm.warmup):9.1f} "
            f"{np.mean(arm.times) / base_mean:15.2f}x"
        )
    for arm in arms:
        for note in arm.notes:
            print(f"note {arm.name}: {note}")
    print(f"dynamo recompiles during the bench: {recompile_count() - start_recompiles}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
