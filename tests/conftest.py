"""Shared pytest fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


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
