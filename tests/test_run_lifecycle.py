"""A run's life as a user meets it: resume (finished, continued, killed), SIGTERM, run tags."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import session_processes
from hydra import compose, initialize_config_module
from mlflow import MlflowClient
from omegaconf import OmegaConf

from lostcities.checkpoint import checkpoint_path, latest_checkpoint, load_checkpoint
from lostcities.train import train

KUHN = [
    "game=kuhn",
    "run.progress=false",
    "traversal.traversals_per_player=50",
    "optim.advantage_steps=20",
    "optim.strategy_steps=20",
    "eval.every=1",
    "checkpoint.every=1",
    "tracking.experiment=life",
]


def run(overrides: list[str], run_dir: Path) -> dict[str, float]:
    """``python -m lostcities.train overrides`` in-process (no Hydra run: no sweep)."""
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        dict_cfg = compose("train", overrides=overrides)
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    return train(OmegaConf.to_object(dict_cfg), run_dir, resolved, overrides)


def life_runs(uri: str) -> list:
    client = MlflowClient(tracking_uri=uri)
    return client.search_runs([client.get_experiment_by_name("life").experiment_id])


def test_resuming_a_finished_run_says_so_and_logs_nothing(tmp_path, mlflow_uri, capsys):
    track = f"tracking.tracking_uri={mlflow_uri}"
    run([*KUHN, track, "run.iterations=2"], tmp_path / "a")
    ckpt = latest_checkpoint(tmp_path / "a" / "checkpoints")
    capsys.readouterr()
    assert run([*KUHN, track, "run.iterations=2", f"run.resume={ckpt}"], tmp_path / "b") == {}
    assert capsys.readouterr().err.splitlines() == [
        f"nothing to do: checkpoint {ckpt} is at iteration 2 and run.iterations=2; to "
        "continue, set run.iterations above 2 (e.g. run.iterations=4)"
    ]
    assert len(life_runs(mlflow_uri)) == 1
    assert not (tmp_path / "b").exists()


def test_a_checkpoint_whose_memories_do_not_fit_is_refused_naming_the_file(tmp_path):
    """A checkpoint written before memories stored compact states (its rows are features)
    cannot be resumed: one error naming the file, before any iteration runs."""
    from lostcities.checkpoint import CheckpointError, save_checkpoint

    run([*KUHN, "tracking.enabled=false", "run.iterations=1"], tmp_path / "a")
    ckpt = latest_checkpoint(tmp_path / "a" / "checkpoints")
    state = load_checkpoint(ckpt)
    older = {"capacity": 10, "size": 0, "seen": 0, "features": torch.zeros(0, 11)}
    state["trainer"]["advantage_memories"][0] = older
    old = tmp_path / "old.pt"
    save_checkpoint(old, {k: v for k, v in state.items() if k not in ("format", "version")})
    overrides = [*KUHN, "tracking.enabled=false", "run.iterations=2", f"run.resume={old}"]
    with pytest.raises(CheckpointError, match=f"^{re.escape(str(old))}: saved memory holds"):
        run(overrides, tmp_path / "b")


def test_resumed_run_continues_one_mlflow_run_with_provenance_tags(tmp_path, mlflow_uri):
    track = f"tracking.tracking_uri={mlflow_uri}"
    run([*KUHN, track, "run.iterations=2"], tmp_path / "a")
    ckpt = latest_checkpoint(tmp_path / "a" / "checkpoints")
    (first,) = life_runs(mlflow_uri)
    assert load_checkpoint(ckpt)["mlflow_run_id"] == first.info.run_id
    run([*KUHN, track, "run.iterations=4", f"run.resume={ckpt}"], tmp_path / "b")

    (mlrun,) = life_runs(mlflow_uri)
    assert mlrun.info.run_id == first.info.run_id and mlrun.info.status == "FINISHED"
    client = MlflowClient(tracking_uri=mlflow_uri)
    history = client.get_metric_history(mlrun.info.run_id, "loss/advantage")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]
    final = latest_checkpoint(tmp_path / "b" / "checkpoints")
    assert load_checkpoint(final)["mlflow_run_id"] == mlrun.info.run_id  # resumable again

    tags = mlrun.data.tags
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", tags["git/commit"])
    assert tags["git/dirty"] in ("true", "false", "unknown")
    assert tags["version/torch"] == torch.__version__
    assert tags["version/python"] == ".".join(map(str, sys.version_info[:3]))
    assert tags["version/lostcities"]
    assert tags["run/threads"] == str(torch.get_num_threads())
    assert tags["run/device"] == "cpu"
    assert tags["run/resumed_from"] == str(ckpt)
    assert tags["game"] == "kuhn" and tags["determinism"] == "off"
    assert not [k for k in tags if k.startswith("choice/")]
    assert "sweep/id" not in tags  # not a multirun
    # the first segment's name stays: game, network, seed, overrides (clipped), time stamp
    assert re.fullmatch(
        r"kuhn-small-s0-traversals_per_player=50,advantage_steps=20,.*-\d{4}-\d{6}-[0-9a-f]{4}",
        mlrun.info.run_name,
    )


def test_sigterm_ends_the_run_killed_and_resume_finishes_it(tmp_path, mlflow_uri):
    overrides = [
        *KUHN,
        "executor=processes",
        "executor.num_workers=2",
        "run.iterations=1000",
        "eval.every=1000",
        "hydra.run.dir=run",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lostcities.train", *overrides],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session: every process it starts is findable
    )
    ckpts = tmp_path / "run" / "checkpoints"
    deadline = time.monotonic() + 240
    while latest_checkpoint(ckpts) is None and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    assert len(session_processes(proc.pid)) >= 3  # the trainer and its two workers
    os.kill(proc.pid, signal.SIGTERM)  # the trainer only: what kill, docker stop do
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    lines = [line for line in stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1, stderr
    found = re.fullmatch(
        r"interrupted \(SIGTERM\) at iteration (\d+); last checkpoint (\S+) "
        r"\(resume: python -m lostcities\.train .*run\.iterations=1000 .*run\.resume=(\S+)\)",
        lines[0],
    )
    assert found, lines[0]
    at, last = int(found.group(1)), Path(found.group(2))
    assert found.group(3) == str(last) == str(latest_checkpoint(ckpts))
    done = load_checkpoint(last)["trainer"]["iteration"]
    assert 1 <= done <= at
    time.sleep(0.5)
    assert session_processes(proc.pid) == []  # the workers are gone too
    (killed,) = life_runs(mlflow_uri)
    assert killed.info.status == "KILLED"

    # the resume the line suggests (inline here: the executor is a performance setting)
    resume = [*KUHN, f"tracking.tracking_uri={mlflow_uri}", f"run.resume={last}"]
    run([*resume, f"run.iterations={done + 1}"], tmp_path / "resumed")
    (finished,) = life_runs(mlflow_uri)
    assert finished.info.run_id == killed.info.run_id
    assert finished.info.status == "FINISHED"
    client = MlflowClient(tracking_uri=mlflow_uri)
    steps = {m.step for m in client.get_metric_history(finished.info.run_id, "loss/advantage")}
    assert done + 1 in steps and 1 in steps


def test_ctrl_c_names_the_iteration(tmp_path, monkeypatch):
    from lostcities.cfr.trainer import DeepCFRTrainer
    from lostcities.run import Interrupted

    real = DeepCFRTrainer.run_iteration

    def stop_in_third(self):
        if self.iteration == 2:
            raise KeyboardInterrupt  # Ctrl-C during the third iteration
        return real(self)

    monkeypatch.setattr(DeepCFRTrainer, "run_iteration", stop_in_third)
    with pytest.raises(Interrupted) as caught:
        run([*KUHN, "tracking.enabled=false", "run.iterations=5"], tmp_path)
    assert (caught.value.signal_name, caught.value.iteration) == ("SIGINT", 2)


def test_sweep_jobs_are_tagged_and_named_apart(tmp_path, mlflow_uri):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lostcities.train",
            "-m",
            *KUHN,
            "run.iterations=1",
            "hydra.sweep.dir=sweep",
            "run.progress=false,true",  # not in a run name: only the suffix tells them apart
        ],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    runs = life_runs(mlflow_uri)
    assert sorted(r.data.tags["sweep/job"] for r in runs) == ["0", "1"]
    assert {r.data.tags["sweep/id"] for r in runs} == {str(tmp_path / "sweep")}
    names = [r.info.run_name for r in runs]
    assert len(set(names)) == 2
    assert all(n.startswith("kuhn-small-s0-traversals_per_player=50,") for n in names)


def test_a_full_disk_ends_the_run_in_one_line_and_loses_nothing(tmp_path):
    # A per-file size limit (RLIMIT_FSIZE) makes the OS refuse a write past it, as a full
    # disk would (EFBIG instead of ENOSPC). Checkpoints grow with the memories: a limit
    # between the sizes of checkpoints 3 and 4 (measured on the same run without it) lets
    # three land and refuses the fourth.
    # (the run's directory is Hydra's setting, not one of the task's overrides in the line)
    overrides = [*KUHN, "tracking.enabled=false", "run.iterations=6", "hydra.run.dir=run"]
    sizes = tmp_path / "sizes"
    run([*KUHN, "tracking.enabled=false", "run.iterations=4", "checkpoint.keep=0"], sizes)
    small, large = (checkpoint_path(sizes / "checkpoints", t).stat().st_size for t in (3, 4))
    limit = (small + large) // 2

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "lostcities.train", *overrides],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=limited,
    )
    run_dir = tmp_path / "run"
    failed, good = (checkpoint_path(run_dir / "checkpoints", t) for t in (4, 3))
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"error: could not write {failed} (File too large); last good checkpoint {good} "
        f"(resume: python -m lostcities.train {' '.join(overrides[:-1])} run.resume={good})"
    ]
    assert not failed.exists() and load_checkpoint(good)["trainer"]["iteration"] == 3
    assert load_checkpoint(run_dir / "agent.pt")["agent"]["iteration"] == 3
    assert [p.name for p in good.parent.iterdir() if p.name.startswith(".")] == []  # no temp
    # the checkpoint and its metrics land together: 3 rows, and the resume logs iteration 4
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    run([*KUHN, "tracking.enabled=false", "run.iterations=4", f"run.resume={good}"], run_dir)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
