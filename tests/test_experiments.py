"""Experiment sweeps: fresh process per arm, parent MLflow run with nested arms, report."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import session_processes

from lostcities.config import ExperimentConfig
from lostcities.experiments.report import build_report, decide, render_markdown

TINY_KUHN = [
    "game=kuhn",
    "run.progress=false",
    "traversal.traversals_per_player=20",
    "optim.advantage_steps=5",
    "optim.strategy_steps=5",
    "optim.advantage_batch_size=32",
    "optim.strategy_batch_size=32",
]


def fake_job(root: Path, num: int, arm: int, seed: int, seconds: float, loss: float) -> None:
    job = root / f"{num}_arm{arm}_seed{seed}"
    job.mkdir(parents=True)
    (job / "arm.json").write_text(json.dumps({"arm": arm, "seed": seed, "label": str(arm)}))
    warm = {1: 5.0}  # iteration 1 is slow (compile, start-up): the report drops it
    rows = [
        {"step": t, "time/iteration_seconds": seconds * warm.get(t, 1.0), "loss/advantage": loss}
        for t in range(1, 5)
    ]
    (job / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))


def test_report_pairs_seeds_drops_warmup_and_applies_the_decision_tree(tmp_path):
    exp = ExperimentConfig(name="x", arms=["a", "b", "c"], warmup_iterations=1)
    for seed, jitter in [(0, 0.0), (1, 0.1)]:
        fake_job(tmp_path, 3 * seed, 0, seed, 1.0 + jitter, 1.0 + jitter)  # baseline
        fake_job(tmp_path, 3 * seed + 1, 1, seed, 0.8 + jitter, 1.05)  # faster, inside band
        fake_job(tmp_path, 3 * seed + 2, 2, seed, 0.99, 3.0)  # drifts
    report = build_report(exp, tmp_path, ["game=kuhn"])
    base, fast, drifting = report["arms"]
    assert base["verdict"] == "baseline"
    assert base["mean_seconds"]["iteration"] == pytest.approx(1.05)  # warm-up dropped
    assert fast["effect_min"] == pytest.approx(1 - 0.9 / 1.1)
    assert fast["effect_max"] == pytest.approx(0.2)
    assert fast["drift_passed"] and fast["verdict"] == "ship"
    assert not drifting["drift_passed"] and drifting["verdict"] == "do not ship"
    text = render_markdown(report)
    assert "## Verdict" in text and "**b**: ship" in text


def test_decision_tree():
    assert decide(0.10, True, 0.05, None)[0] == "ship"
    assert decide(0.02, True, 0.05, None) == ("park", "only 2.0% faster (< 5%)")
    assert decide(-0.10, True, 0.05, None)[0] == "park"
    assert decide(0.50, False, 0.05, None)[0] == "do not ship"
    assert decide(0.50, True, 0.05, "gate")[1] == "gate"


def run_sweep(tmp_path: Path, mlflow_uri: str, overrides: list[str]) -> Path:
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    done = subprocess.run(
        [sys.executable, "-m", "lostcities.train", "-m", *overrides],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (report,) = (tmp_path / "multirun").rglob("report.md")
    return report


@pytest.mark.parametrize(
    ("experiment", "arms"),
    [("compile_ab", "0,1"), ("amp_ab", "0,1"), ("network_ab", "0,1"), ("drift", "0")],
)
def test_each_experiment_sweeps_kuhn_end_to_end(tmp_path, mlflow_uri, experiment, arms):
    from mlflow import MlflowClient

    report = run_sweep(
        tmp_path,
        mlflow_uri,
        [
            f"+experiment={experiment}",
            *TINY_KUHN,
            "run.iterations=2",
            "run.seed=0",
            f"experiment.arm={arms}",
            "eval.every=1",
        ],
    )
    text = report.read_text()
    assert "## Timing" in text and "## Drift" in text and "## Verdict" in text
    assert (report.parent / "timing.png").is_file()
    data = json.loads((report.parent / "report.json").read_text())
    assert len(data["arms"]) == len(arms.split(","))
    if experiment == "amp_ab":  # this CPU: the fp16 arm ran fp32 and says so
        assert "inactive on this device" in data["arms"][1]["reason"]
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("lostcities").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    (parent,) = parents
    assert parent.info.run_name.startswith(experiment) and parent.info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == len(arms.split(","))
    assert len({c.info.run_name for c in children}) == len(children)
    assert {"report.md", "report.json", "timing.png"} <= {
        a.path for a in client.list_artifacts(parent.info.run_id)
    }


def test_unknown_appended_key_fails_at_start(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "lostcities.train", *TINY_KUHN, "+run.bogus=1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "error: unknown config key 'run.bogus'" in done.stderr


@pytest.mark.slow
def test_compile_ab_on_leduc_three_seeds(tmp_path, mlflow_uri):
    """The longer variant: Leduc, wide network, 3 seeds (minutes: compile per arm)."""
    report = run_sweep(
        tmp_path, mlflow_uri, ["+experiment=compile_ab", "game=leduc", "network=wide"]
    )
    assert "## Verdict" in report.read_text()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_sweep_ends_its_job_and_itself_killed(tmp_path, mlflow_uri, signum):
    """Ctrl-C (to the sweep's process group, as a terminal sends it) or SIGTERM (to the
    sweep process only) while a job trains: the job stops as a run does, the sweep stops,
    and neither MLflow run is left RUNNING."""
    from mlflow import MlflowClient

    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "lostcities.train", "-m", "+experiment=drift", *TINY_KUHN),
            *("experiment.arm=0", "run.seed=0,1", "run.iterations=1000", "checkpoint.every=1"),
        ],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session and process group, like a terminal job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # see the Ctrl-C test
    )
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("multirun/*/*/0_*/checkpoints/ckpt_*.pt")):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the first job wrote no checkpoint"
        time.sleep(0.2)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)  # what Ctrl-C in the terminal does
    else:
        os.kill(proc.pid, signum)  # what kill, a scheduler's time limit do
    _, stderr = proc.communicate(timeout=120)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr
    assert re.search(rf"interrupted \({name}\) at iteration \d+; last checkpoint \S+", stderr)
    assert stderr.rstrip().endswith(f"interrupted ({name}): sweep stopped in job 0"), stderr
    assert not list(tmp_path.glob("multirun/*/*/1_*"))  # the second job never started
    time.sleep(0.5)
    assert session_processes(proc.pid) == []
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("lostcities").experiment_id])
    assert sorted(r.info.status for r in runs) == ["KILLED", "KILLED"]  # parent and job
