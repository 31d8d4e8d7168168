"""Params, tags and metrics in the shapes MLflow accepts.

MLflow refuses a whole batch for one value that is too long or one badly named metric,
so values are clipped to its limits here and metric names are checked before anything
is written.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

# MLflow's value-length limits (mlflow.utils.validation): longer values are clipped here,
# where MLflow would refuse the whole batch. (MLflow's client splits batches by itself.)
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_KEY = 250
# MLflow's portable metric-name alphabet (it also allows ':' except on Windows).
_METRIC_NAME = re.compile(r"^[/\w.\- ]+$")


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


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked by a trailing ``...``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def valid_metric_name(name: object) -> bool:
    """Whether MLflow takes ``name`` as a metric name on every platform: its alphabet, its
    length limit, and a normalised relative path (no ``//``, no leading ``/`` or ``..``)."""
    return (
        isinstance(name, str)
        and len(name) <= MAX_KEY
        and bool(_METRIC_NAME.match(name))
        and posixpath.normpath(name) == name
        and not name.startswith(("/", ".."))
    )


def number(value: object) -> int | float:
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
