"""The report of an experiment sweep, as plain data: per arm its timing, its parity with the
baseline arm and its verdict.

The steps: read the sweep's jobs and time them (jobs.py), compare each arm's learning
curves with the baseline's seed noise (statistics.py), and judge the arm by the protocol of
the experiment's kind (protocols.py). render.py writes the result as markdown and plots;
callback.py runs all of it when a sweep ends.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from lostcities.config import ExperimentConfig
from lostcities.experiments.jobs import (
    Job,
    concurrency,
    jobs_by_arm,
    load_jobs,
    timing,
    timing_entry,
    timings,
)
from lostcities.experiments.launch import arm_label
from lostcities.experiments.protocols import PROTOCOLS, ArmEvidence, Protocol
from lostcities.experiments.statistics import (
    drift_checks,
    drift_metrics,
    parity_entry,
    parity_problems,
)


def build_report(exp: ExperimentConfig, sweep_dir: Path, command: list[str]) -> dict[str, Any]:
    """Everything the report says, as plain data (written as report.json)."""
    jobs = load_jobs(sweep_dir)
    if not jobs:
        raise ValueError(f"{sweep_dir}: no finished experiment jobs to report on")
    by_arm = jobs_by_arm(jobs)
    base = by_arm.get(exp.baseline) or next(iter(by_arm.values()))
    protocol = PROTOCOLS[exp.kind]
    curves = drift_metrics(jobs)
    ran = concurrency(jobs)
    return {
        "name": exp.name,
        "kind": exp.kind,
        "setting": exp.setting,
        "sweep_dir": str(sweep_dir),
        "command": command,
        "seeds": sorted({j.seed for j in jobs}),
        "warmup_iterations": exp.warmup_iterations,
        "protocol": dataclasses.asdict(protocol),
        "curves": curves,
        "concurrency": ran,
        "arms": [arm_entry(exp, protocol, runs, base, curves, ran) for runs in by_arm.values()],
    }


def arm_entry(
    exp: ExperimentConfig,
    protocol: Protocol,
    runs: list[Job],
    base: list[Job],
    curves: list[str],
    ran: dict[str, Any],
) -> dict[str, Any]:
    """One arm's part of the report: ``runs`` (its jobs) timed, compared on ``curves`` with
    the baseline's jobs ``base``, and judged by ``protocol`` (``ran``: how the sweep's jobs
    ran)."""
    times = [timing(j, exp.warmup_iterations) for j in runs]
    base_times = timings(base, exp.warmup_iterations)
    timed = timing_entry(runs, times, base_times, protocol.measure)
    drift = drift_checks(base, runs, curves)
    parity = parity_problems(drift, runs)
    if runs is base:
        verdict = ("baseline", "")
    else:
        evidence = ArmEvidence(
            runs=runs,
            jobs=runs + base,
            times=times + list(base_times.values()),
            effect=timed["effect_mean"],
            drift=drift,
            parity=parity,
            ran=ran,
        )
        verdict = protocol.verdict(exp, evidence)
    return {
        "arm": runs[0].arm,
        "label": arm_label(exp, runs[0].arm),
        **timed,
        **parity_entry(drift, parity),
        "verdict": verdict[0],
        "reason": verdict[1],
    }
