"""Parity: whether an arm's learning curves stay within the baseline's seed noise.

The curves are ``loss/advantage``, ``loss/strategy``, ``eval/exploitability`` (Kuhn,
Leduc) and ``eval/<bot>/win_rate0`` (Lost Cities), compared at the steps every job
evaluated at (a curve logged without evaluations: every step every job logged). "Within
seed noise", the design notes' words, is made a test: at each compared step the arm's
seed mean differs from the baseline's by less than the two-sample t interval on the
pooled seed-to-seed spread, at family-wise level ``PARITY_ALPHA`` over all the arm's
comparisons (Bonferroni), so that a switch which changes nothing fails at a known rate;
with one seed per arm there is no spread, and a deterministic switch must reproduce the
curves. A curve with no step to compare, a non-finite value, a skipped non-finite loss or
a collapsed fp16 loss scale fails parity too.

Two other bands are counted beside it for comparison: the baseline's [min, max] over
seeds, and that range widened by the larger of its width and the curve's median width.
How often each fails a switch that changes nothing, or a shifted one, is measured in
experiments/perf_switches/README.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lostcities.experiments.jobs import PHASES, Job

# the AMP note: a GradScaler scale that stays <= 16 for > 10 iterations has collapsed.
SCALE_FLOOR, SCALE_PATIENCE = 16.0, 10
RELATIVE_TOLERANCE = 1e-9  # a band of width 0 (one seed) still admits float noise
PARITY_ALPHA = 0.05  # an arm that changes nothing fails parity at most this often
DRIFT_FIELDS = ("steps", "outside", "outside_range", "outside_widened", "nonfinite", "passed")


def drift_metrics(jobs: list[Job]) -> list[str]:
    """The curves parity compares, of those any job logged."""
    keys = {k for job in jobs for row in job.rows for k in row}
    chosen = ["loss/advantage", "loss/strategy", "eval/exploitability"]
    chosen += sorted(k for k in keys if k.startswith("eval/") and k.endswith("/win_rate0"))
    return [k for k in chosen if k in keys]


def evaluated_steps(jobs: list[Job]) -> list[int]:
    """The steps at which every job evaluated."""
    return sorted(
        set.intersection(*({r["step"] for r in j.rows if PHASES["evaluation"] in r} for j in jobs))
    )


def compared_steps(jobs: list[Job], key: str) -> list[int]:
    """The steps at which ``key`` is compared: those every job logged, thinned to the steps
    every job evaluated at (the protocols' checkpoints) where there are any, else every
    common step."""
    steps = set.intersection(*({r["step"] for r in j.rows if key in r} for j in jobs))
    return sorted(steps & set(evaluated_steps(jobs)) or steps)


def seed_noise(base: list[float], arm: list[float], comparisons: int) -> float:
    """Half-width of the band the difference of the arm's and the baseline's seed means
    stays inside when the switch changes nothing: the two-sample t interval on the pooled
    seed-to-seed spread, at family-wise level ``PARITY_ALPHA`` over ``comparisons``
    (Bonferroni). With one seed per arm (no spread to pool) the curves must agree to
    ``RELATIVE_TOLERANCE``: a deterministic switch reproduces them."""
    from scipy.stats import t as student_t

    values = np.array(base + arm, dtype=np.float64)
    slack = RELATIVE_TOLERANCE * max(float(np.abs(values).max(initial=0.0)), 1.0)
    dof = len(base) + len(arm) - 2
    if dof < 1:
        return slack
    spread = (np.var(base) * len(base) + np.var(arm) * len(arm)) / dof  # pooled variance
    quantile = float(student_t.ppf(1 - PARITY_ALPHA / (2 * max(comparisons, 1)), dof))
    return quantile * math.sqrt(spread * (1 / len(base) + 1 / len(arm))) + slack


def drift_check(base: list[Job], arm: list[Job], key: str, comparisons: int) -> dict[str, Any]:
    """Steps where the arm's seed mean leaves the baseline's seed-noise band
    (:func:`seed_noise`, ``comparisons`` judged together), the steps two earlier rules
    would flag there (for comparison: the baseline's [min, max] over seeds, and that range
    widened by the larger of its width and the curve's median width), and the arm's
    non-finite values of the curve. A curve with no step to compare does not pass: nothing
    was checked."""
    base_series = [j.series(key) for j in base]
    arm_series = [j.series(key) for j in arm]
    nonfinite = sum(not math.isfinite(v) for s in arm_series for v in s.values())
    steps = [
        step
        for step in compared_steps(base + arm, key)
        if all(math.isfinite(s[step]) for s in base_series + arm_series)
    ]
    lows = [min(s[step] for s in base_series) for step in steps]
    highs = [max(s[step] for s in base_series) for step in steps]
    typical = float(np.median(np.subtract(highs, lows))) if steps else 0.0
    outside, range_outside, widened_outside, band = [], [], [], []
    for step, lo, hi in zip(steps, lows, highs, strict=True):
        base_values = [s[step] for s in base_series]
        arm_values = [s[step] for s in arm_series]
        centre, mean = float(np.mean(base_values)), float(np.mean(arm_values))
        half = seed_noise(base_values, arm_values, comparisons)
        band.append((step, centre - half, centre + half, mean))
        if abs(mean - centre) > half:
            outside.append(step)
        slack = RELATIVE_TOLERANCE * max(abs(lo), abs(hi), 1.0)
        if not lo - slack <= mean <= hi + slack:
            range_outside.append(step)
        width = max(hi - lo, typical, slack)
        if not lo - width <= mean <= hi + width:
            widened_outside.append(step)
    return {
        "steps": len(steps),
        "outside": outside,
        "outside_range": range_outside,
        "outside_widened": widened_outside,
        "nonfinite": nonfinite,
        "band": band,
        "passed": bool(steps) and not outside and not nonfinite,
    }


def drift_checks(base: list[Job], arm: list[Job], curves: list[str]) -> dict[str, dict]:
    """:func:`drift_check` of every curve, all of the arm's comparisons judged together."""
    comparisons = sum(len(compared_steps(base + arm, key)) for key in curves)
    return {key: drift_check(base, arm, key, comparisons) for key in curves}


def amp_health(job: Job) -> list[str]:
    """What the job's AMP metrics say against parity: skipped non-finite losses, and an
    fp16 loss scale that collapsed."""
    problems = []
    skipped = max(job.series("amp/nonfinite_loss_count").values(), default=0.0)
    if skipped > 0:
        problems.append(f"seed {job.seed}: {skipped:g} non-finite loss(es) skipped")
    active = job.series("amp/active").values()
    if (job.config.get("amp") or {}).get("dtype") == "fp16" and active and max(active) > 0:
        low, longest = 0, 0
        for _, scale in sorted(job.series("amp/grad_scale").items()):
            low = low + 1 if scale <= SCALE_FLOOR else 0
            longest = max(longest, low)
        if longest > SCALE_PATIENCE:
            problems.append(
                f"seed {job.seed}: fp16 loss scale <= {SCALE_FLOOR:g} for {longest} "
                f"iterations (collapsed: more than {SCALE_PATIENCE})"
            )
    return problems


def parity_problems(drift: dict[str, dict[str, Any]], jobs: list[Job]) -> list[str]:
    """Why the arm (``drift``: its :func:`drift_checks`; ``jobs``: its jobs) fails parity,
    one phrase each; none: parity holds."""
    problems = []
    for key, d in drift.items():
        if not d["steps"]:
            problems.append(
                f"{key}: nothing compared (no step at which every job logged it, finite)"
            )
        if d["nonfinite"]:
            problems.append(f"{key}: {d['nonfinite']} non-finite value(s)")
        if d["outside"]:
            problems.append(
                f"{key}: {len(d['outside'])}/{d['steps']} steps outside the baseline's "
                "seed-noise band"
            )
    return problems + [p for job in jobs for p in amp_health(job)]


def parity_entry(drift: dict[str, dict[str, Any]], problems: list[str]) -> dict[str, Any]:
    """The parity part of an arm's report entry."""
    return {
        "drift": {key: {x: d[x] for x in DRIFT_FIELDS} for key, d in drift.items()},
        "drift_bands": {key: d["band"] for key, d in drift.items()},
        "drift_passed": all(d["passed"] for d in drift.values()),
        "parity_problems": problems,
        "parity_passed": not problems,
    }
