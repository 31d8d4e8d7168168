"""The learning-curve PNG of a run, drawn from its ``metrics.jsonl``.

One panel per family of metrics (exploitability, win rates, score differences, losses,
traversal nodes); a panel whose metrics the run did not log is left out. matplotlib is
imported here only, and only when a curve is drawn.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
from pathlib import Path

CURVE_FILE = "learning_curve.png"

# Learning-curve panels: (title, fnmatch patterns). Every metric matching a
# panel's patterns is drawn in it; panels with no matching metric are skipped.
CURVE_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("exploitability", ("eval/exploitability",)),
    ("win rate, seat 0", ("eval/*/win_rate0",)),
    ("best-response margin (points)", ("eval/br/score_diff",)),
    ("against iteration 1 (win rate)", ("eval/h2h/win_rate",)),
    ("score difference", ("eval/*/score_diff",)),
    ("advantage loss", ("loss/advantage", "loss/advantage/*")),
    ("strategy loss", ("loss/strategy", "loss/strategy/*")),
    ("traversal nodes", ("traversal/nodes",)),
)


def plot_learning_curve(
    metrics_path: str | os.PathLike[str], out_path: str | os.PathLike[str]
) -> Path | None:
    """Draw the :data:`CURVE_PANELS` found in a metrics.jsonl into a PNG; None if none found.

    Unparsable lines (a line cut by a crash) are skipped; when a step appears
    twice (a resumed run appending to the file) the later value wins.
    """
    series = read_series(Path(metrics_path))
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


def read_series(path: Path) -> dict[str, dict[int, float]]:
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
