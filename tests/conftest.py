"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def sigint_raises_keyboard_interrupt():
    """Ctrl-C (SIGINT) raises KeyboardInterrupt during the tests, as in an interactive shell.

    A job started in the background (``cmd &``, some CI runners) inherits SIGINT as
    ignored, and Python then keeps ignoring it: the tests of interrupts, and the training
    processes they start and interrupt, would see nothing. The suite sets the handler
    itself (a child process inherits it as the default action, for which Python installs
    its own handler again) and puts the inherited one back at the end."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow sqlite store, created once per test session.

    MLflow >= 3.7 takes seconds to create a store's tables; tests copy this file
    (see ``mlflow_uri``) instead of paying that each time.
    """
    from mlflow import MlflowClient

    directory = tmp_path_factory.mktemp("mlflow_template")
    path = directory / "mlflow.db"
    # The store records ./mlruns as the default experiment's artifact root: keep it in tmp.
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(directory)
        MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()  # creates the tables
    return path


@pytest.fixture
def mlflow_uri(mlflow_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh copy of the template store in ``tmp_path``, as a ``sqlite:///`` URI.

    Also makes ``tmp_path`` the working directory: MLflow puts run artifacts in
    ``./mlruns`` of the cwd when it creates an experiment, which must not be the repo.
    """
    path = tmp_path / "mlflow.db"
    shutil.copyfile(mlflow_template, path)
    monkeypatch.chdir(tmp_path)
    return f"sqlite:///{path}"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """A live ``mlflow server`` on 127.0.0.1: its sqlite store (a copy of ``template``
    unless ``root`` has one) and the artifacts it serves are in ``root``, its log is
    ``root/server.log``. ``start()`` returns once it answers; ``kill()`` ends it at once
    (SIGKILL to its process group: the server and its uvicorn worker), as a crash would.
    A server started again on the same root and port is the same server restarted."""

    def __init__(self, root: Path, template: Path, port: int | None = None) -> None:
        self.root = root
        self.store = root / "mlflow.db"
        self.artifacts = root / "artifacts"
        self.port = free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        self.template = template
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 180.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.store.exists():
            shutil.copyfile(self.template, self.store)  # MLflow's tables cost seconds to make
        env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"  # its job runner: not needed here
        command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--workers", "1"]
        command += ["--backend-store-uri", f"sqlite:///{self.store}"]
        command += ["--artifacts-destination", str(self.artifacts)]
        with open(self.root / "server.log", "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, env=env, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"mlflow server exited {self.process.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        self.kill()
        pytest.fail(f"mlflow server not up after {timeout:g} s: {self.log_tail()}")

    def kill(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # its own session: start_new_session
        except ProcessLookupError:
            pass
        self.process.wait()
        self.process = None

    def log_tail(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)"


@pytest.fixture
def mlflow_server(mlflow_template: Path, tmp_path: Path):
    """A live MLflow tracking server with an empty store in ``tmp_path/server``."""
    server = MlflowServer(tmp_path / "server", mlflow_template)
    server.start()
    yield server
    server.kill()


LOST_CITIES_TINY = [
    "run.iterations=2",
    "executor=inline",  # spawning workers costs seconds; results do not depend on it
    "traversal.first_traversals_per_player=8",
    "traversal.traversals_per_player=4",
    "traversal.value_traversals_per_player=4",
    "value.steps=10",
    "value.batch_size=64",
    "optim.advantage_steps=20",
    "optim.strategy_steps=20",
    "eval.games=20",
    "eval.opponents=[cautious]",
    "eval.br_games=2",
    "eval.br_redeals=2",
    "eval.h2h_games=4",
    "run.progress=false",
    "tracking.enabled=false",
]
"""A Lost Cities run of a few seconds on the shipped config's code path."""


def train_run(overrides: list[str], run_dir: Path) -> list[dict]:
    """``python -m lostcities.train`` in-process with ``overrides``; its metrics rows."""
    import json

    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from lostcities.train import train

    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        dict_cfg = compose("train", overrides=overrides)
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    train(OmegaConf.to_object(dict_cfg), run_dir, resolved, overrides)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="session")
def lost_cities_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The final checkpoint of a tiny two-iteration Lost Cities run (made once)."""
    run_dir = tmp_path_factory.mktemp("lost_cities_tiny")
    train_run(LOST_CITIES_TINY, run_dir)
    return run_dir / "checkpoints" / "ckpt_000002.pt"


def load_module(path: Path, name: str):
    """The Python file at ``path`` as a module named ``name`` (files that are not part of
    the package: benchmarks, test helpers)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there while defined
    spec.loader.exec_module(module)
    return module


def load_exact_tree():
    """tests/games/exact_tree.py (the slow, independent exact tree walks of the small
    games) as a module: it is a test helper, not part of the package."""
    return load_module(Path(__file__).resolve().parent / "games" / "exact_tree.py", "exact_tree")


def load_benchmark(name: str):
    """benchmarks/<name>.py as a module, importing its siblings as a script run there
    would (its folder on sys.path)."""
    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    return load_module(folder / f"{name}.py", name)


def session_processes(sid: int) -> list[int]:
    """PIDs (not zombies) whose session is ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found
