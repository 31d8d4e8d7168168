"""Tracker: metrics.jsonl, what lands in the MLflow store, and the outage policy."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mlflow import MlflowClient

from lostcities.config import TrackingConfig
from lostcities.tracking import (
    CURVE_FILE,
    METRICS_FILE,
    Tracker,
    flatten,
    plot_learning_curve,
    resolve_tracking_uri,
)

WARNING = "WARNING lostcities.tracking"
TAGS = {"game": "leduc", "network": "default"}


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines()]


def log_three(tracker: Tracker) -> None:
    for it in range(3):
        tracker.log_metrics(
            {
                "loss/advantage": 0.5 / (it + 1),
                "traversal/nodes": 100 * it,
                "eval/exploitability": 1.0 / (it + 1),
            },
            step=it,
        )


# -- metrics.jsonl and the local side ---------------------------------------------------


def test_disabled_writes_jsonl_and_curve_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_dir = tmp_path / "run"
    with Tracker(
        TrackingConfig(enabled=False), run_dir, {"a": 1}, TAGS, {"config.yaml": "a: 1"}
    ) as t:
        assert t.uri is None and t.run_id is None and not t.mlflow_active
        log_three(t)
        t.log_artifact(run_dir / METRICS_FILE)  # a no-op without MLflow
    got = rows(run_dir)
    assert [r["step"] for r in got] == [0, 1, 2]
    assert got[1]["loss/advantage"] == 0.25 and got[2]["traversal/nodes"] == 200
    assert all(isinstance(r["time"], float) for r in got)
    assert (run_dir / CURVE_FILE).stat().st_size > 0
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()


def test_jsonl_line_is_on_disk_before_close(tmp_path):
    with Tracker(TrackingConfig(enabled=False), tmp_path) as t:
        t.log_metrics({"loss/strategy": 0.1}, step=7)
        assert rows(tmp_path) == [
            {"step": 7, "time": rows(tmp_path)[0]["time"], "loss/strategy": 0.1}
        ]


def test_jsonl_appends_on_resume(tmp_path):
    for step in (1, 2):
        with Tracker(TrackingConfig(enabled=False), tmp_path) as t:
            t.log_metrics({"x": float(step)}, step=step)
    assert [r["step"] for r in rows(tmp_path)] == [1, 2]


@pytest.mark.parametrize("name", ["step", "a//b", "/abs", "../up", "bad|char", ""])
def test_bad_metric_names_raise_even_without_mlflow(tmp_path, name):
    with Tracker(TrackingConfig(enabled=False), tmp_path) as t:
        with pytest.raises(ValueError, match="bad metric name"):
            t.log_metrics({name: 1.0}, step=0)


def test_child_process_is_refused(tmp_path, monkeypatch):
    with Tracker(TrackingConfig(enabled=False), tmp_path) as t:
        real_pid = os.getpid()
        monkeypatch.setattr(os, "getpid", lambda: real_pid + 1)  # as in a forked worker
        with pytest.raises(RuntimeError, match="child process"):
            t.log_metrics({"x": 1.0}, step=0)
        monkeypatch.undo()


def test_exception_is_reraised_when_disabled(tmp_path):
    with pytest.raises(KeyError):
        with Tracker(TrackingConfig(enabled=False), tmp_path) as t:
            t.log_metrics({"x": 1.0}, step=0)
            raise KeyError("boom")
    assert len(rows(tmp_path)) == 1


# -- helpers --------------------------------------------------------------------------


def test_flatten():
    nested = {
        "game": {"name": "leduc", "max_turns": 1000},
        "eval": {"opponents": ["random", "x"]},
        "run": {"resume": None, "seed": 0},
        "empty": {},
    }
    assert flatten(nested) == {
        "game.name": "leduc",
        "game.max_turns": "1000",
        "eval.opponents": '["random", "x"]',
        "run.resume": "None",
        "run.seed": "0",
        "empty": "{}",
    }
    assert flatten({"a": {"b": 1}}, prefix="train") == {"train.a.b": "1"}


def test_resolve_tracking_uri(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///env.db")
    assert resolve_tracking_uri("sqlite:///cfg.db") == "sqlite:///cfg.db"
    assert resolve_tracking_uri(None) == "sqlite:///env.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert resolve_tracking_uri(None) == f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_learning_curve_picks_existing_families(tmp_path):
    metrics = tmp_path / METRICS_FILE
    lines = [
        json.dumps(
            {
                "step": s,
                "time": 0.0,
                "eval/random/win_rate0": 0.5,
                "eval/bot/win_rate0": 0.4,
                "eval/random/score_diff": 3.0,
                "other/thing": 1.0,
            }
        )
        for s in range(4)
    ]
    metrics.write_text("\n".join(lines) + '\n{"step": 4, "eval/ran')  # a line cut by a crash
    out = plot_learning_curve(metrics, tmp_path / CURVE_FILE)
    assert out == tmp_path / CURVE_FILE and out.read_bytes()[:4] == b"\x89PNG"

    (tmp_path / "none.jsonl").write_text(json.dumps({"step": 0, "time": 0.0, "other": 1.0}) + "\n")
    assert plot_learning_curve(tmp_path / "none.jsonl", tmp_path / "none.png") is None
    assert plot_learning_curve(tmp_path / "missing.jsonl", tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


# -- the MLflow store -----------------------------------------------------------------


def test_run_lands_in_store(tmp_path, mlflow_uri):
    run_dir = tmp_path / "run"
    params = flatten({"optim": {f"p{i:03d}": i for i in range(150)}, "long": "x" * 7000})
    texts = {"config.yaml": "game:\n  name: leduc\n", "overrides.yaml": "- game=leduc\n"}
    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes(b"not really a checkpoint")
    cfg = TrackingConfig(tracking_uri=mlflow_uri, experiment="unit")
    with Tracker(cfg, run_dir, params, {**TAGS, "arm": "a"}, texts) as t:
        assert t.uri == mlflow_uri and t.mlflow_active
        log_three(t)
        t.log_artifact(ckpt)
        run_id = t.run_id

    client = MlflowClient(tracking_uri=mlflow_uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "leduc-default"
    assert client.get_experiment(run.info.experiment_id).name == "unit"
    assert len(run.data.params) == 151
    assert run.data.params["optim.p149"] == "149"
    assert len(run.data.params["long"]) == 6000 and run.data.params["long"].endswith("...")
    assert run.data.tags["arm"] == "a" and run.data.tags["game"] == "leduc"
    history = client.get_metric_history(run_id, "loss/advantage")
    assert [(m.step, m.value) for m in history] == [(0, 0.5), (1, 0.25), (2, 0.5 / 3)]
    assert run.data.metrics["traversal/nodes"] == 200
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert artifacts == {"config.yaml", "overrides.yaml", "ckpt.pt", METRICS_FILE, CURVE_FILE}
    config = client.download_artifacts(run_id, "config.yaml", str(tmp_path / "dl"))
    assert Path(config).read_text() == texts["config.yaml"]
    assert not (run_dir / "mlflow.db").exists()  # the store is the configured one


def test_failed_run_status_and_reraise(mlflow_uri, tmp_path):
    cfg = TrackingConfig(tracking_uri=mlflow_uri, experiment="unit", run_name="named")
    with pytest.raises(ZeroDivisionError):
        with Tracker(cfg, tmp_path / "run") as t:
            t.log_metrics({"loss/advantage": 1.0}, step=0)
            1 / 0  # noqa: B018
    run = MlflowClient(tracking_uri=mlflow_uri).get_run(t.run_id)
    assert run.info.status == "FAILED" and run.info.run_name == "named"


def test_env_uri_and_existing_experiment(mlflow_uri, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    ids = []
    for _ in range(2):  # the second run reuses the experiment the first created
        with Tracker(TrackingConfig(experiment="unit"), tmp_path / "run") as t:
            t.log_metrics({"x": 1.0}, step=0)
        ids.append(MlflowClient(tracking_uri=mlflow_uri).get_run(t.run_id).info.experiment_id)
    assert ids[0] == ids[1]


@pytest.mark.parametrize("kind", ["parent_is_a_file", "not_a_database"])
def test_broken_store_at_start(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "garbage.db").write_bytes(b"this is not sqlite" * 100)
    uri = {
        "parent_is_a_file": f"sqlite:///{tmp_path / 'afile' / 'x.db'}",
        "not_a_database": f"sqlite:///{tmp_path / 'garbage.db'}",
    }[kind]
    run_dir = tmp_path / "run"
    with Tracker(TrackingConfig(tracking_uri=uri), run_dir, {"a": "1"}, TAGS) as t:
        log_three(t)
        t.log_artifact(run_dir / METRICS_FILE)
        assert not t.mlflow_active and t.run_id is None
    warnings = [line for line in capsys.readouterr().err.splitlines() if WARNING in line]
    assert len(warnings) == 1
    assert uri in warnings[0] and "during start" in warnings[0]
    assert len(rows(run_dir)) == 3
    assert (run_dir / CURVE_FILE).exists()


def test_store_failing_mid_run(mlflow_uri, tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    with Tracker(TrackingConfig(tracking_uri=mlflow_uri, experiment="unit"), run_dir) as t:
        t.log_metrics({"x": 0.0}, step=0)
        calls = []

        def broken(*args, **kwargs):
            calls.append(1)
            raise OSError("database is locked")

        monkeypatch.setattr(MlflowClient, "log_batch", broken)
        monkeypatch.setattr(MlflowClient, "log_artifact", broken)
        monkeypatch.setattr(MlflowClient, "set_terminated", broken)
        for step in range(1, 5):
            t.log_metrics({"x": float(step)}, step=step)
        t.log_artifact(run_dir / METRICS_FILE)
        assert not t.mlflow_active
    assert calls == [1]  # after the first failure MLflow is not touched again
    warnings = [line for line in capsys.readouterr().err.splitlines() if WARNING in line]
    assert len(warnings) == 1
    assert mlflow_uri in warnings[0] and "database is locked" in warnings[0]
    assert [r["step"] for r in rows(run_dir)] == [0, 1, 2, 3, 4]
    monkeypatch.undo()
    history = MlflowClient(tracking_uri=mlflow_uri).get_metric_history(t.run_id, "x")
    assert [m.step for m in history] == [0]
