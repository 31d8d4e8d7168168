"""The report of an experiment sweep: A/B timing table, drift verdict, decision.

``SweepReport`` is a Hydra callback (the experiment files register it under
``hydra.callbacks``). At the start of a multirun it opens the parent MLflow
run that the arms nest under; at the end it reads every job's ``arm.json`` and
``metrics.jsonl``, writes ``report.md``, ``report.json`` and PNG plots into
the sweep directory, and logs them to the parent run.

Protocol (the seeds' bench and drift plans):
- timing: per job, the mean of ``time/iteration_seconds`` with the first
  ``experiment.warmup_iterations`` dropped (and iterations that evaluated or
  wrote a checkpoint, when others remain), and the same for each phase
  (traversal, advantage training, policy training, evaluation, checkpoint);
  the 1000-iteration projection is that mean times 1000. The effect of an arm
  is paired by seed: ``1 - arm / baseline`` (positive = faster), reported as
  the mean and the min..max over seeds.
- drift: for each curve (``loss/advantage``; ``eval/exploitability`` on Kuhn
  and Leduc; ``eval/<bot>/win_rate0`` on Lost Cities) the band of the baseline
  arm at each step is [min, max] over its seeds, widened on both sides by its
  width at that step or the curve's median width, whichever is larger (seeds can
  agree by chance at one step; a band of one seed has width 0: a deterministic
  switch must then reproduce it exactly, to 1e-9 relative). An arm passes when its seed-mean
  stays inside the widened band at every step of every curve.
- decision (the seeds' tree): the compile size threshold fails -> park; AMP
  inactive (fp32 fallback) -> park, not measurable on this device; drift ->
  do not ship; effect >= ``experiment.min_speedup`` -> ship; 0 <= effect below
  it -> park (not worth the complexity); effect < 0 -> park (regression).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from lostcities.config import ExperimentConfig, TrackingConfig
from lostcities.experiments.launch import (
    ARM_FILE,
    arm_label,
    read_sweep_state,
    settings,
    write_sweep_state,
)

PHASES = {
    "traversal": "time/traversal_seconds",
    "advantage training": "time/advantage_train_seconds",
    "policy training": "time/strategy_train_seconds",
    "evaluation": "time/eval_seconds",
    "checkpoint": "time/checkpoint_seconds",
}
ITERATION = "time/iteration_seconds"
COMPILE_HIDDEN, COMPILE_LAYERS = 1024, 6  # the seeds' size threshold for torch.compile


@dataclass
class Job:
    arm: int
    seed: int
    rows: list[dict]
    config: dict = field(default_factory=dict)

    def series(self, key: str) -> dict[int, float]:
        return {r["step"]: r[key] for r in self.rows if key in r and _finite(r[key])}


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def load_jobs(sweep_dir: Path) -> list[Job]:
    jobs = []
    for arm_file in sorted(sweep_dir.glob(f"*/{ARM_FILE}")):
        job_dir = arm_file.parent
        arm = json.loads(arm_file.read_text())
        metrics = job_dir / "metrics.jsonl"
        rows = (
            [json.loads(x) for x in metrics.read_text().splitlines()] if metrics.is_file() else []
        )
        config_file = job_dir / ".hydra" / "config.yaml"
        config = (
            OmegaConf.to_container(OmegaConf.load(config_file)) if config_file.is_file() else {}
        )
        jobs.append(Job(arm["arm"], arm["seed"], rows, config))
    return jobs


def timing(job: Job, warmup: int) -> dict[str, float]:
    """Mean seconds per iteration (and per phase) after the warm-up iterations, over the
    iterations that neither evaluated nor wrote a checkpoint (when there are any)."""
    kept = [r for r in job.rows if r["step"] > warmup] or job.rows
    quiet = [r for r in kept if not {PHASES["evaluation"], PHASES["checkpoint"]} & r.keys()]
    kept = quiet or kept
    out = {"iteration": float(np.mean([r.get(ITERATION, np.nan) for r in kept]))}
    for phase, key in PHASES.items():
        out[phase] = float(np.mean([r.get(key, 0.0) for r in kept]))
    return out


def drift_metrics(jobs: list[Job]) -> list[str]:
    keys = {k for job in jobs for row in job.rows for k in row}
    chosen = ["loss/advantage"]
    if "eval/exploitability" in keys:
        chosen.append("eval/exploitability")
    chosen += sorted(k for k in keys if k.startswith("eval/") and k.endswith("/win_rate0"))
    return [k for k in chosen if k in keys]


def drift_check(base: list[Job], arm: list[Job], key: str) -> dict[str, Any]:
    """Steps where the arm's seed-mean leaves the baseline's widened band."""
    base_series = [j.series(key) for j in base]
    arm_series = [j.series(key) for j in arm]
    steps = sorted(set.intersection(*(set(s) for s in base_series + arm_series)))
    lows = [min(s[step] for s in base_series) for step in steps]
    highs = [max(s[step] for s in base_series) for step in steps]
    # A few seeds can agree by chance at one step: never trust a band narrower than the
    # curve's median band width.
    typical = float(np.median(np.subtract(highs, lows))) if steps else 0.0
    outside, band = [], []
    for step, lo, hi in zip(steps, lows, highs, strict=True):
        width = max(hi - lo, typical, 1e-9 * max(abs(lo), abs(hi), 1.0))
        mean = float(np.mean([s[step] for s in arm_series]))
        band.append((step, lo, hi, mean))
        if not lo - width <= mean <= hi + width:
            outside.append(step)
    return {"steps": len(steps), "outside": outside, "band": band, "passed": not outside}


def decide(effect: float, drift_ok: bool, min_speedup: float, gate: str | None) -> tuple[str, str]:
    if gate:
        return "park", gate
    if not drift_ok:
        return "do not ship", "the learning curve drifts outside the baseline's seed band"
    if not math.isfinite(effect):
        return "park", "no timing to compare"
    if effect >= min_speedup:
        return "ship", f"{100 * effect:.1f}% faster with no drift"
    if effect >= 0:
        return "park", f"only {100 * effect:.1f}% faster (< {100 * min_speedup:.0f}%)"
    return "park", f"a regression: {100 * -effect:.1f}% slower"


def gate_of(jobs: list[Job]) -> str | None:
    """The seeds' preconditions that make an arm's timing meaningless here."""
    for job in jobs:
        amp_active = [r["amp/active"] for r in job.rows if "amp/active" in r]
        dtype = (job.config.get("amp") or {}).get("dtype", "off")
        if dtype != "off" and amp_active and max(amp_active) == 0:
            return f"AMP {dtype} is inactive on this device (fp32 fallback): not measurable here"
        compile_cfg = job.config.get("compile") or {}
        network = job.config.get("network") or {}
        if compile_cfg.get("trainer") and (
            network.get("hidden", 0) < COMPILE_HIDDEN
            and network.get("layers", 0) < COMPILE_LAYERS
            and network.get("attention_layers", 0) == 0
        ):
            return (
                "compile's size threshold fails (hidden < 1024, layers < 6, no attention): "
                "park, measured anyway"
            )
    return None


def build_report(exp: ExperimentConfig, sweep_dir: Path, command: list[str]) -> dict[str, Any]:
    """Everything the report says, as plain data (written as report.json)."""
    jobs = load_jobs(sweep_dir)
    if not jobs:
        raise ValueError(f"{sweep_dir}: no finished experiment jobs to report on")
    arms = sorted({j.arm for j in jobs})
    by_arm = {a: [j for j in jobs if j.arm == a] for a in arms}
    base = by_arm.get(exp.baseline) or by_arm[arms[0]]
    base_time = {j.seed: timing(j, exp.warmup_iterations)["iteration"] for j in base}
    curves = drift_metrics(jobs)
    report: dict[str, Any] = {
        "name": exp.name,
        "kind": exp.kind,
        "sweep_dir": str(sweep_dir),
        "command": command,
        "seeds": sorted({j.seed for j in jobs}),
        "warmup_iterations": exp.warmup_iterations,
        "min_speedup": exp.min_speedup,
        "curves": curves,
        "arms": [],
    }
    for a in arms:
        runs = by_arm[a]
        times = [timing(j, exp.warmup_iterations) for j in runs]
        mean = {k: float(np.mean([t[k] for t in times])) for k in times[0]}
        effects = [
            1 - timing(j, exp.warmup_iterations)["iteration"] / base_time[j.seed]
            for j in runs
            if j.seed in base_time
        ]
        drift = {key: drift_check(base, runs, key) for key in curves}
        drift_ok = all(d["passed"] for d in drift.values())
        is_base = runs is base
        effect = float(np.mean(effects)) if effects else float("nan")
        verdict = (
            ("baseline", "")
            if is_base
            else decide(
                effect, drift_ok, exp.min_speedup, gate_of(runs) if exp.kind == "ab" else None
            )
        )
        if exp.kind == "drift" and not is_base:
            verdict = ("pass", "within the band") if drift_ok else ("fail", "drifts")
        report["arms"].append(
            {
                "arm": a,
                "label": arm_label(exp, a),
                "seeds": [j.seed for j in runs],
                "iterations": [len(j.rows) for j in runs],
                "mean_seconds": mean,
                "iteration_seconds_by_seed": [t["iteration"] for t in times],
                "projection_1000_s": 1000 * mean["iteration"],
                "effect_mean": effect,
                "effect_min": float(min(effects)) if effects else float("nan"),
                "effect_max": float(max(effects)) if effects else float("nan"),
                "drift": {
                    k: {x: d[x] for x in ("steps", "outside", "passed")} for k, d in drift.items()
                },
                "drift_bands": {k: d["band"] for k, d in drift.items()},
                "drift_passed": drift_ok,
                "verdict": verdict[0],
                "reason": verdict[1],
            }
        )
    return report


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# {report['name']} ({report['kind']})",
        "",
        f"Sweep `{report['sweep_dir']}`; "
        f"command overrides: `{' '.join(report['command']) or '-'}`; "
        f"seeds {report['seeds']}; first {report['warmup_iterations']} iteration(s) dropped from "
        "timings. Every job ran in its own process, one at a time, seeds interleaved.",
        "",
        "## Timing",
        "",
        "| arm | iteration s (by seed) | "
        + " | ".join(PHASES)
        + " | 1000-iteration projection | effect vs baseline (min..max) |",
        "| --- | --- | " + " | ".join("---:" for _ in PHASES) + " | ---: | ---: |",
    ]
    for arm in report["arms"]:
        mean = arm["mean_seconds"]
        total = max(mean["iteration"], 1e-12)
        phases = " | ".join(f"{mean[p]:.3f} ({100 * mean[p] / total:.0f}%)" for p in PHASES)
        by_seed = ", ".join(f"{x:.3f}" for x in arm["iteration_seconds_by_seed"])
        effect = (
            "-"
            if arm["verdict"] == "baseline"
            else f"{100 * arm['effect_mean']:+.1f}% ({100 * arm['effect_min']:+.1f}.."
            f"{100 * arm['effect_max']:+.1f})"
        )
        lines.append(
            f"| {arm['label']} | {mean['iteration']:.3f} ({by_seed}) | {phases} | "
            f"{arm['projection_1000_s'] / 60:.1f} min | {effect} |"
        )
    lines += [
        "",
        "Effect = 1 - arm / baseline per seed (positive: faster).",
        "",
        "## Drift",
        "",
        "Rule: at every logged step of each curve, the arm's mean over seeds lies inside the "
        "baseline arm's [min, max] over seeds widened on each side by its width at that step "
        "or the curve's median width, whichever is larger.",
        "",
        "| arm | " + " | ".join(report["curves"]) + " | passed |",
        "| --- | " + " | ".join("---" for _ in report["curves"]) + " | --- |",
    ]
    for arm in report["arms"]:
        cells = [f"{len(d['outside'])}/{d['steps']} steps outside" for d in arm["drift"].values()]
        lines.append(f"| {arm['label']} | " + " | ".join(cells) + f" | {arm['drift_passed']} |")
    lines += ["", "## Verdict", ""]
    for arm in report["arms"]:
        if arm["verdict"] != "baseline":
            lines.append(f"- **{arm['label']}**: {arm['verdict']}: {arm['reason']}")
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [a["label"] for a in report["arms"]]
    bottom = np.zeros(len(labels))
    for phase in PHASES:
        values = np.array([a["mean_seconds"][phase] for a in report["arms"]])
        ax.bar(labels, values, bottom=bottom, label=phase)
        bottom += values
    ax.set_ylabel("seconds per iteration (warm-up dropped)")
    ax.set_title(f"{report['name']}: time per iteration by phase")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out_dir / "timing.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)

    curves = report["curves"]
    if curves:
        fig, axes = plt.subplots(1, len(curves), figsize=(4.5 * len(curves), 3.5), squeeze=False)
        for ax, key in zip(axes[0], curves, strict=True):
            for arm in report["arms"]:
                band = np.array(arm["drift_bands"][key]) if arm["drift_bands"][key] else None
                if band is None:
                    continue
                steps, lo, hi, mean = band.T
                if arm["verdict"] == "baseline":
                    width = hi - lo
                    ax.fill_between(steps, lo - width, hi + width, alpha=0.2, label="baseline band")
                ax.plot(steps, mean, marker=".", label=arm["label"])
            ax.set_title(key, fontsize=9)
            ax.set_xlabel("iteration")
            ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(out_dir / "drift.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths


class SweepReport(Callback):
    """Hydra callback of the experiment sweeps (see conf/experiment/)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from lostcities.tracking import start_parent_run

        exp, tracking = _typed(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        command = settings(list(config.hydra.overrides.task))
        name = f"{exp.name}" + (f" [{' '.join(command)}]" if command else "")
        parent = start_parent_run(
            tracking, name, {"experiment": exp.name, "sweep_dir": str(sweep_dir)}
        )
        write_sweep_state(sweep_dir, {"parent_run_id": parent, "name": name})

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from lostcities.tracking import finish_parent_run

        exp, tracking = _typed(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        report = build_report(exp, sweep_dir, settings(list(config.hydra.overrides.task)))
        (sweep_dir / "report.json").write_text(json.dumps(report, indent=1))
        (sweep_dir / "report.md").write_text(render_markdown(report))
        files = [sweep_dir / "report.md", sweep_dir / "report.json", *plot(report, sweep_dir)]
        metrics = {}
        for arm in report["arms"]:
            metrics[f"arm{arm['arm']}/iteration_seconds"] = arm["mean_seconds"]["iteration"]
            metrics[f"arm{arm['arm']}/effect"] = arm["effect_mean"]
            metrics[f"arm{arm['arm']}/drift_passed"] = float(arm["drift_passed"])
        finish_parent_run(
            tracking, read_sweep_state(sweep_dir).get("parent_run_id"), metrics, files
        )
        print(f"report: {sweep_dir / 'report.md'}", flush=True)
        print(render_markdown(report).split("## Verdict")[-1].strip(), flush=True)


def _typed(config: DictConfig) -> tuple[ExperimentConfig, TrackingConfig]:
    return OmegaConf.to_object(config.experiment), OmegaConf.to_object(config.tracking)
