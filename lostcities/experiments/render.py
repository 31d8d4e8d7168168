"""A sweep's report (report.build_report's plain data) as markdown and PNG plots: the
setting and rule applied, the timing table, the parity table and each arm's verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lostcities.experiments.jobs import MEASURES, PHASES, TRAINING
from lostcities.experiments.statistics import PARITY_ALPHA


def protocol_text(report: dict[str, Any]) -> str:
    """The setting that ran and the rule the verdicts applied, in one paragraph."""
    setting = {
        "short": "the short setting (a CPU smoke run: nothing ships or passes on it)",
        "reduced": "the reduced setting (the protocol's length, less work per iteration: "
        "nothing ships or passes on it)",
    }.get(report["setting"], "the full setting (the notes' protocol)")
    return f"Ran {setting}. Rule of kind `{report['kind']}`: {report['protocol']['rule']}."


def how_jobs_ran(ran: dict[str, Any]) -> str:
    """One sentence from :func:`jobs.concurrency`'s record."""
    if ran["overlapping"]:
        return (
            f"Every job ran in its own process; {', '.join(ran['overlapping'])} ran at the same "
            "time as another job on one machine, so their timings are not comparable."
        )
    if not ran["recorded"]:
        return "Every job ran in its own process."
    hosts = ran["hosts"]
    where = "one machine" if len(hosts) == 1 else f"{len(hosts)} machines ({', '.join(hosts)})"
    return f"Every job ran in its own process, one at a time on {where}, seeds interleaved."


def render_markdown(report: dict[str, Any]) -> str:
    """report.md: how the sweep ran and the rule it was judged by, then timing, parity and
    each arm's verdict."""
    lines = [
        f"# {report['name']} ({report['kind']}, {report['setting']} setting)",
        "",
        f"Sweep `{report['sweep_dir']}`; "
        f"command overrides: `{' '.join(report['command']) or '-'}`; "
        f"seeds {report['seeds']}; first {report['warmup_iterations']} iteration(s) dropped from "
        "timings, and every iteration that evaluated or wrote a checkpoint. "
        + how_jobs_ran(report["concurrency"]),
        "",
        protocol_text(report),
        "",
        *_timing_section(report["arms"]),
        "",
        *_parity_section(report["curves"], report["arms"]),
        "",
        "## Verdict",
        "",
    ]
    for arm in report["arms"]:
        if arm["verdict"] != "baseline":
            lines.append(f"- **{arm['label']}**: {arm['verdict']}: {arm['reason']}")
    return "\n".join(lines) + "\n"


def _timing_section(arms: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Timing",
        "",
        "| arm | iteration s (by seed) | timed iterations | "
        + " | ".join(PHASES)
        + " | 1000-iteration projection | effect on iteration | "
        "effect on advantage + policy training |",
        "| --- | --- | --- | " + " | ".join("---:" for _ in PHASES) + " | ---: | ---: | ---: |",
    ]
    for arm in arms:
        mean = arm["mean_seconds"]
        total = max(mean["iteration"], 1e-12)
        phases = " | ".join(f"{mean[p]:.3f} ({100 * mean[p] / total:.0f}%)" for p in PHASES)
        by_seed = ", ".join(f"{x:.3f}" for x in arm["iteration_seconds_by_seed"])
        effects = [
            "-"
            if arm["verdict"] == "baseline"
            else f"{100 * e['mean']:+.1f}% ({100 * e['min']:+.1f}..{100 * e['max']:+.1f})"
            for e in (arm["effects"][m] for m in MEASURES)
        ]
        untimed = [p for p in TRAINING if p in arm["untimed_phases"]]
        if untimed:  # counted as 0 s where missing: the training effect is not a measurement
            effects[1] += f" ({', '.join(untimed)} not timed)"
        lines.append(
            f"| {arm['label']} | {mean['iteration']:.3f} ({by_seed}) | "
            f"{', '.join(map(str, arm['timed_iterations']))} | {phases} | "
            f"{arm['projection_1000_s'] / 60:.1f} min | {effects[0]} | {effects[1]} |"
        )
    return lines + [
        "",
        "Effect = 1 - arm / baseline per seed, mean (min..max) over seeds; positive: faster.",
    ]


def _parity_section(curves: list[str], arms: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Parity",
        "",
        "Rule: at each compared step of each curve (the evaluation steps, else every "
        "step), the arm's mean over seeds differs from the baseline's by less than seed "
        f"noise: the two-sample t interval on the pooled seed spread, family-wise "
        f"{100 * PARITY_ALPHA:.0f}% over all the arm's comparisons (one seed per arm: the "
        "curves must agree exactly); a curve with no step to compare, a non-finite value, a "
        "skipped non-finite loss or a collapsed fp16 loss scale fails. In brackets, for "
        "comparison, the steps outside the baseline's [min, max] over seeds, and outside that "
        "range widened by the larger of its width and the curve's median width.",
        "",
        "| arm | " + " | ".join(curves) + " | passed |",
        "| --- | " + " | ".join("---" for _ in curves) + " | --- |",
    ]
    for arm in arms:
        cells = [_parity_cell(d) for d in arm["drift"].values()]
        lines.append(f"| {arm['label']} | " + " | ".join(cells) + f" | {arm['parity_passed']} |")
    return lines


def _parity_cell(d: dict[str, Any]) -> str:
    if not d["steps"]:
        return "no step to compare" + (f", {d['nonfinite']} non-finite" if d["nonfinite"] else "")
    return (
        f"{len(d['outside'])}/{d['steps']} steps outside "
        f"({len(d['outside_range'])}, {len(d['outside_widened'])})"
        + (f", {d['nonfinite']} non-finite" if d["nonfinite"] else "")
    )


def plot(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """timing.png (each arm's seconds per timed iteration by phase) and, where the sweep
    logged curves, drift.png (each curve's arm means over the baseline's seed-noise band)."""
    paths = [_plot_timing(report, out_dir / "timing.png")]
    if report["curves"]:
        paths.append(_plot_drift(report, out_dir / "drift.png"))
    return paths


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # writes files only: no display needed, none assumed
    import matplotlib.pyplot as plt

    return plt


def _plot_timing(report: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [a["label"] for a in report["arms"]]
    bottom = np.zeros(len(labels))
    for phase in PHASES:
        values = np.array([a["mean_seconds"][phase] for a in report["arms"]])
        ax.bar(labels, values, bottom=bottom, label=phase)
        bottom += values
    ax.set_ylabel("seconds per timed iteration")
    ax.set_title(f"{report['name']}: time per iteration by phase")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_drift(report: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    curves = report["curves"]
    fig, axes = plt.subplots(1, len(curves), figsize=(4.5 * len(curves), 3.5), squeeze=False)
    for ax, key in zip(axes[0], curves, strict=True):
        for arm in report["arms"]:
            if not arm["drift_bands"][key]:
                continue
            steps, lo, hi, mean = np.array(arm["drift_bands"][key]).T
            if arm["verdict"] == "baseline":
                ax.fill_between(steps, lo, hi, alpha=0.2, label="baseline seed-noise band")
            ax.plot(steps, mean, marker=".", label=arm["label"])
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("iteration")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
