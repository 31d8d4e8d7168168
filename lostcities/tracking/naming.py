"""Names of MLflow runs: what was trained, how the command line changed it, and a suffix
that keeps two runs of one command apart."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence

from lostcities.tracking.values import clip

# Tags whose values make the run name when the caller gives none, in this order.
RUN_NAME_TAGS = ("game", "network")

# Overrides that never go into a run name: already in it (game, network, seed), or
# saying nothing about what was trained.
_NAME_SKIP_KEYS = frozenset({"game", "network", "run.seed", "run.resume", "run.progress"})
_NAME_SKIP_PREFIXES = ("tracking.", "hydra.")
_NAME_VALUE_CHARS = 24
_NAME_OVERRIDE_CHARS = 100


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
        parsed.append((key, clip(value, _NAME_VALUE_CHARS)))
    lasts = [key.rsplit(".", 1)[-1] for key, _ in parsed]
    shown = [
        f"{last if lasts.count(last) == 1 else key}={value}"
        for (key, value), last in zip(parsed, lasts, strict=True)
    ]
    parts = [base]
    if shown:
        parts.append(clip(",".join(shown), _NAME_OVERRIDE_CHARS))
    parts.append(time.strftime("%m%d-%H%M%S") + "-" + secrets.token_hex(2))
    return "-".join(parts)


def choose_run_name(
    configured: str | None, given: str | None, tags: Mapping[str, str]
) -> str | None:
    """The name of a new run: ``configured`` (``tracking.run_name``), else ``given`` (the
    caller's, see :func:`default_run_name`), else the values of :data:`RUN_NAME_TAGS`;
    None lets MLflow pick a random name."""
    if configured:
        return configured
    if given:
        return given
    parts = [tags[k] for k in RUN_NAME_TAGS if tags.get(k)]
    return "-".join(parts) or None
