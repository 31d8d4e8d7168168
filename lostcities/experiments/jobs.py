"""A finished sweep's jobs as the report reads them: their records, timings and how they ran.

Each job directory holds ``arm.json`` (arm, seed, machine, start and end: launch.py writes
it), ``metrics.jsonl`` (one row per iteration) and ``.hydra/config.yaml``. A job's timed
iterations are those after the first ``experiment.warmup_iterations`` that neither
evaluated nor wrote a checkpoint; per job the report takes the mean of
``time/iteration_seconds`` and of each phase over them, and the 1000-iteration projection
is the iteration mean times 1000. An arm's effect is paired by seed, ``1 - arm /
baseline`` (positive = faster), so that what a seed costs on its own cancels out. Paired
timings compare like with like only if every job ran on one machine, one at a time:
:func:`concurrency` reads that from the jobs' records rather than trusting the launcher's
settings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from lostcities.experiments.launch import ARM_FILE, job_order

PHASES = {
    "traversal": "time/traversal_seconds",
    "advantage training": "time/advantage_train_seconds",
    "policy training": "time/strategy_train_seconds",
    "evaluation": "time/eval_seconds",
    "checkpoint": "time/checkpoint_seconds",
}
ITERATION = "time/iteration_seconds"
TRAINING = ("advantage training", "policy training")  # the phases AMP wraps
UNTIMED = frozenset({PHASES["evaluation"], PHASES["checkpoint"]})  # such iterations: not timed
MEASURES = {"iteration": "the 1000-iteration projection", "training": "advantage + policy training"}


@dataclass
class Job:
    """One finished job of a sweep: its arm, seed, metrics rows and composed config."""

    arm: int
    seed: int
    rows: list[dict]
    config: dict = field(default_factory=dict)
    name: str = ""  # the job directory's name
    host: str | None = None  # where and when it ran (None: not recorded)
    started: float | None = None
    ended: float | None = None

    def series(self, key: str) -> dict[int, float]:
        """Every logged value of ``key`` by step, non-finite ones included (parity counts
        them rather than reading past them)."""
        return {r["step"]: float(r[key]) for r in self.rows if _number(r.get(key))}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load_jobs(sweep_dir: Path) -> list[Job]:
    """Every job of the sweep that wrote its ``arm.json``, in directory order."""
    return [_load_job(arm_file.parent) for arm_file in sorted(sweep_dir.glob(f"*/{ARM_FILE}"))]


def _load_job(job_dir: Path) -> Job:
    arm = json.loads((job_dir / ARM_FILE).read_text())
    metrics = job_dir / "metrics.jsonl"
    rows = [json.loads(x) for x in metrics.read_text().splitlines()] if metrics.is_file() else []
    config_file = job_dir / ".hydra" / "config.yaml"
    config = OmegaConf.to_container(OmegaConf.load(config_file)) if config_file.is_file() else {}
    return Job(
        arm["arm"],
        arm["seed"],
        rows,
        config,
        job_dir.name,
        arm.get("host"),
        arm.get("started"),
        arm.get("ended"),
    )


def jobs_by_arm(jobs: list[Job]) -> dict[int, list[Job]]:
    """The jobs of each arm, arms in index order."""
    return {a: [j for j in jobs if j.arm == a] for a in sorted({j.arm for j in jobs})}


# --- timing ------------------------------------------------------------------------


@dataclass
class Timing:
    """A job's mean seconds over its timed iterations, and what those iterations lacked."""

    seconds: dict[str, float]
    """Mean seconds per iteration: ``iteration``, each phase, and ``training`` (advantage +
    policy training)."""
    timed: int
    """Iterations after the warm-up that neither evaluated nor wrote a checkpoint."""
    untimed_phases: list[str]
    """Phases (traversal, advantage and policy training) missing from some iteration the
    means are over: their mean counts those iterations as 0 s."""


def timing(job: Job, warmup: int) -> Timing:
    """The job's timing over its timed iterations. A job with none (a short run) still gets
    means, over the iterations after the warm-up or else all of them, and ``timed`` = 0
    tells the verdict it cannot ship."""
    after = [r for r in job.rows if r["step"] > warmup]
    timed = [r for r in after if not UNTIMED & r.keys()]
    rows = timed or after or job.rows
    seconds = {"iteration": float(np.mean([r.get(ITERATION, np.nan) for r in rows]))}
    for phase, key in PHASES.items():
        seconds[phase] = float(np.mean([r.get(key, 0.0) for r in rows]))
    seconds["training"] = sum(seconds[phase] for phase in TRAINING)
    untimed = [
        phase
        for phase, key in PHASES.items()
        if key not in UNTIMED and not (rows and all(key in r for r in rows))
    ]
    return Timing(seconds, len(timed), untimed)


def timings(jobs: list[Job], warmup: int) -> dict[int, Timing]:
    """Each job's timing by seed."""
    return {j.seed: timing(j, warmup) for j in jobs}


def paired_effects(arm: list[Timing], seeds: list[int], base: dict[int, Timing], measure: str):
    """``1 - arm / baseline`` on ``measure`` for every seed both arms ran (NaN where the
    baseline measured no time: a phase that was never logged)."""
    return [
        1 - t.seconds[measure] / base[seed].seconds[measure]
        if base[seed].seconds[measure] > 0
        else float("nan")
        for t, seed in zip(arm, seeds, strict=True)
        if seed in base
    ]


def spread(values: list[float]) -> dict[str, float]:
    """Mean, min and max of ``values`` (NaN for none)."""
    nan = float("nan")
    if not values:
        return {"mean": nan, "min": nan, "max": nan}
    return {"mean": float(np.mean(values)), "min": min(values), "max": max(values)}


def timing_entry(
    runs: list[Job], times: list[Timing], base: dict[int, Timing], judged: str
) -> dict[str, Any]:
    """The timing part of an arm's report entry: ``runs`` and their ``times`` against the
    baseline's timings by seed, the effect headlined on the measure ``judged``."""
    seeds = [j.seed for j in runs]
    mean = {k: float(np.mean([t.seconds[k] for t in times])) for k in times[0].seconds}
    effects = {m: spread(paired_effects(times, seeds, base, m)) for m in MEASURES}
    return {
        "seeds": seeds,
        "iterations": [len(j.rows) for j in runs],
        "timed_iterations": [t.timed for t in times],
        "untimed_phases": sorted({p for t in times for p in t.untimed_phases}),
        "mean_seconds": mean,
        "iteration_seconds_by_seed": [t.seconds["iteration"] for t in times],
        "projection_1000_s": 1000 * mean["iteration"],
        "judged_on": judged,
        "effects": effects,
        "effect_mean": effects[judged]["mean"],
        "effect_min": effects[judged]["min"],
        "effect_max": effects[judged]["max"],
    }


# --- how the jobs ran --------------------------------------------------------------


def concurrency(jobs: list[Job]) -> dict[str, Any]:
    """How the jobs ran, from what each recorded: ``hosts`` (the machines), ``overlapping``
    (the jobs that ran at the same time as another job on the same machine: their
    timings are not comparable) and ``recorded`` (every job recorded it)."""
    ran = [j for j in jobs if None not in (j.host, j.started, j.ended)]
    overlapping = {
        a.name
        for a in ran
        for b in ran
        if a is not b and a.host == b.host and a.started < b.ended and b.started < a.ended
    }
    return {
        "hosts": sorted({j.host for j in ran}),
        "overlapping": sorted(overlapping, key=job_order),
        "recorded": len(ran) == len(jobs),
    }
