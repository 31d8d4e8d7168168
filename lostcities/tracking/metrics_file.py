"""A run's ``metrics.jsonl``: one JSON row per logged step, written before MLflow is
tried, so it survives a crash or a tracking outage; and its rewrite when a run resumes
from a checkpoint."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

METRICS_FILE = "metrics.jsonl"


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
