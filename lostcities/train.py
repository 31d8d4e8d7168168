"""Train a Deep CFR agent: ``python -m lostcities.train [group=choice ...] [key=value ...]``.

Hydra composes ``conf/train.yaml`` against the schemas of
:mod:`lostcities.config`; this module only wires objects from their
sub-configs and runs the iteration loop (traverse + train, evaluate,
checkpoint, log).
"""

from __future__ import annotations

import shlex
import signal
import sys
import threading
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
    prune_checkpoints,
    save_checkpoint,
)
from lostcities.config import TrainConfig, register_configs
from lostcities.config_checks import check_config
from lostcities.experiments.launch import run_isolated_job, stop_sweep
from lostcities.games import GameSpec, make_game
from lostcities.interrupts import deferred_interrupts
from lostcities.perf.determinism import apply_determinism
from lostcities.progress import ProgressLine
from lostcities.tracking import Tracker, default_run_name, flatten, provenance_tags

register_configs()


def typed_config(dict_cfg: DictConfig) -> TrainConfig:
    """The composed config as a TrainConfig. A key no schema knows fails here, including
    one appended with ``+`` (Hydra adds those to the struct config unchecked), and so does
    a bad value (``ValueError``, one line: lostcities/config_checks.py)."""
    try:
        checked = OmegaConf.merge(
            OmegaConf.structured(TrainConfig), OmegaConf.to_container(dict_cfg, resolve=True)
        )
    except ConfigKeyError as e:
        raise ValueError(f"unknown config key {e.full_key!r}: no schema in config.py has it") from e
    cfg = OmegaConf.to_object(checked)
    check_config(cfg)
    return cfg


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
    trainer: DeepCFRTrainer,
    cfg: TrainConfig,
    game: GameSpec,
    run_dir: Path,
    resolved: dict,
    mlflow_run_id: str | None = None,
) -> Path:
    """The resumable checkpoint of this iteration, and the run's agent file (``agent.pt`` in
    the run directory: what playing needs, see DeepCFRTrainer.agent_state) brought up to
    date beside it. Returns the checkpoint's path. ``mlflow_run_id``: the MLflow run a
    resume of this checkpoint continues. Only the newest ``checkpoint.keep`` checkpoints
    are kept."""
    path = checkpoint_path(run_dir / cfg.checkpoint.dir, trainer.iteration)
    identity = checkpoint_identity(game, cfg)
    trainer_state = {
        **identity,
        "trainer": trainer.state_dict(),
        "config": resolved,
        "mlflow_run_id": mlflow_run_id,
    }
    agent_state = {**identity, "agent": trainer.agent_state(), "config": resolved}
    with deferred_interrupts():  # Ctrl-C waits: the checkpoint and agent.pt stay in step
        save_checkpoint(path, trainer_state)
        save_checkpoint(agent_path(run_dir), agent_state)
        prune_checkpoints(run_dir / cfg.checkpoint.dir, cfg.checkpoint.keep)  # never 0 left
    return path


def agent_path(run_dir: Path) -> Path:
    return run_dir / "agent.pt"


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


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal: SIGINT (Ctrl-C) or SIGTERM, which ``main`` turns into
    this so that the run unwinds like Ctrl-C (MLflow run KILLED, workers stopped).
    ``iteration``: the iterations done when it stopped (None: before the loop)."""

    def __init__(self, signal_name: str = "SIGINT", iteration: int | None = None) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.iteration = iteration


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
    state: dict[str, object] | None = None
    if cfg.run.resume:
        state = load_checkpoint(
            cfg.run.resume, expect=checkpoint_identity(game, cfg), required=("trainer",)
        )
        done = int(state["trainer"]["iteration"])  # type: ignore[index]
        if done >= cfg.run.iterations:
            # A finished run: a tracker here would only add an empty MLflow run.
            print(
                f"nothing to do: checkpoint {cfg.run.resume} is at iteration {done} and "
                f"run.iterations={cfg.run.iterations}; to continue, set run.iterations above "
                f"{done} (e.g. run.iterations={max(2 * done, done + 1)})",
                file=sys.stderr,
            )
            return {}
    trainer = build_trainer(cfg, game, executor)
    resume_run_id = None
    if state is not None:
        trainer.load_state_dict(state["trainer"])
        # absent from checkpoints of older versions; None when that run had no MLflow run
        found = state.get("mlflow_run_id")
        resume_run_id = found if isinstance(found, str) else None
    progress = ProgressLine(cfg.run.progress, cfg.run.iterations, done=trainer.iteration)
    # the trainer reports its phases (traversal, training) to the display; None: no calls
    trainer.progress = progress.phase if progress.enabled else None
    progress.header(run_header(cfg, trainer, executor, run_dir))
    tags = {
        "game": game.name,
        "network": cfg.network.name,
        "determinism": cfg.determinism.name,
        "determinism/torch_deterministic": str(cfg.determinism.torch_deterministic),
        "determinism/batch_invariant_inference": str(cfg.determinism.batch_invariant_inference),
        "traversal/executor": cfg.traversal.executor,
        "traversal/num_workers": str(getattr(executor, "num_workers", 0)),
        "amp": cfg.amp.name,
        "compile": "none" if cfg.compile is None else cfg.compile.name,
        **provenance_tags(),
        "version/torch": torch.__version__,
        "run/threads": str(torch.get_num_threads()),  # what this process really uses
        "run/device": cfg.run.device,
    }
    if cfg.run.resume:
        tags["run/resumed_from"] = str(cfg.run.resume)
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        hydra_cfg = HydraConfig.get()
        tags["sweep/id"] = str(Path(hydra_cfg.runtime.cwd) / hydra_cfg.sweep.dir)
        tags["sweep/job"] = str(hydra_cfg.job.num)
    if cfg.experiment is not None:  # an arm of a sweep (lostcities/experiments/)
        tags["experiment"] = cfg.experiment.name
        tags["experiment/arm"] = str(cfg.experiment.arm)
    texts = {
        "config.yaml": OmegaConf.to_yaml(resolved),
        "overrides.yaml": OmegaConf.to_yaml(list(overrides)),
    }
    tracker = Tracker(
        cfg.tracking,
        run_dir,
        flatten(resolved),
        tags,
        texts,
        run_name=default_run_name(f"{game.name}-{cfg.network.name}-s{cfg.run.seed}", overrides),
        resume_run_id=resume_run_id,
        resume_step=trainer.iteration if state is not None else None,
    )
    last: dict[str, float] = {}
    try:
        with tracker:
            # A resume with tracking off keeps the run id, so that a later resume with
            # tracking on still continues that run.
            mlflow_run_id = tracker.run_id or resume_run_id
            while trainer.iteration < cfg.run.iterations:
                start = time.perf_counter()
                metrics = trainer.run_iteration()
                t = trainer.iteration
                final = t == cfg.run.iterations
                if t % cfg.eval.every == 0 or final:
                    phase = time.perf_counter()
                    metrics["loss/strategy"] = trainer.train_policy()  # no-op if already current
                    metrics["time/strategy_train_seconds"] = (
                        metrics.get("time/strategy_train_seconds", 0.0)
                        + time.perf_counter()
                        - phase
                    )
                    phase = time.perf_counter()
                    progress.phase("eval", 0, 1)  # the evaluators report no steps of their own
                    metrics.update(evaluator.evaluate(trainer))
                    progress.phase("eval", 1, 1)
                    metrics["time/eval_seconds"] = time.perf_counter() - phase
                checkpoint_due = (cfg.checkpoint.every and t % cfg.checkpoint.every == 0) or final
                if checkpoint_due:
                    phase = time.perf_counter()
                    trainer.train_policy()  # a checkpoint's policy net is always current
                # A resume starts after the checkpoint's iteration, so a signal between its
                # write and this iteration's metrics would lose them for good (seen in CI:
                # SIGTERM there left the resumed run without step 1): they land together.
                with deferred_interrupts():
                    if checkpoint_due:
                        path = write_checkpoint(
                            trainer, cfg, game, run_dir, resolved, mlflow_run_id
                        )
                        metrics["time/checkpoint_seconds"] = time.perf_counter() - phase
                        if final:
                            tracker.log_artifact(agent_path(run_dir), "agent")
                        if final and cfg.checkpoint.log_artifacts:
                            tracker.log_artifact(path, "checkpoints")
                    metrics["time/iteration_seconds"] = time.perf_counter() - start
                    tracker.log_metrics(metrics, step=t)
                progress.update(t, _progress_fields(metrics))
                last = metrics
    except KeyboardInterrupt as e:  # the tracker has ended the run KILLED
        name = e.signal_name if isinstance(e, Interrupted) else "SIGINT"
        raise Interrupted(name, trainer.iteration) from None  # main's line names the iteration
    finally:  # a bar of an interrupted phase must not swallow the error's first line
        progress.close()
    return last


def run_header(cfg: TrainConfig, trainer: DeepCFRTrainer, executor, run_dir: Path) -> str:
    """``lost_cities | network compact (256x2) | seed 0 | iterations 0/5 | torch threads 1
    | traversal inline | device cpu | outputs/...``: the settings a slow run is judged by."""
    net = cfg.network
    workers = getattr(executor, "num_workers", 0)
    traversal = f"{workers} worker processes" if workers else "inline"
    return (
        f"{cfg.game.name} | network {net.name} ({net.hidden}x{net.layers}) | seed "
        f"{cfg.run.seed} | iterations {trainer.iteration}/{cfg.run.iterations} | torch threads "
        f"{torch.get_num_threads()} | traversal {traversal} | device {cfg.run.device} | {run_dir}"
    )


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
        job = run_isolated_job(
            cfg.experiment,
            list(hydra_cfg.overrides.task),
            Path(hydra_cfg.runtime.output_dir),
            Path(hydra_cfg.sweep.dir),
            cfg.run.seed,
        )
        if job.interrupt is not None:  # the job printed its own line: where to resume it
            stop_sweep(cfg.tracking, Path(hydra_cfg.sweep.dir), "KILLED")
            name = signal.Signals(job.interrupt).name
            num = hydra_cfg.job.num
            print(f"interrupted ({name}): sweep stopped in job {num}", file=sys.stderr)
            sys.exit(128 + job.interrupt)
        if job.code != 0:
            stop_sweep(cfg.tracking, Path(hydra_cfg.sweep.dir), "FAILED")
            print(
                f"error: experiment job {hydra_cfg.job.num} exited with {job.code}",
                file=sys.stderr,
            )
            sys.exit(job.code)
        return None
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    run_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = list(hydra_cfg.overrides.task)
    stopping = []

    def on_sigterm(signum: int, frame: object) -> None:
        # SIGTERM (kill, a scheduler's time limit, docker stop) ends the run like Ctrl-C.
        # Only the first one raises: a second must not cut short the unwinding (the
        # tracker ending the MLflow run, the workers being stopped).
        if not stopping:
            stopping.append(signum)
            raise Interrupted("SIGTERM")

    # Python handlers are per process and not inherited by the spawned workers.
    handle = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if handle else None
    try:
        metrics = train(cfg, run_dir, resolved, overrides, dict(hydra_cfg.runtime.choices))
    except (CheckpointError, ValueError, WorkerError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:  # workers are already stopped (train's finally)
        name = e.signal_name if isinstance(e, Interrupted) else "SIGINT"
        at = ""
        if isinstance(e, Interrupted) and e.iteration is not None:
            at = f" at iteration {e.iteration}"
        last = latest_checkpoint(run_dir / cfg.checkpoint.dir) or cfg.run.resume
        if last:
            kept = [o for o in overrides if o.lstrip("+").partition("=")[0] != "run.resume"]
            command = shlex.join(["python", "-m", "lostcities.train", *kept, f"run.resume={last}"])
            hint = f"last checkpoint {last} (resume: {command})"
        else:
            hint = "no checkpoint written"
        print(f"interrupted ({name}){at}; {hint}", file=sys.stderr)
        sys.exit(128 + signal.Signals[name].value)  # 130 for SIGINT, 143 for SIGTERM
    finally:
        if handle:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    return metrics.get("eval/exploitability")


if __name__ == "__main__":
    main()
