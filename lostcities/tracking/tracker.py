"""One training run's tracking: a local ``metrics.jsonl`` plus one MLflow run.

Use a :class:`Tracker` from the trainer process only. Workers return their stats
to the trainer, which logs them: a worker that logged would open a stray run,
and several processes writing one sqlite store fight over its lock. A Tracker
refuses calls from any process other than the one that created it (e.g. a
forked worker that inherited it).

Failure policy: tracking must never stop training. Every metric goes first to
``run_dir/metrics.jsonl`` (flushed per line, so it survives a crash or a
tracking outage). If the MLflow store fails at any point (bad URI, unreadable
database, locked sqlite, unreachable server), the tracker logs one warning and
stops using MLflow for the rest of the run; the JSONL file keeps every line.
Errors that are the caller's fault (a metric name MLflow would reject, a
non-numeric value, a missing artifact file) still raise.

The learning-curve PNG is drawn by :mod:`lostcities.learning_curve`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from lostcities.config import TrackingConfig
from lostcities.learning_curve import CURVE_FILE, plot_learning_curve
from lostcities.tracking.metrics_file import METRICS_FILE
from lostcities.tracking.naming import choose_run_name
from lostcities.tracking.store import (
    ensure_experiment,
    mlflow_client,
    one_line,
    resolve_tracking_uri,
    where_to_see,
)
from lostcities.tracking.values import (
    MAX_KEY,
    MAX_PARAM_VALUE,
    MAX_TAG_VALUE,
    clip,
    number,
    valid_metric_name,
)

log = logging.getLogger(__name__)


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
            log.warning("learning curve not drawn (%s)", one_line(e))
        self._mlflow("close", self._finish_run, self.metrics_path, curve, status)

    # -- logging -------------------------------------------------------------------

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Append ``{"step", "time", **metrics}`` to metrics.jsonl, then one MLflow batch call."""
        self._check_process()
        if self._jsonl is None or self._closed:
            raise RuntimeError("Tracker is not open (use it as a context manager)")
        values = {}
        for key, value in metrics.items():
            if key in ("step", "time") or not valid_metric_name(key):
                raise ValueError(
                    f"bad metric name {key!r}: use letters, digits, _ - . / and spaces, "
                    "not 'step' or 'time', no leading '/' or '..' parts"
                )
            values[key] = number(value)
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
            log.warning(
                "MLflow store %s failed during %s (%s); MLflow is off for the rest of this "
                "run, metrics still go to %s",
                self.uri,
                what,
                one_line(e),
                self.metrics_path,
            )

    def _start_run(self) -> None:
        from mlflow.entities import Param, RunTag

        client = mlflow_client(self.uri, self.cfg.experiment)
        self.experiment_id = ensure_experiment(client, self.cfg.experiment)
        tags = {k[:MAX_KEY]: clip(v, MAX_TAG_VALUE) for k, v in self._tags.items()}
        if self.cfg.parent_run_id:  # MLflow's own tag: the UI shows this run nested
            tags["mlflow.parentRunId"] = self.cfg.parent_run_id
        params = {k: clip(v, MAX_PARAM_VALUE) for k, v in self._params.items()}
        texts = self._texts
        previous = self._run_to_continue(client, self.experiment_id)
        if previous is None:
            name = choose_run_name(self.cfg.run_name, self._run_name_default, self._tags)
            run = client.create_run(self.experiment_id, run_name=name, tags=tags)
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
            log.warning("the resumed checkpoint names no MLflow run; logging to a new run")
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
            log.warning(
                "MLflow run %s of the resumed checkpoint is %s %s; logging to a new run",
                run_id,
                why,
                self.uri,
            )
            return None
        if run.info.experiment_id != experiment_id:
            log.warning(
                "MLflow run %s of the resumed checkpoint is in another experiment than %r; "
                "logging to a new run",
                run_id,
                self.cfg.experiment,
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

    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError(
                "Tracker used from a child process; only the trainer logs "
                "(workers return their stats to it)"
            )
