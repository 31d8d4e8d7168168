"""The life cycle of one training run: resume, track, iterate, checkpoint, stop.

:class:`TrainingRun` runs the iterations of a run whose objects lostcities/train.py built;
:func:`run_from_command_line` wraps a run for ``python -m lostcities.train``, turning
SIGTERM into a clean stop and every way a run can end early into one line on stderr and
an exit code:

- a bad value or checkpoint, or a traversal worker that keeps failing: ``error: ...``, 2;
- a file the run could not write (a full disk): ``error: could not write FILE (why);
  last good checkpoint CKPT (resume: COMMAND)``, 1;
- Ctrl-C or SIGTERM: ``interrupted (SIGINT) at iteration N; last checkpoint CKPT
  (resume: COMMAND)``, 130 or 143.

Per iteration: traverse and train (the trainer), evaluate every ``eval.every``
iterations and at the end, then write the checkpoint (every ``checkpoint.every``
iterations and at the end) and log the iteration's metrics. A checkpoint and its
iteration's metrics land together: Ctrl-C and SIGTERM wait until both are written
(lostcities/interrupts.py), and a checkpoint that could not be written leaves its
iteration's metrics unlogged, so resuming from the last good checkpoint logs that
iteration once. The agent file (``agent.pt``: what playing needs) is brought up to date
after each checkpoint.
"""

from __future__ import annotations

import errno
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path

import torch
from omegaconf import OmegaConf

from lostcities.cfr.executors import Executor, WorkerError
from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.checkpoint import (
    CheckpointError,
    CheckpointWriteError,
    checkpoint_path,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from lostcities.config import NetworkConfig, TrainConfig
from lostcities.games import GameSpec
from lostcities.interrupts import deferred_interrupts
from lostcities.progress import ProgressLine
from lostcities.provenance import provenance_tags
from lostcities.tracking import (
    METRICS_FILE,
    Tracker,
    default_run_name,
    flatten,
    resume_metrics_file,
)

AGENT_FILE = "agent.pt"
NETWORK_DEFAULTS = {f.name: f.default for f in fields(NetworkConfig)}
STUDENT_FILE = "student.pt"  # the teacher stage's accepted student (lostcities/teacher/)


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal: SIGINT (Ctrl-C) or SIGTERM, which
    :func:`run_from_command_line` turns into this so that the run unwinds like Ctrl-C
    (MLflow run KILLED, workers stopped). ``iteration``: the iterations done when it
    stopped (None: before the loop)."""

    def __init__(self, signal_name: str = "SIGINT", iteration: int | None = None) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.iteration = iteration


# --- what the run records about itself --------------------------------------------------


def run_tags(cfg: TrainConfig, executor: Executor) -> dict[str, str]:
    """The MLflow tags of a run: the group choices, where and how it runs, provenance, and
    its place in a sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    tags = {
        "game": cfg.game.name,
        "network": cfg.network.name,
        "determinism": cfg.determinism.name,
        "determinism/torch_deterministic": str(cfg.determinism.torch_deterministic),
        "determinism/batch_invariant_inference": str(cfg.determinism.batch_invariant_inference),
        "executor": cfg.executor.name,
        "executor/num_workers": str(executor.num_workers),
        **(
            {"executor/ray_address": getattr(executor, "address", "")}
            if cfg.executor.name == "ray"
            else {}
        ),
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
    return tags


def checkpoint_identity(game: GameSpec, cfg: TrainConfig) -> dict[str, object]:
    """What a checkpoint must match to be resumed by this configuration."""
    return {
        "game": game.name,
        "encoding_size": game.encoding_size,
        "num_actions": game.num_actions,
        "network": asdict(cfg.network),
        "seed": cfg.run.seed,
    }


# --- the run ----------------------------------------------------------------------------------


class TrainingRun:
    """One run's loop over iterations (see the module docstring), from a fresh start or a
    checkpoint (``run.resume``)."""

    def __init__(
        self,
        cfg: TrainConfig,
        game: GameSpec,
        make_trainer: Callable[[], DeepCFRTrainer],
        evaluator,
        executor: Executor,
        run_dir: Path,
        resolved: dict,
        overrides: list[str],
    ) -> None:
        """``make_trainer()``: a fresh trainer (made only once the run has work to do)."""
        self.cfg = cfg
        self.game = game
        self.make_trainer = make_trainer
        self.evaluator = evaluator
        self.executor = executor
        self.run_dir = Path(run_dir)
        self.resolved = resolved
        self.overrides = overrides
        self.mlflow_run_id: str | None = None  # the MLflow run a resume of a checkpoint continues

    def run(self) -> dict[str, float]:
        cfg = self.cfg
        state = self._resumed_state()
        finished = state is not None and int(state["trainer"]["iteration"]) >= cfg.run.iterations
        if finished and cfg.teacher is None:
            done = int(state["trainer"]["iteration"])
            # A finished run: a tracker here would only add an empty MLflow run.
            print(
                f"nothing to do: checkpoint {cfg.run.resume} is at iteration {done} and "
                f"run.iterations={cfg.run.iterations}; to continue, set run.iterations above "
                f"{done} (e.g. run.iterations={max(2 * done, done + 1)})",
                file=sys.stderr,
            )
            return {}
        trainer = self.make_trainer()
        resume_run_id = None
        if state is not None:
            try:
                trainer.load_state_dict(state["trainer"])
            except ValueError as e:  # the file's content does not fit this trainer
                raise CheckpointError(f"{cfg.run.resume}: {e}") from None
            # None when that run had no MLflow run
            found = state.get("mlflow_run_id")
            resume_run_id = found if isinstance(found, str) else None
            resume_metrics_file(
                self.run_dir, Path(cfg.run.resume).parent.parent / METRICS_FILE, trainer.iteration
            )
        progress = ProgressLine(cfg.run.progress, cfg.run.iterations, done=trainer.iteration)
        # the trainer reports its phases (traversal, training) to the display; None: no calls
        trainer.progress = progress.phase if progress.enabled else None
        progress.header(run_header(cfg, trainer, self.executor, self.run_dir))
        tracker = self._tracker(trainer, resume_run_id, resumed=state is not None)
        last: dict[str, float] = {}
        try:
            with tracker:
                # A resume with tracking off keeps the run id, so that a later resume with
                # tracking on still continues that run.
                self.mlflow_run_id = tracker.run_id or resume_run_id
                charts = tracker.where_to_see()
                if charts:
                    progress.header(f"MLflow charts: {charts}")
                while trainer.iteration < cfg.run.iterations:
                    last = self._iteration(trainer, tracker, progress)
                if cfg.teacher is not None:  # a stage after the iterations
                    last = {**last, **self._teach(trainer, tracker, progress)}
            if charts and tracker.mlflow_active:  # the run is complete in MLflow now
                progress.header(f"MLflow charts: {charts}")
        except KeyboardInterrupt as e:  # the tracker has ended the run KILLED
            name = e.signal_name if isinstance(e, Interrupted) else "SIGINT"
            raise Interrupted(name, trainer.iteration) from None  # the line names the iteration
        finally:  # a bar of an interrupted phase must not swallow the error's first line
            progress.close()
        return last

    def _teach(
        self, trainer: DeepCFRTrainer, tracker: Tracker, progress: ProgressLine
    ) -> dict[str, float]:
        """Search as the teacher of the run's policy net (lostcities/teacher/stage.py)."""
        from lostcities.teacher.stage import TeacherStage

        cfg = self.cfg
        trainer.train_policy()  # a no-op if already current
        stage = TeacherStage(
            cfg.teacher,
            self.game,
            trainer.spec,
            self.executor,
            trainer.step,
            trainer.device,
            self.run_dir,
            lambda weights, round_: self._write_student(trainer, weights, round_),
            # round r after the run's T iterations: step T + r, one row per step
            lambda metrics, round_: tracker.log_metrics(metrics, step=trainer.iteration + round_),
            progress.header if progress.enabled else lambda line: print(line, flush=True),
            cfg.optim.augment_symmetries,
            progress.phase if progress.enabled else None,
        )
        accepted = None  # the stage continues after its finished rounds (teacher/rounds.json)
        if (self.run_dir / STUDENT_FILE).exists():
            accepted = load_checkpoint(self.run_dir / STUDENT_FILE)["agent"]["policy_net"]
        return stage.run(trainer.step.weights(trainer.policy_net), accepted)

    def _write_student(self, trainer: DeepCFRTrainer, weights: dict, round_: int) -> Path:
        """``student.pt``: the run's agent file with the student of ``round_`` as its
        policy net (what evaluate, arena and play load as ``policy``)."""
        agent = {**trainer.agent_state(), "policy_net": weights}
        payload = {
            **checkpoint_identity(self.game, self.cfg),
            "agent": agent,
            "config": self.resolved,
            "teacher_round": round_,
        }
        path = self.run_dir / STUDENT_FILE
        save_checkpoint(path, payload)
        return path

    def _resumed_state(self) -> dict[str, object] | None:
        if not self.cfg.run.resume:
            return None
        expect = checkpoint_identity(self.game, self.cfg)
        network = expect.pop("network")
        state = load_checkpoint(self.cfg.run.resume, expect=expect, required=("trainer", "network"))
        # a checkpoint written before a network option existed was written with its default
        saved = {**NETWORK_DEFAULTS, **state["network"]}
        if saved != network:
            raise CheckpointError(
                f"{self.cfg.run.resume}: checkpoint is for network {saved!r}, expected {network!r}"
            )
        return state

    def _tracker(self, trainer: DeepCFRTrainer, resume_run_id: str | None, resumed: bool):
        cfg = self.cfg
        texts = {
            "config.yaml": OmegaConf.to_yaml(self.resolved),
            "overrides.yaml": OmegaConf.to_yaml(list(self.overrides)),
        }
        base = f"{self.game.name}-{cfg.network.name}-s{cfg.run.seed}"
        return Tracker(
            cfg.tracking,
            self.run_dir,
            flatten(self.resolved),
            run_tags(cfg, self.executor),
            texts,
            run_name=default_run_name(base, self.overrides),
            resume_run_id=resume_run_id,
            resume_step=trainer.iteration if resumed else None,
        )

    def _iteration(
        self, trainer: DeepCFRTrainer, tracker: Tracker, progress: ProgressLine
    ) -> dict[str, float]:
        """One iteration: traverse and train, evaluate when due, then checkpoint and log."""
        cfg = self.cfg
        start = time.perf_counter()
        metrics = trainer.run_iteration()
        t = trainer.iteration
        final = t == cfg.run.iterations
        if t % cfg.eval.every == 0 or final:
            self._evaluate(trainer, metrics, progress)
        checkpoint_due = bool(cfg.checkpoint.every and t % cfg.checkpoint.every == 0) or final
        with deferred_interrupts():  # the checkpoint and its iteration's metrics land together
            path = None
            if checkpoint_due:
                phase = time.perf_counter()
                trainer.train_policy()  # a checkpoint's policy net is always current
                path = self._write_checkpoint(trainer)
                metrics["time/checkpoint_seconds"] = time.perf_counter() - phase
            metrics["time/iteration_seconds"] = time.perf_counter() - start
            tracker.log_metrics(metrics, step=t)
            if path is not None:
                self._write_agent_file(trainer, path)
                if final:
                    tracker.log_artifact(self.run_dir / AGENT_FILE, "agent")
                if final and cfg.checkpoint.log_artifacts:
                    tracker.log_artifact(path, "checkpoints")
        progress.update(t, _progress_fields(metrics))
        return metrics

    def _evaluate(
        self, trainer: DeepCFRTrainer, metrics: dict[str, float], progress: ProgressLine
    ) -> None:
        """Bring the policy net up to date and evaluate; adds to ``metrics``."""
        phase = time.perf_counter()
        metrics["loss/strategy"] = trainer.train_policy()  # a no-op if already current
        metrics["time/strategy_train_seconds"] = (
            metrics.get("time/strategy_train_seconds", 0.0) + time.perf_counter() - phase
        )
        phase = time.perf_counter()
        progress.phase("eval", 0, 1)  # the evaluators report no steps of their own
        metrics.update(self.evaluator.evaluate(trainer.agent_view()))
        progress.phase("eval", 1, 1)
        metrics["time/eval_seconds"] = time.perf_counter() - phase

    def _write_checkpoint(self, trainer: DeepCFRTrainer) -> Path:
        """The resumable checkpoint of this iteration (atomic: a failed write leaves the
        earlier ones as they were)."""
        cfg = self.cfg
        path = checkpoint_path(self.run_dir / cfg.checkpoint.dir, trainer.iteration)
        payload = {
            **checkpoint_identity(self.game, cfg),
            "trainer": trainer.state_dict(),
            "config": self.resolved,
            "mlflow_run_id": self.mlflow_run_id,
        }
        save_checkpoint(path, payload)
        return path

    def _write_agent_file(self, trainer: DeepCFRTrainer, checkpoint: Path) -> None:
        """``agent.pt`` brought up to date beside ``checkpoint`` (what playing needs: see
        DeepCFRTrainer.agent_state); then only the newest ``checkpoint.keep`` checkpoints
        are kept (never none)."""
        cfg = self.cfg
        identity = checkpoint_identity(self.game, cfg)
        agent = {**identity, "agent": trainer.agent_state(), "config": self.resolved}
        save_checkpoint(self.run_dir / AGENT_FILE, agent)
        prune_checkpoints(self.run_dir / cfg.checkpoint.dir, cfg.checkpoint.keep)


def run_header(cfg: TrainConfig, trainer: DeepCFRTrainer, executor: Executor, run_dir: Path) -> str:
    """``lost_cities | network compact (256x2) | seed 0 | iterations 0/5 | torch threads 1
    | traversal inline | device cpu | outputs/...``: the settings a slow run is judged by."""
    net = cfg.network
    return (
        f"{cfg.game.name} | network {net.name} ({net.hidden}x{net.layers}) | seed "
        f"{cfg.run.seed} | iterations {trainer.iteration}/{cfg.run.iterations} | torch threads "
        f"{torch.get_num_threads()} | traversal {executor.description} | device "
        f"{cfg.run.device} | {run_dir}"
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
    if "eval/br/score_diff" in m:
        fields["br margin"] = m["eval/br/score_diff"]
    if "eval/h2h/win_rate" in m:
        fields["h2h win"] = m["eval/h2h/win_rate"]
    return fields


# --- the command line's view: signals, one-line endings, exit codes ---------------------------


def resume_hint(cfg: TrainConfig, run_dir: Path, overrides: list[str], what: str) -> str:
    """``<what> CKPT (resume: python -m lostcities.train ... run.resume=CKPT)``, or
    ``no checkpoint written`` when the run has none (nor resumed one)."""
    last = latest_checkpoint(run_dir / cfg.checkpoint.dir) or cfg.run.resume
    if not last:
        return "no checkpoint written"
    kept = [o for o in overrides if o.lstrip("+").partition("=")[0] != "run.resume"]
    command = shlex.join(["python", "-m", "lostcities.train", *kept, f"run.resume={last}"])
    return f"{what} {last} (resume: {command})"


def run_from_command_line(
    cfg: TrainConfig, run_dir: Path, overrides: list[str], run: Callable[[], dict[str, float]]
) -> tuple[int, dict[str, float]]:
    """``run()`` (a whole training run: lostcities/train.py ``train``) as a command: returns
    (exit code, last metrics); every early end is one line on stderr (module docstring).
    SIGTERM (kill, a scheduler's time limit) stops the run as Ctrl-C does."""
    stopping = []

    def on_sigterm(signum: int, frame: object) -> None:
        # Only the first one raises: a second must not cut short the unwinding (the
        # tracker ending the MLflow run, the workers being stopped).
        if not stopping:
            stopping.append(signum)
            raise Interrupted("SIGTERM")

    # Python handlers are per process and not inherited by the spawned workers.
    handle = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if handle else None
    try:
        return 0, run()
    except (CheckpointError, ValueError, WorkerError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2, {}
    except OSError as e:
        if not _is_write_failure(e):
            raise
        print(f"error: {_write_failure(e)}; {_last_good(cfg, run_dir, overrides)}", file=sys.stderr)
        return 1, {}
    except KeyboardInterrupt as e:  # workers are already stopped (train's finally)
        name = e.signal_name if isinstance(e, Interrupted) else "SIGINT"
        at = ""
        if isinstance(e, Interrupted) and e.iteration is not None:
            at = f" at iteration {e.iteration}"
        hint = resume_hint(cfg, run_dir, overrides, "last checkpoint")
        print(f"interrupted ({name}){at}; {hint}", file=sys.stderr)
        return 128 + signal.Signals[name].value, {}  # 130 for SIGINT, 143 for SIGTERM
    finally:
        if handle:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


# What a file of the run that cannot be written fails with: a full disk, a quota, a file
# size limit, a read-only or failing device.
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def _is_write_failure(e: OSError) -> bool:
    return isinstance(e, CheckpointWriteError) or e.errno in _WRITE_ERRNOS


def _write_failure(e: OSError) -> str:
    if isinstance(e, CheckpointWriteError):
        return str(e)
    where = f" {e.filename}" if e.filename else ""
    return f"could not write{where} ({e.strerror or e})"


def _last_good(cfg: TrainConfig, run_dir: Path, overrides: list[str]) -> str:
    hint = resume_hint(cfg, run_dir, overrides, "last good checkpoint")
    return hint if hint != "no checkpoint written" else "no checkpoint was written"
