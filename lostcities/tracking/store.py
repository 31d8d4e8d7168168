"""The MLflow store: its address, whether a tracking server answers, its experiments, and
the links that open a run's charts in MLflow's UI.

A tracking server (an ``http://`` or ``https://`` URI) is asked once, before MLflow is
used, with a timeout of :data:`SERVER_PROBE_TIMEOUT_S` (:func:`check_server`): one that
does not answer turns MLflow off for the run at once, where MLflow's own retries would
hold the run for minutes. A server that fails later, mid-run, gets MLflow's retries
(``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, 7 by default, about 4 minutes in all, so a server
that restarts meanwhile loses nothing) before the warning; lower that variable to give
up sooner.
"""

from __future__ import annotations

import http.client
import os
import shlex
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

# The kind of experiment (the UI's ExperimentKind enum, mlflow/server/js; the UI's own
# kind selector writes the same tag): "custom_model_development" is a training run's.
# MLflow 3.x UIs that choose their layout by experiment read it; MLflow 3.17's UI chooses
# by its GenAI / Model training switch instead (WORKFLOW_PARAM below), and opens on GenAI.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"

# MLflow 3.17's UI: the run page's tab of metric charts, and the URL parameter that sets
# its GenAI / Model training switch to Model training (runs table, "Runs" breadcrumb); the
# switch is remembered by the browser only when clicked.
CHARTS_TAB = "model-metrics"
WORKFLOW_PARAM = "workflowType=machine_learning"
MLFLOW_UI_ADDRESS = "http://127.0.0.1:5000"  # where `mlflow ui` serves unless told otherwise

# How long the one request that decides whether a tracking server is up may take.
SERVER_PROBE_TIMEOUT_S = 5.0


def resolve_tracking_uri(configured: str | None) -> str:
    """``configured`` if set, else ``$MLFLOW_TRACKING_URI``, else ``mlflow.db`` in the cwd.

    The default is made absolute so that the run keeps its store if the working
    directory changes later, and so that warnings name the actual file.
    """
    if configured:
        return configured
    from_env = os.environ.get("MLFLOW_TRACKING_URI")
    if from_env:
        return from_env
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def is_server(uri: str) -> bool:
    """Whether ``uri`` names a tracking server (``http://`` or ``https://``)."""
    return uri.lower().startswith(("http://", "https://"))


def check_server(uri: str, experiment: str, timeout: float = SERVER_PROBE_TIMEOUT_S) -> None:
    """Raise ConnectionError unless the tracking server at ``uri`` answers one request
    (the lookup of ``experiment``, MLflow's own first call) within ``timeout`` seconds.

    One try, no retries: the answer is known within ``timeout`` (plus a name lookup),
    where MLflow's retries take minutes. Any answer below HTTP 500 counts as up (404:
    no such experiment yet; 401: MLflow sends its credentials, this request does not),
    as does a TLS failure (MLflow may trust a certificate this request does not). A
    refused or timed-out connection, an unknown host and a 5xx (a proxy without its
    server, a server without its database) count as down."""
    query = urllib.parse.urlencode({"experiment_name": experiment})
    url = f"{uri.rstrip('/')}/api/2.0/mlflow/experiments/get-by-name?{query}"
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return
    except urllib.error.HTTPError as e:
        if e.code < 500:
            return
        reason = f"HTTP {e.code} {e.reason}"
    except urllib.error.URLError as e:  # no connection: refused, timed out, unknown host
        cause = e.reason
        if isinstance(cause, ssl.SSLError):
            return
        reason = one_line(cause) if isinstance(cause, BaseException) else str(cause)
    except (OSError, http.client.HTTPException) as e:  # the answer timed out, broke off
        if isinstance(e, ssl.SSLError):  # or was no HTTP
            return
        reason = one_line(e)
    raise ConnectionError(f"no answer ({reason}; one try, {timeout:g} s timeout)")


def mlflow_client(uri: str, experiment: str) -> Any:
    """An MlflowClient of ``uri``; a tracking server is asked first (:func:`check_server`),
    so one that does not answer fails in seconds, not after MLflow's retries."""
    from mlflow import MlflowClient

    if is_server(uri):
        check_server(uri, experiment)
    return MlflowClient(tracking_uri=uri)


def ensure_experiment(client: Any, name: str) -> str:
    """The id of experiment ``name``, created if needed; its kind tag set unless it has
    one (a kind chosen in the UI stays)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return client.create_experiment(name, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
        except Exception:
            # Another process (a parallel A/B arm) may have created it in between.
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    if EXPERIMENT_KIND_TAG not in experiment.tags:  # made by an older version, or by hand
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return experiment.experiment_id


def charts_url(server: str, experiment_id: str, run_id: str) -> str:
    """The page of MLflow's UI at ``server`` that shows the run's metric charts, in the
    UI's Model training mode."""
    return (
        f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}/{CHARTS_TAB}"
        f"?{WORKFLOW_PARAM}"
    )


def where_to_see(uri: str, experiment_id: str, run_id: str) -> str:
    """How to open the run's metric charts: their URL on a tracking server; for a local
    store (sqlite), the ``mlflow ui`` command that serves it, then the URL."""
    if is_server(uri):
        return charts_url(uri, experiment_id, run_id)
    command = shlex.join(["mlflow", "ui", "--backend-store-uri", uri])
    return f"{command}, then {charts_url(MLFLOW_UI_ADDRESS, experiment_id, run_id)}"


def one_line(e: BaseException) -> str:
    """``e`` as one line of at most 300 characters, its type first: what a one-line
    warning about a failed store says."""
    text = " ".join(str(e).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
