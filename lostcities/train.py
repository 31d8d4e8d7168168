"""Train a Deep CFR agent: ``python -m lostcities.train [group=choice ...] [key=value ...]``.

Hydra composes ``conf/train.yaml`` against the schemas of
:mod:`lostcities.config`; this module only wires objects from their
sub-configs and runs the iteration loop (traverse + train, evaluate,
checkpoint, log).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError

from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.cfr.workers import Executor, WorkerError, WorkerSpec, make_executor
from lostcities.checkpoint import (
    CheckpointError,
    checkpoint_path,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from lostcities.config import TrainConfig, register_configs
from lostcities.experiments.launch import fail_sweep, run_isolated_job
from lostcities.games import GameSpec, make_game
from lostcities.perf.determinism import apply_determinism
from lostcities.progress import ProgressLine
from lostcities.tracking import Tracker, flatten

register_configs()


def typed_config(dict_cfg: DictConfig) -> TrainConfig:
    """The composed config as a TrainConfig. A key no schema knows fails here, including
    one appended with ``+`` (Hydra adds those to the struct config unchecked)."""
    try:
        checked = OmegaConf.merge(
            OmegaConf.structured(TrainConfig), OmegaConf.to_container(dict_cfg, resolve=True)
        )
    except ConfigKeyError as e:
        raise ValueError(f"unknown config key {e.full_key!r}: no schema in config.py has it") from e
    return OmegaConf.to_object(checked)


def build_executor(cfg: TrainConfig) -> Executor | None:
    """The traversal worker pool ``traversal.executor`` asks for (None: inline)."""
    spec = WorkerSpec(cfg.game, cfg.network, cfg.traversal, cfg.determinism, cfg.run.seed)
    return make_executor(spec)


def build_trainer(
    cfg: TrainConfig, game: GameSpec, executor: Executor | None = None
) -> DeepCFRTrainer:
    return DeepCFRTrainer(
        game,
        cfg.network,
        cfg.traversal,
        cfg.memory,
        cfg.optim,
        seed=cfg.run.seed,
        device=cfg.run.device,
        utility_scale=cfg.game.utility_scale,
        win_loss=cfg.game.utility == "win_loss",
        batch_invariant=cfg.determinism.batch_invariant_inference,
        executor=executor,
        amp=cfg.amp,
        compile=cfg.compile,
    )


def build_evaluator(cfg: TrainConfig, game: GameSpec):
    from lostcities.eval.evaluate import LostCitiesEvaluator, SmallGameEvaluator

    if game.name == "lost_cities":
        return LostCitiesEvaluator(cfg.eval, cfg.game.max_turns)
    if game.name == "kuhn":
        from lostcities.games.kuhn import KuhnGame

        return SmallGameEvaluator(KuhnGame.new())
    from lostcities.games.leduc import LeducGame

    return SmallGameEvaluator(LeducGame.new())


def checkpoint_identity(game: GameSpec, cfg: TrainConfig) -> dict[str, object]:
    """What a checkpoint must match to be resumed by this configuration."""
    return {
        "game": game.name,
        "encoding_size": game.encoding_size,
        "num_actions": game.num_actions,
        "network": asdict(cfg.network),
        "seed": cfg.run.seed,
    }


def write_checkpoint(
    trainer: DeepCFRTrainer, cfg: TrainConfig, game: GameSpec, run_dir: Path, resolved: dict
) -> Path:
    path = checkpoint_path(run_dir / cfg.checkpoint.dir, trainer.iteration)
    save_checkpoint(
        path,
        {**checkpoint_identity(game, cfg), "trainer": trainer.state_dict(), "config": resolved},
    )
    return path


def train(
    cfg: TrainConfig, run_dir: Path, resolved: dict, overrides: list[str], choices: dict[str, str]
) -> dict[str, float]:
    """The whole run; returns the last metrics (a multirun sweep can optimise them)."""
    apply_determinism(cfg.determinism)  # before any network or worker exists
    if cfg.run.threads > 0:
        torch.set_num_threads(cfg.run.threads)
    game = make_game(cfg.game)
    evaluator = build_evaluator(cfg, game)
    executor = build_executor(cfg)
    try:
        return _train(cfg, game, evaluator, executor, run_dir, resolved, overrides, choices)
    finally:  # normal end, error or Ctrl-C: no worker outlives the run
        if executor is not None:
            executor.close()


def _train(
    cfg: TrainConfig,
    game: GameSpec,
    evaluator,
    executor: Executor | None,
    run_dir: Path,
    resolved: dict,
    overrides: list[str],
    choices: dict[str, str],
) -> dict[str, float]:
    trainer = build_trainer(cfg, game, executor)
    if cfg.run.resume:
        state = load_checkpoint(
            cfg.run.resume, expect=checkpoint_identity(game, cfg), required=("trainer",)
        )
        trainer.load_state_dict(state["trainer"])
    progress = ProgressLine(cfg.run.progress, cfg.run.iterations)
    tags = {
        "game": game.name,
        "network": cfg.network.name,
        **{f"choice/{k}": str(v) for k, v in choices.items()},
        "determinism": cfg.determinism.name,
        "determinism/torch_deterministic": str(cfg.determinism.torch_deterministic),
        "determinism/batch_invariant_inference": str(cfg.determinism.batch_invariant_inference),
        "traversal/executor": cfg.traversal.executor,
        "traversal/num_workers": str(getattr(executor, "num_workers", 0)),
        "amp": cfg.amp.name,
        "compile": "none" if cfg.compile is None else cfg.compile.name,
    }
    if cfg.experiment is not None:  # an arm of a sweep (lostcities/experiments/)
        tags["experiment"] = cfg.experiment.name
        tags["experiment/arm"] = str(cfg.experiment.arm)
    texts = {
        "config.yaml": OmegaConf.to_yaml(resolved),
        "overrides.yaml": OmegaConf.to_yaml(list(overrides)),
    }
    last: dict[str, float] = {}
    with Tracker(cfg.tracking, run_dir, flatten(resolved), tags, texts) as tracker:
        while trainer.iteration < cfg.run.iterations:
            start = time.perf_counter()
            metrics = trainer.run_iteration()
            t = trainer.iteration
            final = t == cfg.run.iterations
            if t % cfg.eval.every == 0 or final:
                phase = time.perf_counter()
                metrics["loss/strategy"] = trainer.train_policy()  # no-op if already current
                metrics["time/strategy_train_seconds"] = (
                    metrics.get("time/strategy_train_seconds", 0.0) + time.perf_counter() - phase
                )
                phase = time.perf_counter()
                metrics.update(evaluator.evaluate(trainer))
                metrics["time/eval_seconds"] = time.perf_counter() - phase
            if (cfg.checkpoint.every and t % cfg.checkpoint.every == 0) or final:
                phase = time.perf_counter()
                trainer.train_policy()  # a checkpoint's policy net is always current
                path = write_checkpoint(trainer, cfg, game, run_dir, resolved)
                metrics["time/checkpoint_seconds"] = time.perf_counter() - phase
                if final and cfg.checkpoint.log_artifacts:
                    tracker.log_artifact(path, "checkpoints")
            metrics["time/iteration_seconds"] = time.perf_counter() - start
            tracker.log_metrics(metrics, step=t)
            progress.update(t, _progress_fields(metrics))
            last = metrics
        progress.close()
    return last


def _progress_fields(m: dict[str, float]) -> dict[str, float | str]:
    fields: dict[str, float | str] = {
        "trav_s": m["time/traversal_seconds"],
        "train_s": m["time/advantage_train_seconds"],
        "nodes/s": m["traversal/nodes_per_second"],
        "loss": m["loss/advantage"],
    }
    if "eval/exploitability" in m:
        fields["expl"] = m["eval/exploitability"]
        fields["expl(sigma)"] = m["eval/current_exploitability"]
        if "eval/sdcfr_exploitability" in m:
            fields["expl(sdcfr)"] = m["eval/sdcfr_exploitability"]
    for key, value in m.items():
        if key.endswith("/win_rate0"):
            fields["win " + key.split("/")[1]] = value
    return fields


@hydra.main(version_base="1.3", config_path="pkg://lostcities.conf", config_name="train")
def main(dict_cfg: DictConfig) -> float | None:
    try:
        cfg = typed_config(dict_cfg)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    hydra_cfg = HydraConfig.get()
    if cfg.experiment and cfg.experiment.isolate and hydra_cfg.mode == RunMode.MULTIRUN:
        # an experiment's job: train in a fresh process (lostcities/experiments/launch.py)
        code = run_isolated_job(
            cfg.experiment,
            list(hydra_cfg.overrides.task),
            Path(hydra_cfg.runtime.output_dir),
            Path(hydra_cfg.sweep.dir),
            cfg.run.seed,
        )
        if code != 0:
            fail_sweep(cfg.tracking, Path(hydra_cfg.sweep.dir))
            print(f"error: experiment job {hydra_cfg.job.num} exited with {code}", file=sys.stderr)
            sys.exit(code)
        return None
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    try:
        metrics = train(
            cfg,
            Path(hydra_cfg.runtime.output_dir),
            resolved,
            list(hydra_cfg.overrides.task),
            dict(hydra_cfg.runtime.choices),
        )
    except (CheckpointError, ValueError, WorkerError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # workers are already stopped (train's finally)
        last = latest_checkpoint(Path(hydra_cfg.runtime.output_dir) / cfg.checkpoint.dir)
        hint = f"last checkpoint {last} (resume: run.resume={last})" if last else "no checkpoint"
        print(f"interrupted; {hint}", file=sys.stderr)
        sys.exit(130)
    return metrics.get("eval/exploitability")


if __name__ == "__main__":
    main()
