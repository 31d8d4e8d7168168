"""Experiment tracking: each run's local ``metrics.jsonl`` and its MLflow run.

This is the only package that imports mlflow. It does so lazily, so a run with
tracking disabled never pays mlflow's import. Tracking never stops training: a
failing store costs one warning (through :mod:`logging`), and the metrics file
keeps every row.

Modules, lower ones first (a module imports only those above it):

- :mod:`~lostcities.tracking.values`: params, tags and metric names in the shapes
  MLflow accepts.
- :mod:`~lostcities.tracking.store`: the store's address, the probe of a tracking
  server, experiments, links to a run's charts in MLflow's UI.
- :mod:`~lostcities.tracking.naming`: run names.
- :mod:`~lostcities.tracking.metrics_file`: ``metrics.jsonl`` and its rewrite on resume.
- :mod:`~lostcities.tracking.tracker`: :class:`Tracker`, one training run's logging.
- :mod:`~lostcities.tracking.sweeps`: the parent run that groups a sweep's arms.

The provenance tags come from :mod:`lostcities.provenance`.
"""

from lostcities.tracking.metrics_file import METRICS_FILE, resume_metrics_file
from lostcities.tracking.naming import RUN_NAME_TAGS, default_run_name
from lostcities.tracking.store import (
    CHARTS_TAB,
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    MLFLOW_UI_ADDRESS,
    SERVER_PROBE_TIMEOUT_S,
    WORKFLOW_PARAM,
    charts_url,
    check_server,
    is_server,
    resolve_tracking_uri,
    where_to_see,
)
from lostcities.tracking.sweeps import finish_parent_run, start_parent_run
from lostcities.tracking.tracker import Tracker
from lostcities.tracking.values import flatten

__all__ = [
    "CHARTS_TAB",
    "EXPERIMENT_KIND",
    "EXPERIMENT_KIND_TAG",
    "METRICS_FILE",
    "MLFLOW_UI_ADDRESS",
    "RUN_NAME_TAGS",
    "SERVER_PROBE_TIMEOUT_S",
    "WORKFLOW_PARAM",
    "Tracker",
    "charts_url",
    "check_server",
    "default_run_name",
    "finish_parent_run",
    "flatten",
    "is_server",
    "resolve_tracking_uri",
    "resume_metrics_file",
    "start_parent_run",
    "where_to_see",
]
