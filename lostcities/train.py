"""Train a Deep CFR agent: ``python -m lostcities.train [group=choice ...] [key=value ...]``.

The entry point: Hydra composes ``conf/train.yaml`` against the schemas of
:mod:`lostcities.config`, the composed config is checked (lostcities/config_checks.py),
:func:`train` builds the run's objects from their sub-configs, and
:mod:`lostcities.run` runs its life cycle (resume, tracking, iterations, checkpoints,
interrupts). A job of an experiment sweep runs in a fresh process instead
(lostcities/experiments/launch.py). Exit codes: 0 done, 1 a file could not be written,
2 bad input, 130 / 143 interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from lostcities.cfr.executors import Executor, make_executor
from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.cfr.traversal import TraversalSpec
from lostcities.config import TrainConfig, register_configs
from lostcities.config_checks import typed_config
from lostcities.experiments.launch import run_sweep_job
from lostcities.games import GameSpec, make_game
from lostcities.perf.determinism import apply_determinism
from lostcities.run import TrainingRun, run_from_command_line

register_configs()


def traversal_spec(cfg: TrainConfig) -> TraversalSpec:
    """What the trainer and every executor take of the run's config, whole."""
    return TraversalSpec(
        cfg.game, cfg.network, cfg.traversal, cfg.run.seed, cfg.determinism, cfg.value
    )


def build_executor(cfg: TrainConfig) -> Executor:
    """Where the traversals run: the ``executor`` group's choice."""
    return make_executor(traversal_spec(cfg), cfg.executor)


def build_trainer(
    cfg: TrainConfig, game: GameSpec, executor: Executor | None = None
) -> DeepCFRTrainer:
    return DeepCFRTrainer(
        game,
        traversal_spec(cfg),
        cfg.memory,
        cfg.optim,
        device=cfg.run.device,
        executor=executor,
        amp=cfg.amp,
        compile=cfg.compile,
        fit_threads=cfg.run.fit_threads,
    )


def build_evaluator(cfg: TrainConfig, game: GameSpec):
    """Exact exploitability on Kuhn and Leduc, matches against the bots on Lost Cities."""
    from lostcities.eval.evaluators import LostCitiesEvaluator, SmallGameEvaluator

    if game.exact_root is not None:  # the game's name was dispatched once, by make_game
        return SmallGameEvaluator(game.exact_root())
    return LostCitiesEvaluator(cfg.eval, cfg.game.max_turns)


def train(
    cfg: TrainConfig, run_dir: Path, resolved: dict, overrides: list[str]
) -> dict[str, float]:
    """The whole run; returns the last metrics (a multirun sweep can optimise them).
    ``resolved``: the composed config as a plain dict (saved in checkpoints and logged);
    ``overrides``: the command line's, for the run name and the resume line."""
    apply_determinism(cfg.determinism)  # before any network or worker exists
    if cfg.run.threads > 0:
        torch.set_num_threads(cfg.run.threads)
    game = make_game(cfg.game)
    evaluator = build_evaluator(cfg, game)
    executor = build_executor(cfg)
    try:
        run = TrainingRun(
            cfg,
            game,
            lambda: build_trainer(cfg, game, executor),
            evaluator,
            executor,
            run_dir,
            resolved,
            overrides,
        )
        return run.run()
    finally:  # normal end, error or Ctrl-C: no worker outlives the run
        executor.close()


@hydra.main(version_base="1.3", config_path="pkg://lostcities.conf", config_name="train")
def main(dict_cfg: DictConfig) -> float | None:
    try:
        cfg = typed_config(dict_cfg)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    hydra_cfg = HydraConfig.get()
    if cfg.experiment and cfg.experiment.isolate and hydra_cfg.mode == RunMode.MULTIRUN:
        code = run_sweep_job(cfg.experiment, hydra_cfg, cfg.run.seed, cfg.tracking)
        if code != 0:
            sys.exit(code)
        return None
    run_dir = Path(hydra_cfg.runtime.output_dir)
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    overrides = list(hydra_cfg.overrides.task)
    code, metrics = run_from_command_line(
        cfg, run_dir, overrides, lambda: train(cfg, run_dir, resolved, overrides)
    )
    if code != 0:
        sys.exit(code)
    return metrics.get("eval/exploitability")


if __name__ == "__main__":
    main()
