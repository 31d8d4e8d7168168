"""Traversal on Ray: ``executor=ray`` is a performance setting like the process
pool. Under determinism=strict a run on Ray actors learns exactly what an inline or
process-pool run learns; a killed actor's chunk is named, rerun and merged in ID order;
the run stops and cleans up as a process-pool run does. The tests start their own Ray
cluster (``ray start --head`` on free ports), and a local Ray for the command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import free_port
from test_workers import (
    LEDUC,
    LOST_CITIES_LEARNED,
    TIMING,
    _children_alive,
    _nan_policy,
    assert_inline_results,
    assert_same_run,
    config,
    run_trainer,
    run_with_a_kill,
)

from lostcities.cfr.executors import WorkerError, run_all
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.traversal import TraversalId, TraversalSpec

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from lostcities.cfr.executors.ray_actors import RayExecutor, connect  # noqa: E402  (needs ray)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> str:
    """The GCS address of a one-node Ray cluster with 2 CPUs, started for these tests.
    Token authentication is off on it: the drivers of these tests carry no token."""
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts"]
    subprocess.run(
        [*ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", "--disable-usage-stats"],
        check=True, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([*ray_cli, "stop", "--force"], env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize(
    ("game", "iterations"), [(LEDUC, 3), (LOST_CITIES_LEARNED, 2)], ids=["leduc", "lost_cities"]
)
def test_strict_run_on_ray_actors_is_the_inline_and_process_run(cluster, game, iterations):
    strict = [*game, "determinism=strict"]
    inline = run_trainer(strict, iterations)
    processes = run_trainer([*strict, "executor=processes", "executor.num_workers=2"], iterations)
    on_ray = run_trainer(
        [*strict, "executor=ray", f"executor.ray_address={cluster}",
         "executor.num_workers=2", "executor.chunk_size=3"],
        iterations,
    )  # fmt: skip
    assert_same_run(inline, processes)
    assert_same_run(inline, on_ray)


def _leduc_actors(cluster: str, retries: int) -> tuple[RayExecutor, AdvantagePolicy, list]:
    cfg = config([*LEDUC, "determinism=strict"])
    spec = TraversalSpec(cfg.game, cfg.network, cfg.traversal, 0, cfg.determinism)
    executor = RayExecutor(spec, num_workers=2, chunk_size=100, retries=retries, address=cluster)
    return executor, AdvantagePolicy(), [TraversalId(1, 0, k) for k in range(400)]


def test_a_killed_actor_is_named_rerun_and_gives_identical_results(cluster, caplog):
    executor, sigma, ids = _leduc_actors(cluster, retries=1)
    killed: list[int] = []
    with caplog.at_level("WARNING"):
        results, everyone = run_with_a_kill(executor, sigma, ids, killed)
    assert killed and executor.restarts >= 1
    assert "traversal IDs (1, 0, " in caplog.text
    assert f"Ray actor pid {killed[0]} died" in caplog.text
    assert_inline_results(results, ids)
    time.sleep(1.0)  # Ray reaps a killed actor's process asynchronously
    assert _children_alive(everyone) == []


def test_a_killed_actor_without_retries_stops_with_one_line(cluster):
    executor, sigma, ids = _leduc_actors(cluster, retries=0)
    killed: list[int] = []
    with pytest.raises(WorkerError) as error:
        run_with_a_kill(executor, sigma, ids, killed)
    message = str(error.value)
    assert "\n" not in message
    assert "traversal IDs (1, 0, " in message and f"Ray actor pid {killed[0]} died" in message


def test_an_error_in_an_actor_names_the_ids_and_the_cause(cluster):
    cfg = config(LEDUC)
    spec = TraversalSpec(cfg.game, cfg.network, cfg.traversal, 0, cfg.determinism)
    with RayExecutor(spec, num_workers=1, retries=0, address=cluster) as executor:
        with pytest.raises(WorkerError) as error:
            run_all(executor, [TraversalId(5, 0, k) for k in range(3)], _nan_policy())
    message = str(error.value)
    assert "\n" not in message
    assert "(5, 0, 0)" in message and "NonFiniteError" in message and "iteration 4" in message


def test_connecting_keeps_the_python_signal_handlers(cluster):
    """ray.init sets its own SIGTERM handler (sys.exit); the run's clean stop needs its own."""

    def on_sigterm(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        if ray.is_initialized():
            ray.shutdown()
        connect(cluster, num_cpus=0)
        assert signal.getsignal(signal.SIGTERM) is on_sigterm
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, previous)


def test_without_ray_the_executor_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as if not installed
    cfg = config(LEDUC)
    spec = TraversalSpec(cfg.game, cfg.network, cfg.traversal, 0, cfg.determinism)
    with pytest.raises(WorkerError, match=r"pip install -e '\.\[ray\]'"):
        RayExecutor(spec)


# --- the command line: a local Ray started by the run ------------------------------------

CLI = [
    "game=leduc", "network=small", "run.iterations=3", "determinism=strict",
    "executor.num_workers=2", "traversal.traversals_per_player=24",
    "optim.advantage_steps=10", "optim.strategy_steps=10",
    "optim.advantage_batch_size=64", "optim.strategy_batch_size=64", "checkpoint.every=0",
]  # fmt: skip


def _train(tmp_path: Path, name: str, overrides: list[str], **popen) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "lostcities.train", *CLI, *overrides,
        f"hydra.run.dir={tmp_path / name}",
        f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.Popen(
        command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True, **popen
    )


def _learning_metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in row.items() if k != "time" and not k.startswith(TIMING)} for row in rows
    ]


def test_the_command_line_on_a_local_ray_logs_the_process_pool_metrics(tmp_path):
    from mlflow.tracking import MlflowClient

    on_ray = _train(tmp_path, "ray", ["executor=ray"])
    assert on_ray.wait(timeout=600) == 0, on_ray.stderr.read()
    pool = _train(tmp_path, "processes", ["executor=processes"])
    assert pool.wait(timeout=600) == 0, pool.stderr.read()
    assert _learning_metrics(tmp_path / "ray") == _learning_metrics(tmp_path / "processes")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs(
        [client.get_experiment_by_name("lostcities").experiment_id],
        order_by=["attributes.start_time ASC"],
    )
    assert [r.data.tags["executor"] for r in runs] == ["ray", "processes"]
    assert runs[0].data.tags["executor/ray_address"] == "local"
    metrics = [{k: v for k, v in r.data.metrics.items() if not k.startswith(TIMING)} for r in runs]
    assert metrics[0] == metrics[1] and "eval/exploitability" in metrics[0]


def test_sigterm_stops_a_run_on_ray_cleanly_and_leaves_no_actor(tmp_path):
    run = _train(tmp_path, "ray", ["executor=ray", "run.iterations=100000"])
    metrics = tmp_path / "ray" / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.is_file() and metrics.read_text()) and run.poll() is None:
        assert time.monotonic() < deadline, "no iteration finished"
        time.sleep(0.2)  # from the first iteration's end on, the actors are busy
    actors = subprocess.run(  # the other tests' actors were killed when they closed
        ["pgrep", "-f", "^ray::TraversalW"], capture_output=True, text=True
    ).stdout.split()
    run.send_signal(signal.SIGTERM)
    code = run.wait(timeout=120)
    stderr = run.stderr.read()
    assert code == 143, stderr  # the run's own clean stop, not Ray's abort (134)
    assert "interrupted (SIGTERM)" in stderr
    assert actors  # the run's actors were found, and are gone now
    time.sleep(2.0)
    assert _children_alive([int(pid) for pid in actors]) == []
