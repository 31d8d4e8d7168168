"""One sweep job = one fresh training process.

Hydra's basic launcher runs a sweep's jobs one after another in one process:
torch.compile's caches, torch's thread settings and any process-level state
would leak from one arm into the next. Rather than a launcher plugin (a
``hydra_plugins`` package, discovered by scanning, for what is one subprocess
call), an experiment job's task function starts ``python -m lostcities.train``
with the job's overrides plus its arm's, in the job's own output directory,
and waits for it. The basic launcher still walks the jobs in order, so timing
arms never overlap; arms and seeds interleave (the experiment files sweep the
seed first), so a busy neighbour hurts every arm alike.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from lostcities.config import ExperimentConfig, TrackingConfig
from lostcities.interrupts import forwarded_interrupts

SWEEP_FILE = "sweep.json"  # in the sweep directory: the parent MLflow run of the arms
ARM_FILE = "arm.json"  # in each job directory: which arm and seed it ran

# Overrides that describe the sweep machinery rather than a run.
_NOT_A_SETTING = ("+experiment=", "experiment.arm=", "run.seed=", "hydra.")


def arm_overrides(cfg: ExperimentConfig) -> list[str]:
    """The overrides of arm ``experiment.arm`` (an index of experiment.arms: validated by
    lostcities/config_checks.py)."""
    if not cfg.arms:
        return []
    return cfg.arms[cfg.arm].split()


def arm_label(cfg: ExperimentConfig, arm: int) -> str:
    return cfg.arms[arm] if cfg.arms else "run"


def settings(overrides: list[str]) -> list[str]:
    """The overrides that change what runs (not the sweep's own bookkeeping)."""
    return [o for o in overrides if not o.startswith(_NOT_A_SETTING)]


class IsolatedJob(NamedTuple):
    code: int
    """The job's exit code (0: success; 130 / 143 after SIGINT / SIGTERM)."""
    interrupt: int | None
    """The first signal (SIGINT or SIGTERM) this process passed on to the job, if any."""


def run_isolated_job(
    cfg: ExperimentConfig, task_overrides: list[str], output_dir: Path, sweep_dir: Path, seed: int
) -> IsolatedJob:
    """Run one job in a fresh process and wait for it. An interrupt meanwhile is passed on
    to the job, which stops as a run does (MLflow run KILLED, last checkpoint kept)."""
    parent = read_sweep_state(sweep_dir).get("parent_run_id")
    label = arm_label(cfg, cfg.arm)
    common = " ".join(settings(task_overrides))
    name = f"{cfg.name} | {label} | seed {seed}" + (f" | {common}" if common else "")
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / ARM_FILE).write_text(
        json.dumps({"arm": cfg.arm, "label": label, "seed": seed, "overrides": task_overrides})
    )
    command = [
        sys.executable,
        "-m",
        "lostcities.train",
        *task_overrides,
        *arm_overrides(cfg),
        f"hydra.run.dir={output_dir}",
        f"tracking.run_name='{name.replace(chr(39), '')}'",  # quoted: '=' and spaces inside
    ]
    if parent:
        command.append(f"tracking.parent_run_id={parent}")
    print(f"[{cfg.name}] arm {cfg.arm} ({label}), seed {seed}: {output_dir}", flush=True)
    # The job gets its own process group, and Ctrl-C / SIGTERM reach it only through
    # this process. Before, a terminal's Ctrl-C hit both and subprocess.run answered its
    # KeyboardInterrupt by killing the job 0.25 s later, before the job had ended its
    # MLflow run (left RUNNING); a SIGTERM killed this process and left the job running.
    with forwarded_interrupts() as forwarder:
        job = subprocess.Popen(command, process_group=0)
        forwarder.attach(job.pid)
        code = job.wait()
    return IsolatedJob(code, forwarder.received[0] if forwarder.received else None)


def run_sweep_job(cfg: ExperimentConfig, hydra_cfg, seed: int, tracking: TrackingConfig) -> int:
    """An experiment's job of a multirun (``hydra_cfg``: Hydra's runtime config): its run in
    a fresh process (:func:`run_isolated_job`). A job that fails or is interrupted stops
    the sweep, its parent MLflow run ending FAILED or KILLED, with one line on stderr.
    Returns the exit code for the sweep (0: go on with the next job)."""
    sweep_dir = Path(hydra_cfg.sweep.dir)
    job = run_isolated_job(
        cfg, list(hydra_cfg.overrides.task), Path(hydra_cfg.runtime.output_dir), sweep_dir, seed
    )
    if job.interrupt is not None:  # the job printed its own line: where to resume it
        stop_sweep(tracking, sweep_dir, "KILLED")
        name = signal.Signals(job.interrupt).name
        print(f"interrupted ({name}): sweep stopped in job {hydra_cfg.job.num}", file=sys.stderr)
        return 128 + job.interrupt
    if job.code != 0:
        stop_sweep(tracking, sweep_dir, "FAILED")
        print(f"error: experiment job {hydra_cfg.job.num} exited with {job.code}", file=sys.stderr)
    return job.code


def stop_sweep(tracking: TrackingConfig, sweep_dir: Path, status: str) -> None:
    """A job failed (``FAILED``) or was interrupted (``KILLED``): the sweep stops, and its
    parent MLflow run ends with that status (not RUNNING)."""
    from lostcities.tracking import finish_parent_run

    finish_parent_run(tracking, read_sweep_state(sweep_dir).get("parent_run_id"), {}, [], status)


def read_sweep_state(sweep_dir: Path) -> dict:
    path = sweep_dir / SWEEP_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def write_sweep_state(sweep_dir: Path, state: dict) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / SWEEP_FILE).write_text(json.dumps(state))
