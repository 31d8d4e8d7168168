"""Tracker: metrics.jsonl, what lands in the MLflow store, and the outage policy."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest
from mlflow import MlflowClient

from lostcities.config import TrackingConfig
from lostcities.learning_curve import CURVE_FILE
from lostcities.tracking import (
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    METRICS_FILE,
    Tracker,
    default_run_name,
    flatten,
    resolve_tracking_uri,
    resume_metrics_file,
    where_to_see,
)

TAGS = {"game": "leduc", "network": "default"}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings the tracking package logged."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and record.name.startswith("lostcities.tracking")
    ]


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
def test_broken_store_at_start(tmp_path, monkeypatch, caplog, kind):
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
    warnings = warnings_of(caplog)
    assert len(warnings) == 1
    assert uri in warnings[0] and "during start" in warnings[0]
    assert len(rows(run_dir)) == 3
    assert (run_dir / CURVE_FILE).exists()


def test_store_failing_mid_run(mlflow_uri, tmp_path, monkeypatch, caplog):
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
    warnings = warnings_of(caplog)
    assert len(warnings) == 1
    assert mlflow_uri in warnings[0] and "database is locked" in warnings[0]
    assert [r["step"] for r in rows(run_dir)] == [0, 1, 2, 3, 4]
    monkeypatch.undo()
    history = MlflowClient(tracking_uri=mlflow_uri).get_metric_history(t.run_id, "x")
    assert [m.step for m in history] == [0]


# -- experiment kind, run names, provenance ---------------------------------------------


def test_experiment_gets_the_model_training_kind_tag(mlflow_uri, tmp_path):
    client = MlflowClient(tracking_uri=mlflow_uri)
    client.create_experiment("old")  # as an earlier version made it: no kind
    client.create_experiment("chosen", tags={EXPERIMENT_KIND_TAG: "genai_development"})
    for name in ("new", "old", "chosen"):
        with Tracker(TrackingConfig(tracking_uri=mlflow_uri, experiment=name), tmp_path / name):
            pass
    kinds = {
        name: client.get_experiment_by_name(name).tags.get(EXPERIMENT_KIND_TAG)
        for name in ("new", "old", "chosen")
    }
    assert EXPERIMENT_KIND_TAG == "mlflow.experimentKind"
    assert kinds == {
        "new": "custom_model_development",
        "old": "custom_model_development",
        "chosen": "genai_development",  # a kind set in the UI stays
    }
    assert EXPERIMENT_KIND == "custom_model_development"


def test_default_run_name():
    overrides = [
        "game=kuhn",
        "network=small",
        "run.seed=3",
        "run.progress=false",
        "tracking.tracking_uri=sqlite:///x.db",
        "hydra.run.dir=run",
        "run.iterations=2",
        "eval.every=1",
        "checkpoint.every=1",
        "+compile=trainer",
        "eval.opponents=[random,cautious,discard_only]",
    ]
    name = default_run_name("kuhn-small-s3", overrides)
    head, stamp = name[: -len("0612-153012-a3f1")], name[-len("0612-153012-a3f1") :]
    assert head == (
        "kuhn-small-s3-iterations=2,eval.every=1,checkpoint.every=1,compile=trainer,"
        "opponents=[random,cautious,disc...-"
    )
    assert re.fullmatch(r"\d{4}-\d{6}-[0-9a-f]{4}", stamp)
    assert default_run_name("kuhn-small-s3", overrides) != name  # two runs, two names
    assert default_run_name("leduc-small-s0", ["game=leduc"]).startswith("leduc-small-s0-")


def test_named_run(mlflow_uri, tmp_path):
    cfg = TrackingConfig(tracking_uri=mlflow_uri, experiment="unit")
    with Tracker(cfg, tmp_path, tags=TAGS, run_name="leduc-x-1") as t:
        pass
    assert MlflowClient(tracking_uri=mlflow_uri).get_run(t.run_id).info.run_name == "leduc-x-1"


def test_where_to_see_a_run_in_the_ui(mlflow_uri, tmp_path):
    with Tracker(TrackingConfig(enabled=False), tmp_path / "off") as t:
        assert t.where_to_see() is None
    with Tracker(TrackingConfig(tracking_uri=mlflow_uri, experiment="unit"), tmp_path) as t:
        pass
    experiment = MlflowClient(tracking_uri=mlflow_uri).get_experiment_by_name("unit")
    path = f"#/experiments/{experiment.experiment_id}/runs/{t.run_id}/model-metrics"
    assert t.where_to_see() == (
        f"mlflow ui --backend-store-uri {mlflow_uri}, then "
        f"http://127.0.0.1:5000/{path}?workflowType=machine_learning"
    )
    assert where_to_see("http://mlflow.lab:5000/", "7", "abc") == (
        "http://mlflow.lab:5000/#/experiments/7/runs/abc/model-metrics"
        "?workflowType=machine_learning"
    )
    spaced = "sqlite:////data/my runs/mlflow.db"  # quoted, so that the command pastes as is
    assert where_to_see(spaced, "1", "r").startswith(f"mlflow ui --backend-store-uri '{spaced}', ")


# -- resume: continuing the MLflow run ------------------------------------------------


def test_resume_continues_the_killed_run(mlflow_uri, tmp_path):
    client = MlflowClient(tracking_uri=mlflow_uri)
    cfg = TrackingConfig(tracking_uri=mlflow_uri, experiment="unit")
    with pytest.raises(KeyboardInterrupt):
        with Tracker(cfg, tmp_path / "a", {"run.iterations": 5}, TAGS, {"c.yaml": "1"}) as t:
            for step in (1, 2, 3):  # checkpoint at 2, then killed during 3 (logged)
                t.log_metrics({"loss/advantage": float(step)}, step=step)
            raise KeyboardInterrupt
    run_id = t.run_id
    assert client.get_run(run_id).info.status == "KILLED"

    params = {"run.iterations": 9, "run.resume": "ckpt_2"}
    tags = {**TAGS, "run/resumed_from": "ckpt_2"}
    # the resumed run's own metrics.jsonl starts from the killed run's rows up to step 2
    resume_metrics_file(tmp_path / "b", tmp_path / "a" / METRICS_FILE, last_step=2)
    with Tracker(
        cfg, tmp_path / "b", params, tags, {"c.yaml": "2"}, resume_run_id=run_id, resume_step=2
    ) as t:
        assert t.continued and t.run_id == run_id
        assert client.get_run(run_id).info.status == "RUNNING"
        for step in (3, 4):
            t.log_metrics({"loss/advantage": 10.0 * step}, step=step)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert len(client.search_runs([run.info.experiment_id])) == 1
    history = client.get_metric_history(run_id, "loss/advantage")
    # the killed process's step 3 stays in MLflow (it cannot delete points)
    assert sorted((m.step, m.value) for m in history) == [
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
        (3, 30.0),
        (4, 40.0),
    ]
    assert run.data.params == {"run.iterations": "5", "run.resume": "ckpt_2"}  # immutable
    assert run.data.tags["run/resumed_from"] == "ckpt_2"
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"c.yaml", "resume_000002", METRICS_FILE, CURVE_FILE} <= artifacts
    resumed = client.download_artifacts(run_id, "resume_000002/c.yaml", str(tmp_path / "dl"))
    assert Path(resumed).read_text() == "2"
    attached = client.download_artifacts(run_id, METRICS_FILE, str(tmp_path / "dl"))
    got = [(r["step"], r["loss/advantage"]) for r in map(json.loads, open(attached))]
    assert got == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]  # each step once
    assert rows(tmp_path / "b") == list(map(json.loads, open(attached)))


def test_resume_metrics_file_keeps_the_steps_up_to_the_checkpoint(tmp_path):
    source = tmp_path / "a" / METRICS_FILE
    source.parent.mkdir()
    source.write_text(
        "".join(json.dumps({"step": s, "x": s}) + "\n" for s in (1, 2, 3)) + '{"step": 4, "x'
    )
    resume_metrics_file(tmp_path / "a", source, last_step=2)  # the same directory
    assert [r["step"] for r in rows(tmp_path / "a")] == [1, 2]
    resume_metrics_file(tmp_path / "b", tmp_path / "missing.jsonl", last_step=2)
    assert not (tmp_path / "b" / METRICS_FILE).exists()  # nothing to continue from
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [METRICS_FILE]  # no temp left


def test_resume_of_a_run_not_in_the_store_starts_a_new_one(mlflow_uri, tmp_path, caplog):
    cfg = TrackingConfig(tracking_uri=mlflow_uri, experiment="unit")
    with Tracker(cfg, tmp_path, tags=TAGS, resume_run_id="0" * 32, resume_step=4) as t:
        t.log_metrics({"x": 1.0}, step=5)
    assert not t.continued and t.run_id != "0" * 32
    assert MlflowClient(tracking_uri=mlflow_uri).get_run(t.run_id).info.status == "FINISHED"
    warnings = warnings_of(caplog)
    assert len(warnings) == 1
    assert "0" * 32 in warnings[0] and "new run" in warnings[0]
