"""The MLflow parent run of an experiment sweep: it groups the sweep's arms (each arm's
run nests under it through ``TrackingConfig.parent_run_id``) and holds the sweep's
report.

Like a :class:`~lostcities.tracking.tracker.Tracker`, a parent run never stops the
sweep: a store that fails costs one warning, and the sweep goes on.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path

from lostcities.config import TrackingConfig
from lostcities.tracking.store import (
    ensure_experiment,
    mlflow_client,
    one_line,
    resolve_tracking_uri,
)
from lostcities.tracking.values import MAX_TAG_VALUE, clip

log = logging.getLogger(__name__)


def start_parent_run(cfg: TrackingConfig, name: str, tags: Mapping[str, str]) -> str | None:
    """Open the MLflow run that groups a sweep's arms (they nest under it through
    ``TrackingConfig.parent_run_id``); None when tracking is off or the store fails."""
    if not cfg.enabled:
        return None
    try:
        client = mlflow_client(resolve_tracking_uri(cfg.tracking_uri), cfg.experiment)
        experiment_id = ensure_experiment(client, cfg.experiment)
        tags = {k: clip(str(v), MAX_TAG_VALUE) for k, v in tags.items()}
        return client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    except Exception as e:
        log.warning("MLflow parent run not created (%s); the sweep's runs stay flat", one_line(e))
        return None


def finish_parent_run(
    cfg: TrackingConfig,
    run_id: str | None,
    metrics: Mapping[str, float],
    files: list[Path],
    status: str = "FINISHED",
) -> None:
    """Attach a sweep's report (metrics, files) to its parent run and end the run."""
    if run_id is None:
        return
    try:
        from mlflow.entities import Metric

        client = mlflow_client(resolve_tracking_uri(cfg.tracking_uri), cfg.experiment)
        stamp = int(time.time() * 1000)
        batch = [Metric(k, float(v), stamp, 0) for k, v in metrics.items() if math.isfinite(v)]
        client.log_batch(run_id, metrics=batch)
        for path in files:
            client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, status)
    except Exception as e:
        log.warning("sweep report not logged to MLflow run %s (%s)", run_id, one_line(e))
