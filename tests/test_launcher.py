"""Experiment sweeps through a Hydra launcher plugin (hydra-submitit-launcher's local
mode, which runs every job in processes of its own, all at once): the report of Hydra's
basic launcher, every arm nested under the one parent MLflow run, and a job that fails or
is interrupted reported in one line with the parent run ended, not RUNNING."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import session_processes
from hydra import compose, initialize_config_module
from test_experiments import TINY_KUHN

from lostcities.config import ExperimentConfig, TrackingConfig, register_configs
from lostcities.experiments.launch import (
    read_sweep_state,
    report_stopped_jobs,
    stopped_jobs,
    write_sweep_state,
)
from lostcities.experiments.render import render_markdown
from lostcities.experiments.report import build_report

# Two arms without torch.compile (seconds each on Kuhn), one seed: with no seed spread the
# parity check compares the curves exactly, so equal reports mean equal learning.
SWEEP = [
    "+experiment=network_ab",
    "+experiment/setting=short",
    *TINY_KUHN,
    "run.seed=0",
    "experiment.arm=0,1",
]
LOCAL = "hydra/launcher=submitit_local"
# What differs between two sweeps of the same jobs: where they ran, and every time.
TIMING = {
    "mean_seconds",
    "iteration_seconds_by_seed",
    "projection_1000_s",
    "effects",
    "effect_mean",
    "effect_min",
    "effect_max",
}


def store(template: Path, directory: Path) -> str:
    """A fresh MLflow store in ``directory``: a copy of the empty template store, whose
    tables are made once per test run."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, directory / "mlflow.db")
    return f"sqlite:///{directory / 'mlflow.db'}"


def sweep(directory: Path, uri: str, overrides: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lostcities.train", "-m", *overrides, "hydra.sweep.dir=sweep"],
        cwd=directory,
        env={**os.environ, "MLFLOW_TRACKING_URI": uri},
        capture_output=True,
        text=True,
        timeout=600,
    )


def parent_and_arms(uri: str):
    """The sweep's parent MLflow run and every other run, each checked to nest under it."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("lostcities").experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    arms = [r for r in runs if r is not parent]
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in arms)
    return client, parent, arms


def without_timing(report: dict) -> dict:
    kept = {k: v for k, v in report.items() if k not in ("sweep_dir", "concurrency")}
    kept["arms"] = [{k: v for k, v in a.items() if k not in TIMING} for a in report["arms"]]
    return kept


def test_submitit_sweep_writes_the_basic_launchers_report(tmp_path, mlflow_template):
    reports = {}
    for launcher in ("basic", "submitit_local"):
        directory = tmp_path / launcher
        uri = store(mlflow_template, directory)
        done = sweep(directory, uri, SWEEP + ([LOCAL] if launcher != "basic" else []))
        assert done.returncode == 0, done.stderr[-3000:]
        sweep_dir = directory / "sweep"
        reports[launcher] = (
            json.loads((sweep_dir / "report.json").read_text()),
            (sweep_dir / "report.md").read_text(),
        )
        client, parent, arms = parent_and_arms(uri)
        assert parent.info.status == "FINISHED"
        assert sorted(r.info.status for r in arms) == ["FINISHED", "FINISHED"]
        assert {"report.md", "report.json"} <= {
            a.path for a in client.list_artifacts(parent.info.run_id)
        }
        # where each job's stderr went: submitit's log of its own job, or this pipe
        logs = [json.loads(p.read_text())["log"] for p in sorted(sweep_dir.glob("*/arm.json"))]
        if launcher == "basic":
            assert logs == [None, None]
        else:
            assert len({Path(log).parent for log in logs}) == 2
            assert all(Path(log).is_relative_to(sweep_dir.resolve() / ".submitit") for log in logs)
    (basic, basic_text), (plugin, plugin_text) = reports["basic"], reports["submitit_local"]
    assert [a["verdict"] for a in basic["arms"]] == ["baseline", "fail"]  # small vs default
    assert basic["arms"][1]["drift_bands"]["loss/advantage"]  # curves to compare
    assert basic["concurrency"]["overlapping"] == [] and len(basic["concurrency"]["hosts"]) == 1
    assert without_timing(plugin) == without_timing(basic)
    assert plugin_text.split("## Parity")[1] == basic_text.split("## Parity")[1]


def test_a_failing_job_under_submitit_ends_the_sweep_failed_in_one_line(tmp_path, mlflow_template):
    uri = store(mlflow_template, tmp_path)
    done = sweep(
        tmp_path, uri, [*SWEEP, 'experiment.arms=["network=small","network=bogus"]', LOCAL]
    )
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.rstrip().splitlines()[-1]
    found = re.fullmatch(
        r"error: 1 experiment job\(s\) did not finish, no report \(parent MLflow run FAILED\): "
        r"1_arm1_seed0 \(arm 1 network=bogus, seed 0\) exited with 1, log (\S+)",
        last,
    )
    assert found, last
    assert "Could not find 'network/bogus'" in Path(found[1]).read_text()  # the job's own error
    assert not (tmp_path / "sweep" / "report.md").exists()
    assert read_sweep_state(tmp_path / "sweep")["status"] == "FAILED"
    _, parent, arms = parent_and_arms(uri)
    assert parent.info.status == "FAILED"
    (arm,) = arms  # the other job ran to its end
    assert arm.info.status == "FINISHED" and "network=small" in arm.info.run_name


def test_ctrl_c_of_a_submitit_sweep_ends_every_run_killed(tmp_path, mlflow_template):
    """Ctrl-C reaches the launching process and submitit's local jobs (one process group,
    as in a terminal): each job's run stops as a run does, the launching process ends the
    parent run KILLED, and no process is left."""
    uri = store(mlflow_template, tmp_path)
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "lostcities.train", "-m", "+experiment=drift", *TINY_KUHN, LOCAL),
            *("experiment.arm=0", "run.seed=0", "run.iterations=1000", "checkpoint.every=1"),
            "hydra.sweep.dir=sweep",
        ],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": uri},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session and process group, like a terminal job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("sweep/0_*/checkpoints/ckpt_*.pt")):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the job wrote no checkpoint"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert re.search(
        r"interrupted \(SIGINT\): sweep \S+ stopped before its report; parent MLflow run KILLED",
        stderr,
    )
    deadline = time.monotonic() + 60
    while session_processes(proc.pid):  # the job's run ends itself after the launcher
        assert time.monotonic() < deadline, session_processes(proc.pid)
        time.sleep(0.2)
    log = json.loads(next(tmp_path.glob("sweep/0_*/arm.json")).read_text())["log"]
    assert re.search(r"interrupted \(SIGINT\) at iteration \d+", Path(log).read_text())
    _, parent, arms = parent_and_arms(uri)
    assert [parent.info.status] + [r.info.status for r in arms] == ["KILLED", "KILLED"]


@pytest.mark.parametrize(
    ("experiment", "batch"),
    [("compile_ab", 1), ("amp_ab", 1), ("drift", None), ("network_ab", None)],
)
def test_timing_experiments_run_one_job_at_a_time_under_any_launcher(experiment, batch):
    """A launcher plugin submits a whole batch at once: the timing experiments make every
    batch one job (the basic launcher runs them one at a time anyway)."""
    register_configs()
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[f"+experiment={experiment}", LOCAL],
            return_hydra_config=True,
        )
    assert cfg.hydra.sweeper.max_batch_size == batch
    assert cfg.hydra.launcher._target_.endswith("submitit_launcher.LocalLauncher")


# --- the report's record of how the jobs ran ---------------------------------------------


def fake_job(root: Path, num: int, arm: int, host: str, started: float, ended: float) -> None:
    job = root / f"{num}_arm{arm}_seed0"
    job.mkdir(parents=True)
    rows = [{"step": t, "time/iteration_seconds": 1.0 - 0.2 * arm} for t in range(1, 11)]
    record = {"arm": arm, "seed": 0, "host": host, "started": started, "ended": ended, "code": 0}
    (job / "arm.json").write_text(json.dumps(record))
    (job / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))


@pytest.mark.parametrize(
    ("jobs", "shortfall", "sentence"),
    [
        ([("a", 0, 10), ("a", 10, 20)], None, "one at a time on one machine"),
        ([("a", 0, 10), ("a", 5, 20)], "jobs 0_arm0_seed0, 1_arm1_seed0 ran at the same", "ran at"),
        ([("a", 0, 10), ("b", 10, 20)], "the jobs ran on 2 machines (a, b)", "on 2 machines"),
    ],
)
def test_a_timing_arm_ships_only_from_one_machine_one_job_at_a_time(
    tmp_path, jobs, shortfall, sentence
):
    for arm, (host, started, ended) in enumerate(jobs):
        fake_job(tmp_path, arm, arm, host, started, ended)
    exp = ExperimentConfig(name="x", arms=["a", "b"], warmup_iterations=1)
    report = build_report(exp, tmp_path, [])
    verdict, reason = report["arms"][1]["verdict"], report["arms"][1]["reason"]
    if shortfall is None:
        assert verdict == "ship", reason  # 20% faster over 9 timed iterations
    else:
        assert verdict == "park" and shortfall in reason, reason
    assert sentence in render_markdown(report)


def test_jobs_interrupted_under_a_plugin_end_the_sweep_killed(tmp_path, capsys):
    write_sweep_state(tmp_path, {"parent_run_id": None})
    for num, code in [(0, 0), (2, 143), (1, 130)]:
        job = tmp_path / f"{num}_arm0_seed{num}"
        job.mkdir()
        interrupt = code - 128 if code else None
        record = {"arm": 0, "label": "x", "seed": num, "code": code, "interrupt": interrupt}
        (job / "arm.json").write_text(json.dumps(record))
    stopped = stopped_jobs(tmp_path)
    assert [j["dir"] for j in stopped] == ["1_arm0_seed1", "2_arm0_seed2"]  # job order
    assert report_stopped_jobs(TrackingConfig(enabled=False), tmp_path, stopped) == 130
    assert read_sweep_state(tmp_path)["status"] == "KILLED"
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert line.startswith("interrupted (SIGINT): 2 experiment job(s) did not finish")
    assert line.endswith("2_arm0_seed2 (arm 0 x, seed 2) interrupted (SIGTERM)")
