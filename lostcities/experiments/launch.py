"""One sweep job = one fresh training process, whichever launcher runs the jobs.

A job's task function (:func:`run_sweep_job`, called by lostcities/train.py in a
multirun) starts ``python -m lostcities.train`` with the job's overrides plus its
arm's, in the job's own output directory, and waits for it: torch.compile's caches,
torch's thread settings and any process-level state cannot leak from one arm into the
next, whichever process runs the task function. Two ways run it:

- Hydra's basic launcher (the default) calls the task function in the launching
  process, one job after another. A job that fails or is interrupted stops the sweep
  there: one line on stderr, the parent MLflow run FAILED or KILLED, later jobs never
  start.
- A launcher plugin (``hydra/launcher=submitit_local`` or ``submitit_slurm``, from
  hydra-submitit-launcher; as well any launcher that calls it in other processes) calls
  it in processes of its own, after submitting every job of a batch at once. A failing
  job cannot stop jobs that already run: it records its exit code in its ``arm.json``
  and ends normally, so the launcher returns and the launching process reports all
  failures in one line when the last job has ended (parent run FAILED, no report, the
  first failure's exit code). A job's stderr is then in the launcher's log, which the
  line names.

In both, the launching process holds the sweep (lostcities/experiments/callback.py's
Hydra callback): it opens the parent MLflow run and writes ``sweep.json`` into the sweep
directory before any job starts, each job reads the run to nest under from there (so the
sweep directory must be on a file system the jobs share, and the MLflow store one they
all reach: a tracking server on a cluster), and it writes the report from the jobs'
directories when the launcher returns. If it stops before that (Ctrl-C, SIGTERM, an
error the launcher raises for a job that died), :class:`SweepGuard` ends the parent run
KILLED or FAILED on the way out with one line, rather than leave it RUNNING. Ctrl-C in a
terminal also reaches submitit_local's jobs (one process group), which stop as runs do;
a signal to the launching process alone, or on SLURM, leaves the jobs running.

On SLURM, submitit warns a job ``hydra.launcher.signal_delay_s`` before its time limit
(SIGUSR2): the job's run is stopped with SIGTERM, as a run stops (MLflow run KILLED,
last checkpoint kept), and submitit reports the job failed to the launcher, whose error
ends the sweep (parent run FAILED). A job that submitit requeues instead (a preemption,
or a time limit with ``hydra.launcher.max_num_timeout`` above its default 0) starts its
run again from the first iteration.

Parallelism: a launcher plugin runs a batch's jobs at once (submitit_local: all on this
machine; submitit_slurm: up to ``hydra.launcher.array_parallelism``). Curves do not
care; timings do, so the timing experiments (compile_ab, amp_ab) set
``hydra.sweeper.max_batch_size: 1``: one job per batch, each batch waited for, one job
at a time under any launcher. The report checks what happened rather than trusting the
settings: each job records its machine and its start and end, and a timing arm whose
jobs overlapped on one machine, or ran on more than one machine, cannot ship.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from lostcities.config import ExperimentConfig, TrackingConfig
from lostcities.interrupts import forwarded_interrupts

SWEEP_FILE = "sweep.json"  # in the sweep directory: the parent MLflow run, who launched
ARM_FILE = "arm.json"  # in each job directory: which arm and seed it ran, where, how it ended

# Overrides that describe the sweep machinery rather than a run.
_NOT_A_SETTING = ("+experiment=", "experiment.arm=", "run.seed=", "hydra.")

# submitit's early warning of a time limit or preemption (--signal=USR2@signal_delay_s on
# SLURM, where it reaches every process of the job). Its default action kills; the job
# is blocked from it, and this process's handler (submitit's) stops the job instead.
_TIME_LIMIT_SIGNAL = signal.SIGUSR2


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
    to the job, which stops as a run does (MLflow run KILLED, last checkpoint kept). The
    job's ``arm.json`` records its arm and seed, its machine, and its start and end."""
    parent = read_sweep_state(sweep_dir).get("parent_run_id")
    label = arm_label(cfg, cfg.arm)
    common = " ".join(settings(task_overrides))
    name = f"{cfg.name} | {label} | seed {seed}" + (f" | {common}" if common else "")
    output_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "arm": cfg.arm,
        "label": label,
        "seed": seed,
        "overrides": task_overrides,
        "host": socket.gethostname(),
        "log": _stderr_file(),
        "started": time.time(),
    }
    (output_dir / ARM_FILE).write_text(json.dumps(record))
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
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {_TIME_LIMIT_SIGNAL})
        try:  # the job inherits the signal blocked
            job = subprocess.Popen(command, process_group=0)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        forwarder.attach(job.pid)
        try:
            code = job.wait()
        except BaseException:
            # A handler of this process raised while the job ran (submitit's, on its
            # time-limit signal): the job stops as a run does before this process goes.
            job.send_signal(signal.SIGTERM)
            job.wait()
            raise
    interrupt = forwarder.received[0] if forwarder.received else None
    record.update(ended=time.time(), code=code, interrupt=interrupt)
    (output_dir / ARM_FILE).write_text(json.dumps(record))
    return IsolatedJob(code, interrupt)


def _stderr_file() -> str | None:
    """The file this process's stderr goes to, if it is one: a launcher plugin's log of
    the job, where a failed job's own error line is (None on a terminal or a pipe)."""
    try:
        path = Path(os.readlink("/proc/self/fd/2"))
    except OSError:  # no /proc (not Linux), or no stderr
        return None
    return str(path) if path.is_file() else None


def run_sweep_job(cfg: ExperimentConfig, hydra_cfg, seed: int, tracking: TrackingConfig) -> int:
    """An experiment's job of a multirun (``hydra_cfg``: Hydra's runtime config): its run in
    a fresh process (:func:`run_isolated_job`). In the launching process (Hydra's basic
    launcher) a job that fails or is interrupted stops the sweep, its parent MLflow run
    ending FAILED or KILLED, with one line on stderr; the exit code for the sweep is
    returned (0: go on with the next job). In a launcher plugin's process it returns 0
    whatever happened: its ``arm.json`` holds the exit code, which the launching process
    reports with the other jobs' (:func:`stopped_jobs`)."""
    sweep_dir = Path(hydra_cfg.sweep.dir)
    num = hydra_cfg.job.num
    job = run_isolated_job(
        cfg, list(hydra_cfg.overrides.task), Path(hydra_cfg.runtime.output_dir), sweep_dir, seed
    )
    if not launched_here(sweep_dir):
        if job.code != 0:  # in this job's log; the launching process reports it too
            print(f"error: experiment job {num} exited with {job.code}", file=sys.stderr)
        return 0
    if job.interrupt is not None:  # the job printed its own line: where to resume it
        end_sweep(tracking, sweep_dir, "KILLED")
        name = signal.Signals(job.interrupt).name
        print(f"interrupted ({name}): sweep stopped in job {num}", file=sys.stderr)
        return 128 + job.interrupt
    if job.code != 0:
        end_sweep(tracking, sweep_dir, "FAILED")
        print(f"error: experiment job {num} exited with {job.code}", file=sys.stderr)
    return job.code


def stopped_jobs(sweep_dir: Path) -> list[dict]:
    """The jobs of the sweep that did not end with exit code 0 (their ``arm.json``, with
    ``dir``: the job directory's name), in job order. A job that started and never
    recorded its end counts, with code None."""
    stopped = []
    for arm_file in sorted(sweep_dir.glob(f"*/{ARM_FILE}"), key=lambda f: job_order(f.parent.name)):
        record = json.loads(arm_file.read_text())
        if record.get("code") != 0:
            stopped.append({**record, "dir": arm_file.parent.name})
    return stopped


def job_order(name: str) -> tuple[int, str]:
    """Sort key of a job directory's name (``<hydra.job.num>_...``): the sweep's order."""
    num, _, rest = name.partition("_")
    return (int(num), rest) if num.isdigit() else (sys.maxsize, name)


def report_stopped_jobs(tracking: TrackingConfig, sweep_dir: Path, stopped: list[dict]) -> int:
    """Jobs of a launcher plugin's sweep failed or were interrupted: one line on stderr
    naming each (exit code, log), the parent MLflow run ends FAILED (KILLED when every one
    was interrupted), and the sweep's exit code is returned: the first failure's, else
    128 + the first interrupt's signal."""
    failed = [j for j in stopped if j.get("interrupt") is None]
    parts = []
    for j in stopped:
        ended = (
            "did not end"
            if j.get("code") is None
            else f"interrupted ({signal.Signals(j['interrupt']).name})"
            if j.get("interrupt") is not None
            else f"exited with {j['code']}"
        )
        where = f", log {j['log']}" if j.get("log") else ""
        parts.append(f"{j['dir']} (arm {j['arm']} {j['label']}, seed {j['seed']}) {ended}{where}")
    status = "FAILED" if failed else "KILLED"
    end_sweep(tracking, sweep_dir, status)
    what = "error" if failed else f"interrupted ({signal.Signals(stopped[0]['interrupt']).name})"
    print(
        f"{what}: {len(stopped)} experiment job(s) did not finish, no report "
        f"(parent MLflow run {status}): " + "; ".join(parts),
        file=sys.stderr,
        flush=True,
    )
    if failed:
        return failed[0].get("code") or 1
    return 128 + stopped[0]["interrupt"]


def end_sweep(
    tracking: TrackingConfig,
    sweep_dir: Path,
    status: str,
    metrics: dict[str, float] | None = None,
    files: list[Path] | None = None,
) -> None:
    """End the sweep's parent MLflow run with ``status`` (``FINISHED`` with the report's
    metrics and files; ``FAILED`` or ``KILLED``: a job failed or was interrupted) and
    record that in ``sweep.json``, so that :class:`SweepGuard` leaves it alone."""
    from lostcities.tracking import finish_parent_run

    state = read_sweep_state(sweep_dir)
    finish_parent_run(tracking, state.get("parent_run_id"), metrics or {}, files or [], status)
    write_sweep_state(sweep_dir, {**state, "status": status})


def launched_here(sweep_dir: Path) -> bool:
    """Whether this process launched the sweep (it runs the jobs of Hydra's basic
    launcher), by the machine and process id ``sweep.json`` records; a sweep without the
    record counts as launched here."""
    launcher = read_sweep_state(sweep_dir).get("launcher")
    return launcher is None or launcher == _this_process()


def _this_process() -> list:
    return [socket.gethostname(), os.getpid()]


class SweepGuard:
    """The launching process's hold on its sweep: from :meth:`open` (the multirun's start)
    to :meth:`close` (its end), SIGINT and SIGTERM end the process with exit code 128 +
    the signal (the default for SIGTERM would skip every clean-up), and if the process
    ends with the sweep not ended (an interrupt, an error the launcher raised), the parent
    MLflow run ends KILLED or FAILED with one line on stderr. Jobs of a launcher plugin
    that the signal did not reach run on (on SLURM: ``scancel`` them)."""

    def __init__(self, tracking: TrackingConfig, sweep_dir: Path) -> None:
        self.tracking = tracking
        self.sweep_dir = sweep_dir
        self.received: list[int] = []
        self._previous: dict[int, object] = {}

    def open(self, parent_run_id: str | None, name: str) -> None:
        state = {"parent_run_id": parent_run_id, "name": name, "launcher": _this_process()}
        write_sweep_state(self.sweep_dir, state)
        for signum in (signal.SIGINT, signal.SIGTERM):
            old = signal.getsignal(signum)
            if old is not None and old is not signal.SIG_IGN:  # a background job's: ignored
                self._previous[signum] = signal.signal(signum, self._on_signal)
        atexit.register(self._on_exit)

    def close(self) -> None:
        atexit.unregister(self._on_exit)
        for signum, old in self._previous.items():
            signal.signal(signum, old)
        self._previous = {}

    def _on_signal(self, signum: int, frame: object) -> None:
        # Only the first one raises: a second must not cut short the unwinding.
        self.received.append(signum)
        if len(self.received) == 1:
            raise SystemExit(128 + signum)

    def _on_exit(self) -> None:
        if "status" in read_sweep_state(self.sweep_dir):
            return
        if self.received:
            end_sweep(self.tracking, self.sweep_dir, "KILLED")
            name = signal.Signals(self.received[0]).name
            line = f"interrupted ({name}): sweep {self.sweep_dir} stopped before its report; "
            line += "parent MLflow run KILLED (jobs the signal did not reach run on)"
        else:
            end_sweep(self.tracking, self.sweep_dir, "FAILED")
            line = f"error: sweep {self.sweep_dir} stopped before its report (the error above); "
            line += "parent MLflow run FAILED (jobs still running go on)"
        print(line, file=sys.stderr, flush=True)


def read_sweep_state(sweep_dir: Path) -> dict:
    path = sweep_dir / SWEEP_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def write_sweep_state(sweep_dir: Path, state: dict) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / SWEEP_FILE).write_text(json.dumps(state))
