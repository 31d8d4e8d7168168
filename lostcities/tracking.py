"""Experiment tracking for the trainer process: a local ``metrics.jsonl`` plus one MLflow run.

This is the only module that imports mlflow. It does so lazily, so a run with
tracking disabled never pays mlflow's import.

Use a :class:`Tracker` from the trainer process only. Workers return their stats
to the trainer, which logs them: a worker that logged would open a stray run,
and several processes writing one sqlite store fight over its lock. A Tracker
refuses calls from any process other than the one that created it (e.g. a
forked worker that inherited it).

Failure policy: tracking must never stop training. Every metric goes first to
``run_dir/metrics.jsonl`` (flushed per line, so it survives a crash or a
tracking outage). If the MLflow store fails at any point (bad URI, unreadable
database, locked sqlite, unreachable server), the tracker prints one warning
line to stderr and stops using MLflow for the rest of the run; the JSONL file
keeps every line. Errors that are the caller's fault (a metric name MLflow
would reject, a non-numeric value, a missing artifact file) still raise.

A tracking server (an ``http://`` or ``https://`` URI) is asked once, before MLflow is
used, with a timeout of :data:`SERVER_PROBE_TIMEOUT_S` (:func:`check_server`): one that
does not answer turns MLflow off for the run at once, where MLflow's own retries would
hold the run for minutes. A server that fails later, mid-run, gets MLflow's retries
(``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, 7 by default, about 4 minutes in all, so a server
that restarts meanwhile loses nothing) before the warning; lower that variable to give
up sooner.

Resume: a run resumed from a checkpoint continues the MLflow run that wrote the
checkpoint (see :class:`Tracker`), so its curves stay one line, and its
``metrics.jsonl`` starts from the resumed run's rows (:func:`resume_metrics_file`).

The learning-curve PNG is drawn by :mod:`lostcities.learning_curve`, the provenance
tags come from :mod:`lostcities.provenance`.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import posixpath
import re
import secrets
import shlex
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from lostcities.config import TrackingConfig
from lostcities.learning_curve import CURVE_FILE, plot_learning_curve

METRICS_FILE = "metrics.jsonl"

# MLflow's value-length limits (mlflow.utils.validation): longer values are clipped here,
# where MLflow would refuse the whole batch. (MLflow's client splits batches by itself.)
_MAX_PARAM_VALUE = 6000
_MAX_TAG_VALUE = 8000
_MAX_KEY = 250
# MLflow's portable metric-name alphabet (it also allows ':' except on Windows).
_METRIC_NAME = re.compile(r"^[/\w.\- ]+$")

# Tags whose values make the run name when the caller gives none, in this order.
RUN_NAME_TAGS = ("game", "network")

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

# Overrides that never go into a run name: already in it (game, network, seed), or
# saying nothing about what was trained.
_NAME_SKIP_KEYS = frozenset({"game", "network", "run.seed", "run.resume", "run.progress"})
_NAME_SKIP_PREFIXES = ("tracking.", "hydra.")
_NAME_VALUE_CHARS = 24
_NAME_OVERRIDE_CHARS = 100


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
        reason = _one_line(cause) if isinstance(cause, BaseException) else str(cause)
    except (OSError, http.client.HTTPException) as e:  # the answer timed out, broke off
        if isinstance(e, ssl.SSLError):  # or was no HTTP
            return
        reason = _one_line(e)
    raise ConnectionError(f"no answer ({reason}; one try, {timeout:g} s timeout)")


def _mlflow_client(uri: str, experiment: str):
    """An MlflowClient of ``uri``; a tracking server is asked first (:func:`check_server`),
    so one that does not answer fails in seconds, not after MLflow's retries."""
    from mlflow import MlflowClient

    if is_server(uri):
        check_server(uri, experiment)
    return MlflowClient(tracking_uri=uri)


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


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mapping -> ``{"optim.advantage_lr": "0.001", ...}`` (MLflow params are strings).

    Lists become JSON (``'["random", "discard_only"]'``), other leaves ``str()``.
    An empty mapping is kept as ``"{}"`` so the key does not vanish.
    """
    out: dict[str, str] = {}
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name))
        elif isinstance(value, Mapping | list | tuple):
            out[name] = json.dumps(_plain(value), default=str)
        else:
            out[name] = str(value)
    return out


def default_run_name(base: str, overrides: Sequence[str]) -> str:
    """``base`` + the command-line overrides it does not already say + a unique suffix.

    ``default_run_name("kuhn-small-s0", ["game=kuhn", "run.iterations=2", "eval.every=1"])``
    -> ``"kuhn-small-s0-iterations=2,every=1-0612-153012-a3f1"``. Keys are cut to their
    last part unless two overrides share it (then they stay whole), values to 24
    characters. The suffix (time stamp + 4 random hex digits) keeps two runs of one
    command apart, e.g. the arms of a parallel A/B started in the same second.
    """
    parsed = []
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+")
        if not sep or key in _NAME_SKIP_KEYS or key.startswith(_NAME_SKIP_PREFIXES):
            continue
        parsed.append((key, _clip(value, _NAME_VALUE_CHARS)))
    lasts = [key.rsplit(".", 1)[-1] for key, _ in parsed]
    shown = [
        f"{last if lasts.count(last) == 1 else key}={value}"
        for (key, value), last in zip(parsed, lasts, strict=True)
    ]
    parts = [base]
    if shown:
        parts.append(_clip(",".join(shown), _NAME_OVERRIDE_CHARS))
    parts.append(time.strftime("%m%d-%H%M%S") + "-" + secrets.token_hex(2))
    return "-".join(parts)


def resume_metrics_file(run_dir: str | os.PathLike[str], source: Path, last_step: int) -> None:
    """Start ``run_dir/metrics.jsonl`` for a run resumed after step ``last_step``: the rows
    of ``source`` (the resumed run's metrics.jsonl; it may be that very file) up to that
    step, so the file keeps one row per step across every segment. Rows of a step past
    the checkpoint (logged by a process that died before its next checkpoint) are dropped:
    the resumed run logs those steps again. The file is replaced atomically. A missing
    ``source`` (the run directory was not kept) leaves the file to this segment alone."""
    if not source.is_file():
        return
    kept = []
    for line in source.read_text(encoding="utf-8").splitlines():
        try:
            if int(json.loads(line)["step"]) <= last_step:
                kept.append(line + "\n")
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash
    target = Path(run_dir) / METRICS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{METRICS_FILE}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(kept)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Tracker:
    """One training run's metrics: ``run_dir/metrics.jsonl`` always, MLflow unless disabled.

    ``params``: flattened config (see :func:`flatten`), logged as MLflow params.
    ``tags``: logged as run tags. ``texts``: artifact file name -> content, e.g.
    ``{"config.yaml": ..., "overrides.yaml": ...}``. The run is named ``cfg.run_name``,
    else ``run_name`` (see :func:`default_run_name`), else from the ``game`` and
    ``network`` tags. The experiment gets the :data:`EXPERIMENT_KIND_TAG` tag unless it
    has one. :meth:`where_to_see` says how to open the run's charts in MLflow's UI.

    Resume: ``resume_step`` is the iteration of the checkpoint a resumed run starts
    from, ``resume_run_id`` the MLflow run that wrote it. If that run is still in the
    store (in this experiment, not deleted), the tracker continues it: its status goes
    back to RUNNING, new metrics land at their steps on the same curves, tags are
    updated, params it lacks are added (MLflow params cannot change: the resumed
    config goes in as ``resume_<step>/config.yaml``). Otherwise it starts a new run and
    says so in one line. A run whose process was SIGKILLed (or lost its machine) stays
    RUNNING in MLflow; resuming its checkpoint continues it and ends it properly. Points
    logged past the resumed checkpoint by the earlier process stay in MLflow's history
    (MLflow cannot delete them); :func:`resume_metrics_file` drops them from the local
    ``metrics.jsonl`` before the tracker appends to it, so the attached file and the
    learning curve hold each step once, every segment included.

    Use as a context manager: the run ends FINISHED on a normal exit, FAILED when
    an exception escapes (KILLED for KeyboardInterrupt), and the exception is
    re-raised. On close the tracker draws ``learning_curve.png`` from the JSONL
    file and attaches it and ``metrics.jsonl`` to the run.

    ``uri`` is the resolved store (None when ``cfg.enabled`` is False). ``run_id``
    is the MLflow run, or None if none was created; ``continued`` tells whether it
    is the resumed one; ``mlflow_active`` tells whether MLflow is still in use
    (False after a store failure).
    """

    def __init__(
        self,
        cfg: TrackingConfig,
        run_dir: str | os.PathLike[str],
        params: Mapping[str, object] | None = None,
        tags: Mapping[str, str] | None = None,
        texts: Mapping[str, str] | None = None,
        *,
        run_name: str | None = None,
        resume_run_id: str | None = None,
        resume_step: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.metrics_path = self.run_dir / METRICS_FILE
        self.curve_path = self.run_dir / CURVE_FILE
        self.uri: str | None = resolve_tracking_uri(cfg.tracking_uri) if cfg.enabled else None
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.continued = False
        self._run_name_default = run_name
        self._resume_run_id = resume_run_id
        self._resume_step = resume_step
        self._params = {str(k): str(v) for k, v in (params or {}).items()}
        self._tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self._texts = dict(texts or {})
        self._client: Any = None  # mlflow.MlflowClient once the run exists
        self._mlflow_on = self.uri is not None
        self._jsonl: IO[str] | None = None
        self._pid = os.getpid()
        self._closed = False

    @property
    def mlflow_active(self) -> bool:
        return self._mlflow_on and self._client is not None

    def where_to_see(self) -> str | None:
        """How to open this run's metric charts in MLflow's UI (see :func:`where_to_see`);
        None without an MLflow run."""
        if self.uri is None or self.run_id is None or self.experiment_id is None:
            return None
        return where_to_see(self.uri, self.experiment_id, self.run_id)

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Tracker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            status = "FINISHED"
        elif issubclass(exc_type, KeyboardInterrupt):
            status = "KILLED"
        else:
            status = "FAILED"
        self.close(status)  # returns None: an escaping exception propagates

    def start(self) -> None:
        """Open ``metrics.jsonl`` (appending, so a resumed run continues it) and the MLflow run."""
        self._check_process()
        if self._jsonl is not None:
            raise RuntimeError("Tracker already started")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(self.metrics_path, "a", encoding="utf-8")  # closed in close()
        self._mlflow("start", self._start_run)

    def close(self, status: str = "FINISHED") -> None:
        """Close the JSONL file, draw the learning curve, attach files, end the run. Idempotent."""
        if self._closed:
            return
        self._check_process()
        self._closed = True
        if self._jsonl is not None:
            self._jsonl.close()
        curve = None
        try:
            curve = plot_learning_curve(self.metrics_path, self.curve_path)
        except Exception as e:
            # Closing runs inside __exit__: a plotting bug (or a full disk) must not replace
            # the exception that is ending the run, nor lose the run's final status.
            _warn(f"learning curve not drawn ({_one_line(e)})")
        self._mlflow("close", self._finish_run, self.metrics_path, curve, status)

    # -- logging -------------------------------------------------------------------

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Append ``{"step", "time", **metrics}`` to metrics.jsonl, then one MLflow batch call."""
        self._check_process()
        if self._jsonl is None or self._closed:
            raise RuntimeError("Tracker is not open (use it as a context manager)")
        values = {}
        for key, value in metrics.items():
            if key in ("step", "time") or not _valid_metric_name(key):
                raise ValueError(
                    f"bad metric name {key!r}: use letters, digits, _ - . / and spaces, "
                    "not 'step' or 'time', no leading '/' or '..' parts"
                )
            values[key] = _number(value)
        now = time.time()
        step = int(step)
        self._jsonl.write(json.dumps({"step": step, "time": now, **values}) + "\n")
        self._jsonl.flush()  # on disk before MLflow is tried: the JSONL survives a store outage
        self._mlflow("log_metrics", self._log_metric_batch, values, step, now)

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        """Attach a file (e.g. a checkpoint) to the MLflow run; a no-op when MLflow is off."""
        self._check_process()
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"artifact {path} does not exist")
        self._mlflow(
            "log_artifact", lambda: self._client.log_artifact(self.run_id, str(path), artifact_path)
        )

    # -- MLflow (every call goes through _mlflow) ----------------------------------

    def _mlflow(self, what: str, fn: Callable[..., object], *args: object) -> None:
        if not self._mlflow_on or (self._client is None and what != "start"):
            return
        try:
            fn(*args)
        except Exception as e:
            # Any failure of the store (MlflowException, sqlalchemy's OperationalError,
            # OSError, requests' ConnectionError, ...) means the same here: warn once,
            # keep training, keep the JSONL.
            self._mlflow_on = False
            _warn(
                f"MLflow store {self.uri} failed during {what} ({_one_line(e)}); MLflow is off "
                f"for the rest of this run, metrics still go to {self.metrics_path}"
            )

    def _start_run(self) -> None:
        from mlflow.entities import Param, RunTag

        client = _mlflow_client(self.uri, self.cfg.experiment)
        experiment_id = _experiment_id(client, self.cfg.experiment)
        self.experiment_id = experiment_id
        tags = {k[:_MAX_KEY]: _clip(v, _MAX_TAG_VALUE) for k, v in self._tags.items()}
        if self.cfg.parent_run_id:  # MLflow's own tag: the UI shows this run nested
            tags["mlflow.parentRunId"] = self.cfg.parent_run_id
        params = {k: _clip(v, _MAX_PARAM_VALUE) for k, v in self._params.items()}
        texts = self._texts
        previous = self._run_to_continue(client, experiment_id)
        if previous is None:
            run = client.create_run(experiment_id, run_name=self._run_name(), tags=tags)
            self.run_id = run.info.run_id
        else:
            self.run_id = previous.info.run_id
            self.continued = True
            client.update_run(self.run_id, status="RUNNING")  # back from FINISHED / KILLED
            client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
            params = {k: v for k, v in params.items() if k not in previous.data.params}
            texts = {f"resume_{self._resume_step:06d}/{k}": v for k, v in texts.items()}
        self._client = client
        client.log_batch(self.run_id, params=[Param(k, v) for k, v in params.items()])
        for name, text in texts.items():
            client.log_text(self.run_id, text, name)

    def _run_to_continue(self, client: Any, experiment_id: str) -> Any:
        """The MLflow run a resumed training continues, or None (after one line saying why)."""
        if self._resume_step is None:
            return None
        run_id = self._resume_run_id
        if run_id is None:
            _warn("the resumed checkpoint names no MLflow run; logging to a new run")
            return None
        from mlflow.exceptions import MlflowException

        try:
            run = client.get_run(run_id)
        except MlflowException as e:
            if e.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise  # the store itself failed: the caller's outage policy applies
            run = None
        if run is None or run.info.lifecycle_stage != "active":
            why = "deleted from" if run is not None else "not in"
            _warn(
                f"MLflow run {run_id} of the resumed checkpoint is {why} {self.uri}; "
                "logging to a new run"
            )
            return None
        if run.info.experiment_id != experiment_id:
            _warn(
                f"MLflow run {run_id} of the resumed checkpoint is in another experiment than "
                f"{self.cfg.experiment!r}; logging to a new run"
            )
            return None
        return run

    def _log_metric_batch(self, values: dict[str, float], step: int, now: float) -> None:
        from mlflow.entities import Metric

        stamp = int(now * 1000)
        batch = [Metric(k, float(v), stamp, step) for k, v in values.items()]
        self._client.log_batch(self.run_id, metrics=batch)

    def _finish_run(self, metrics: Path, curve: Path | None, status: str) -> None:
        if metrics.is_file():
            self._client.log_artifact(self.run_id, str(metrics))
        if curve is not None:
            self._client.log_artifact(self.run_id, str(curve))
        self._client.set_terminated(self.run_id, status)

    def _run_name(self) -> str | None:
        if self.cfg.run_name:
            return self.cfg.run_name
        if self._run_name_default:
            return self._run_name_default
        parts = [self._tags[k] for k in RUN_NAME_TAGS if self._tags.get(k)]
        return "-".join(parts) or None  # None: MLflow picks a random name

    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError(
                "Tracker used from a child process; only the trainer logs "
                "(workers return their stats to it)"
            )


def start_parent_run(cfg: TrackingConfig, name: str, tags: Mapping[str, str]) -> str | None:
    """Open the MLflow run that groups a sweep's arms (they nest under it through
    ``TrackingConfig.parent_run_id``); None when tracking is off or the store fails."""
    if not cfg.enabled:
        return None
    try:
        client = _mlflow_client(resolve_tracking_uri(cfg.tracking_uri), cfg.experiment)
        experiment_id = _experiment_id(client, cfg.experiment)
        tags = {k: _clip(str(v), _MAX_TAG_VALUE) for k, v in tags.items()}
        return client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    except Exception as e:
        _warn(f"MLflow parent run not created ({_one_line(e)}); the sweep's runs stay flat")
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

        client = _mlflow_client(resolve_tracking_uri(cfg.tracking_uri), cfg.experiment)
        stamp = int(time.time() * 1000)
        batch = [Metric(k, float(v), stamp, 0) for k, v in metrics.items() if math.isfinite(v)]
        client.log_batch(run_id, metrics=batch)
        for path in files:
            client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, status)
    except Exception as e:
        _warn(f"sweep report not logged to MLflow run {run_id} ({_one_line(e)})")


# -- helpers -----------------------------------------------------------------------


def _experiment_id(client: Any, name: str) -> str:
    """The experiment's id, created if needed; its kind tag set unless it has one (a kind
    chosen in the UI stays)."""
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


def _valid_metric_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and len(name) <= _MAX_KEY
        and bool(_METRIC_NAME.match(name))
        and posixpath.normpath(name) == name
        and not name.startswith(("/", ".."))
    )


def _number(value: object) -> int | float:
    """ints stay ints in the JSONL; everything else (numpy, 0-d tensors, bools) -> float."""
    if type(value) is int:
        return value
    return float(value)  # type: ignore[arg-type]


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _warn(message: str) -> None:
    print(f"WARNING lostcities.tracking: {message}", file=sys.stderr, flush=True)
