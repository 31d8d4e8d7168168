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
Note: an unreachable *HTTP* server is only detected after MLflow's own retries
(``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, ``MLFLOW_HTTP_REQUEST_TIMEOUT``), which
can take minutes; lower those variables when that matters.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import posixpath
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from lostcities.config import TrackingConfig

METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "learning_curve.png"

# MLflow's per-request limits (mlflow.utils.validation), restated so that the
# batching below does not depend on a private module.
_MAX_PARAMS_PER_BATCH = 100
_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAM_VALUE = 6000
_MAX_TAG_VALUE = 8000
_MAX_KEY = 250
# MLflow's portable metric-name alphabet (it also allows ':' except on Windows).
_METRIC_NAME = re.compile(r"^[/\w.\- ]+$")

# Tags whose values make the default run name, in this order ("leduc-default").
RUN_NAME_TAGS = ("game", "network")

# Learning-curve panels: (title, fnmatch patterns). Every metric matching a
# panel's patterns is drawn in it; panels with no matching metric are skipped.
CURVE_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("exploitability", ("eval/exploitability",)),
    ("win rate, seat 0", ("eval/*/win_rate0",)),
    ("score difference", ("eval/*/score_diff",)),
    ("advantage loss", ("loss/advantage", "loss/advantage/*")),
    ("strategy loss", ("loss/strategy", "loss/strategy/*")),
    ("traversal nodes", ("traversal/nodes",)),
)


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


class Tracker:
    """One training run's metrics: ``run_dir/metrics.jsonl`` always, MLflow unless disabled.

    ``params``: flattened config (see :func:`flatten`), logged as MLflow params.
    ``tags``: logged as run tags; ``game`` and ``network`` also name the run when
    ``cfg.run_name`` is None. ``texts``: artifact file name -> content, e.g.
    ``{"config.yaml": ..., "overrides.yaml": ...}``.

    Use as a context manager: the run ends FINISHED on a normal exit, FAILED when
    an exception escapes (KILLED for KeyboardInterrupt), and the exception is
    re-raised. On close the tracker draws ``learning_curve.png`` from the JSONL
    file and attaches it and ``metrics.jsonl`` to the run.

    ``uri`` is the resolved store (None when ``cfg.enabled`` is False). ``run_id``
    is the MLflow run, or None if none was created; ``mlflow_active`` tells
    whether MLflow is still in use (False after a store failure).
    """

    def __init__(
        self,
        cfg: TrackingConfig,
        run_dir: str | os.PathLike[str],
        params: Mapping[str, object] | None = None,
        tags: Mapping[str, str] | None = None,
        texts: Mapping[str, str] | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.metrics_path = self.run_dir / METRICS_FILE
        self.curve_path = self.run_dir / CURVE_FILE
        self.uri: str | None = resolve_tracking_uri(cfg.tracking_uri) if cfg.enabled else None
        self.run_id: str | None = None
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
            # Closing runs inside __exit__: a plotting bug must not replace the
            # exception that is ending the run, nor lose the run's final status.
            _warn(f"learning curve not drawn ({_one_line(e)})")
        self._mlflow("close", self._finish_run, curve, status)

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
        from mlflow import MlflowClient
        from mlflow.entities import Param

        client = MlflowClient(tracking_uri=self.uri)
        experiment_id = _experiment_id(client, self.cfg.experiment)
        tags = {k[:_MAX_KEY]: _clip(v, _MAX_TAG_VALUE) for k, v in self._tags.items()}
        if self.cfg.parent_run_id:  # MLflow's own tag: the UI shows this run nested
            tags["mlflow.parentRunId"] = self.cfg.parent_run_id
        run = client.create_run(experiment_id, run_name=self._run_name(), tags=tags)
        self.run_id = run.info.run_id
        self._client = client
        params = [Param(k, _clip(v, _MAX_PARAM_VALUE)) for k, v in self._params.items()]
        for i in range(0, len(params), _MAX_PARAMS_PER_BATCH):
            client.log_batch(self.run_id, params=params[i : i + _MAX_PARAMS_PER_BATCH])
        for name, text in self._texts.items():
            client.log_text(self.run_id, text, name)

    def _log_metric_batch(self, values: dict[str, float], step: int, now: float) -> None:
        from mlflow.entities import Metric

        stamp = int(now * 1000)
        batch = [Metric(k, float(v), stamp, step) for k, v in values.items()]
        for i in range(0, len(batch), _MAX_METRICS_PER_BATCH):  # one call unless > 1000 metrics
            self._client.log_batch(self.run_id, metrics=batch[i : i + _MAX_METRICS_PER_BATCH])

    def _finish_run(self, curve: Path | None, status: str) -> None:
        if self.metrics_path.is_file():
            self._client.log_artifact(self.run_id, str(self.metrics_path))
        if curve is not None:
            self._client.log_artifact(self.run_id, str(curve))
        self._client.set_terminated(self.run_id, status)

    def _run_name(self) -> str | None:
        if self.cfg.run_name:
            return self.cfg.run_name
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
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=resolve_tracking_uri(cfg.tracking_uri))
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
        from mlflow import MlflowClient
        from mlflow.entities import Metric

        client = MlflowClient(tracking_uri=resolve_tracking_uri(cfg.tracking_uri))
        stamp = int(time.time() * 1000)
        batch = [Metric(k, float(v), stamp, 0) for k, v in metrics.items() if math.isfinite(v)]
        for i in range(0, len(batch), _MAX_METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=batch[i : i + _MAX_METRICS_PER_BATCH])
        for path in files:
            client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, status)
    except Exception as e:
        _warn(f"sweep report not logged to MLflow run {run_id} ({_one_line(e)})")


def plot_learning_curve(
    metrics_path: str | os.PathLike[str], out_path: str | os.PathLike[str]
) -> Path | None:
    """Draw the :data:`CURVE_PANELS` found in a metrics.jsonl into a PNG; None if none found.

    Unparsable lines (a line cut by a crash) are skipped; when a step appears
    twice (a resumed run appending to the file) the later value wins.
    """
    series = _read_series(Path(metrics_path))
    panels = []
    for title, patterns in CURVE_PANELS:
        keys = sorted(k for k in series if any(fnmatch.fnmatchcase(k, p) for p in patterns))
        if keys:
            panels.append((title, patterns, keys))
    if not panels:
        return None

    # Figure without pyplot: no global backend switch, no figure left open; PNG via Agg.
    from matplotlib.figure import Figure

    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(4.0 * ncols, 2.8 * nrows), dpi=100, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (title, patterns, keys) in zip(axes, panels, strict=False):
        for key in keys:
            steps = sorted(series[key])
            values = [series[key][s] for s in steps]
            ax.plot(
                steps, values, marker="." if len(steps) < 50 else None, label=_label(key, patterns)
            )
        positive = all(v > 0 for k in keys for v in series[k].values() if math.isfinite(v))
        if title == "exploitability" and positive:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("iteration", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    out_path = Path(out_path)
    fig.savefig(out_path)
    return out_path


# -- helpers -----------------------------------------------------------------------


def _experiment_id(client: Any, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:
        # Another process (a parallel A/B arm) may have created it in between.
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id


def _read_series(path: Path) -> dict[str, dict[int, float]]:
    """metrics.jsonl -> {metric: {step: value}} (numbers only; inf becomes a gap)."""
    series: dict[str, dict[int, float]] = {}
    if not path.is_file():
        return series
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
                step = int(row["step"])
            except (ValueError, KeyError, TypeError):
                continue
            for key, value in row.items():
                if key in ("step", "time") or isinstance(value, bool):
                    continue
                if isinstance(value, int | float):
                    value = float(value)
                    series.setdefault(key, {})[step] = value if math.isfinite(value) else math.nan
    return series


def _label(key: str, patterns: tuple[str, ...]) -> str:
    """The part of ``key`` a pattern's ``*`` matched ("eval/random/win_rate0" -> "random")."""
    for pattern in patterns:
        if "*" in pattern and fnmatch.fnmatchcase(key, pattern):
            head, tail = pattern.split("*", 1)
            return key[len(head) : len(key) - len(tail)] or key
    return key


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
