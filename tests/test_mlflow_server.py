"""Tracking to a live MLflow server over HTTP: a run's record, an outage, the start-up probe."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import MlflowServer, free_port
from mlflow import MlflowClient

from lostcities.tracking import SERVER_PROBE_TIMEOUT_S, charts_url, check_server

# A tracking warning as Hydra's job logging prints it on the console:
# "[<time>][lostcities.tracking.tracker][WARNING] - <message>".
WARNING = re.compile(r"\]\[lostcities\.tracking\.\w+\]\[WARNING\] - ")
KUHN = ["game=kuhn", "network=small"]


def train(overrides: list[str], cwd: Path, env: dict[str, str] | None = None):
    """``python -m lostcities.train`` as a user runs it; the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "lostcities.train", *overrides],
        cwd=cwd,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return {**env, **(extra or {})}


def warnings_of(*outputs: str) -> list[str]:
    """The tracking warnings in a run's console output (stdout and stderr)."""
    return [line for output in outputs for line in output.splitlines() if WARNING.search(line)]


def steps(run_dir: Path) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


def only_run(client: MlflowClient, experiment: str):
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return run


def history(client: MlflowClient, run_id: str, key: str = "loss/advantage") -> list[int]:
    return [m.step for m in client.get_metric_history(run_id, key)]


def test_run_logs_metrics_params_and_artifacts_over_http(mlflow_server, tmp_path):
    done = train(
        [
            *KUHN,
            "run.iterations=2",
            f"tracking.tracking_uri={mlflow_server.url}",
            "tracking.experiment=shared",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert warnings_of(done.stdout, done.stderr) == []
    client = MlflowClient(tracking_uri=mlflow_server.url)
    run = only_run(client, "shared")
    run_id = run.info.run_id
    assert run.info.status == "FINISHED"
    assert run.data.params["game.name"] == "kuhn"
    assert run.data.tags["game"] == "kuhn"
    assert history(client, run_id) == [1, 2]
    assert "eval/exploitability" in run.data.metrics
    # Uploaded through the server (served artifacts), not written beside the client.
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")
    assert {"config.yaml", "metrics.jsonl", "learning_curve.png", "agent"} <= {
        a.path for a in client.list_artifacts(run_id)
    }
    assert [a.path for a in client.list_artifacts(run_id, "agent")] == ["agent/agent.pt"]
    stored = list(mlflow_server.artifacts.rglob("agent.pt"))
    assert len(stored) == 1 and run_id in str(stored[0])
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "mlflow.db").exists()
    # The way to the charts, printed when the run starts and when it is complete.
    url = charts_url(mlflow_server.url, run.info.experiment_id, run_id)
    assert done.stderr.count(f"MLflow charts: {url}\n") == 2


def test_unreachable_server_is_given_up_after_one_try(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    done = train([*KUHN, "run.iterations=2", f"tracking.tracking_uri={uri}"], tmp_path)
    assert done.returncode == 0, done.stderr
    (warning,) = warnings_of(done.stdout, done.stderr)
    assert uri in warning and "during start" in warning and "Connection refused" in warning
    assert f"one try, {SERVER_PROBE_TIMEOUT_S:g} s timeout" in warning
    assert "Retrying" not in done.stdout + done.stderr  # MLflow's own retries never ran
    assert "MLflow charts" not in done.stderr  # there is no MLflow run to see
    (run_dir,) = {p.parent for p in (tmp_path / "outputs").rglob("metrics.jsonl")}
    assert steps(run_dir) == [1, 2]


class _Answer(http.server.BaseHTTPRequestHandler):
    code = 200

    def do_GET(self):
        self.send_response(self.code)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(("code", "up"), [(200, True), (404, True), (401, True), (503, False)])
def test_probe_judges_a_server_by_its_answer(code, up):
    handler = type("Handler", (_Answer,), {"code": code})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        if up:
            check_server(uri, "x", timeout=5)
        else:
            with pytest.raises(ConnectionError, match="HTTP 503"):
                check_server(uri, "x", timeout=5)
    finally:
        server.shutdown()
        server.server_close()


def test_probe_gives_up_on_a_server_that_never_answers():
    with socket.socket() as listening:  # accepts connections (the backlog), never answers
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        uri = f"http://127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(ConnectionError, match="timed out; one try, 0.5 s timeout"):
            check_server(uri, "x", timeout=0.5)


def test_outage_mid_run_then_resume_on_the_restarted_server(mlflow_server, tmp_path):
    """The server dies while a run logs to it: one warning, the run goes on and keeps
    metrics.jsonl whole; the server restarts on its store, and the resumed run continues
    the same MLflow run."""
    uri = mlflow_server.url
    client = MlflowClient(tracking_uri=uri)
    run1 = tmp_path / "run1"
    common = [*KUHN, "checkpoint.every=1", f"tracking.tracking_uri={uri}"]
    # No retries: the failing call gives up at once (default: minutes of retries first).
    env = clean_env({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"})
    with open(tmp_path / "run1.out", "w+") as out, open(tmp_path / "run1.err", "w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lostcities.train", *common, "run.iterations=4"]
            + [f"hydra.run.dir={run1}"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + 120
            while not (run1 / "metrics.jsonl").is_file() or not steps(run1):
                assert proc.poll() is None, (tmp_path / "run1.err").read_text()
                assert time.monotonic() < deadline, "no metrics after 120 s"
                time.sleep(0.05)
            # Paused while the server dies: every later MLflow call meets the outage.
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(1.0)  # a request already sent is answered
            run_id = only_run(client, "lostcities").info.run_id
            before = history(client, run_id)
            mlflow_server.kill()
            os.kill(proc.pid, signal.SIGCONT)
            assert proc.wait(timeout=300) == 0, (tmp_path / "run1.err").read_text()
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    (warning,) = warnings_of(stdout, stderr)
    assert uri in warning and "during log_metrics" in warning
    assert steps(run1) == [1, 2, 3, 4]
    assert before in ([], [1])

    restarted = MlflowServer(mlflow_server.root, mlflow_server.template, mlflow_server.port)
    restarted.start()
    try:
        run2 = tmp_path / "run2"
        checkpoint = run1 / "checkpoints" / "ckpt_000004.pt"
        done = train(
            [*common, "run.iterations=6", f"run.resume={checkpoint}", f"hydra.run.dir={run2}"],
            tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert warnings_of(done.stdout, done.stderr) == []
        run = only_run(client, "lostcities")  # no second run
        assert run.info.run_id == run_id and run.info.status == "FINISHED"
        assert history(client, run_id) == [*before, 5, 6]
        assert steps(run2) == [1, 2, 3, 4, 5, 6]
    finally:
        restarted.kill()
