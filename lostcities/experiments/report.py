"""The report of an experiment sweep: A/B timing table, parity check, verdict.

``SweepReport`` is a Hydra callback (the experiment files register it under
``hydra.callbacks``). At the start of a multirun it opens the parent MLflow
run that the arms nest under; at the end it reads every job's ``arm.json``,
``metrics.jsonl`` and ``.hydra/config.yaml``, writes ``report.md``,
``report.json`` and PNG plots into the sweep directory, and logs them to the
parent run. Both hooks run in the launching process, also when a launcher plugin runs
the jobs elsewhere; then a job that failed is reported at the end, in place of the
report (lostcities/experiments/launch.py).

The rules are the design notes' for torch.compile of the trainer and for trainer AMP
(their bench protocols), with their numbers in :data:`PROTOCOLS` and the constants below:

- timing: a job's timed iterations are those after the first
  ``experiment.warmup_iterations`` that neither evaluated nor wrote a checkpoint;
  per job the mean of ``time/iteration_seconds`` and of each phase over them; the
  1000-iteration projection is the iteration mean times 1000. An arm's effect is
  paired by seed, ``1 - arm / baseline`` (positive = faster), on the measure its
  kind judges, reported as the mean and the min..max over seeds. The pairs compare
  like with like only if every job of the arm and of the baseline ran on one machine,
  one at a time, as each job's ``arm.json`` records (machine, start, end): otherwise
  the arm cannot ship (a launcher plugin runs jobs at once unless
  ``hydra.sweeper.max_batch_size=1``, the timing experiments' default).
- kind ``ab`` (torch.compile of the trainer, the compile plan's target A, or any
  switch judged on iteration time): ships at >= 5% on the 1000-iteration projection.
  It needs >= 8 timed iterations per job with iteration 1 dropped; with fewer it
  cannot ship, and the verdict says so. An arm that compiles the trainer's networks
  on a network under the size gate (hidden < 1024, layers < 6, attention layers < 2:
  :func:`lostcities.perf.compile.below_threshold`) parks, measured anyway, unless its
  eager forward at the training batch, measured by the trainer on a CUDA device
  (``compile/gpu_forward_us``), is above 150 us: the gate's fourth arm.
- kind ``amp``: ships at >= 15% on advantage + policy training time
  (``time/advantage_train_seconds + time/strategy_train_seconds``). Both phases must be
  timed in every timed iteration (``optim.policy_training=continual``: with ``scratch``
  the policy trains only at evaluation and checkpoint iterations, which are not timed),
  >= 20 timed iterations with iterations 1-4 dropped, and the loss curves compared
  over >= 50 iterations; otherwise it cannot ship. An AMP arm that ran fp32
  (``amp/active`` = 0: a CPU) parks: not measurable there.
- parity (every kind): the curves are ``loss/advantage``, ``loss/strategy``,
  ``eval/exploitability`` (Kuhn, Leduc) and ``eval/<bot>/win_rate0`` (Lost Cities),
  compared at the steps every job evaluated at (every 25 iterations in the full
  setting; a curve logged without evaluations: every step). "Within seed noise", the
  notes' words, is made a test: at each compared step the arm's seed mean differs from
  the baseline's by less than the two-sample t interval on the pooled seed-to-seed
  spread, at family-wise level 5% over all the arm's comparisons (Bonferroni), so a
  switch that changes nothing fails at most 1 time in 20; with one seed per arm there
  is no spread and a deterministic switch must reproduce the curves to 1e-9 relative.
  A non-finite value in a curve, ``amp/nonfinite_loss_count`` > 0, or an fp16 loss
  scale (``amp/grad_scale``) <= 16 for more than 10 consecutive iterations fails
  parity: do not ship (kind ``drift``: fail).
- kind ``drift``: pass or fail on parity alone; a pass needs the drift check's length,
  >= 100 iterations with an evaluation at least every 25 (shorter: inconclusive).
- the short setting (``+experiment/setting=short``: a CPU smoke run) never ships or
  passes; the report names the setting that ran.

Two other bands are counted in every report for comparison: the baseline's [min, max]
over seeds, and that range widened on both sides by the larger of its width and the
curve's median width (this module's earlier rule). Simulated sweeps of 3 seeds per arm,
4 compared steps, 400 sweeps (tests/test_experiments.py
``test_seed_noise_band_against_the_ranges``): a switch that changes nothing fails 3.5%
of sweeps under the seed-noise band, 83% under [min, max] (a mean of 3 seeds leaves the
range of 3 others at about a third of the steps) and 8% under the widened range; a
shift of 2 seed standard deviations fails 54% / 100% / 66%, of 4: 99% / 100% / 99.5%.
So [min, max] alone fails any long curve on noise; the widened range behaves like the
seed-noise band but its false-alarm rate is not controlled.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from lostcities.config import ExperimentConfig, NetworkConfig, TrackingConfig
from lostcities.experiments.launch import (
    ARM_FILE,
    SweepGuard,
    arm_label,
    end_sweep,
    job_order,
    report_stopped_jobs,
    settings,
    stopped_jobs,
)
from lostcities.perf.compile import below_threshold

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


@dataclass(frozen=True)
class Protocol:
    """What a timing A/B of one kind must measure, and beat, to ship."""

    measure: str  # a key of MEASURES: the seconds the paired effect is taken on
    ship_at: float  # the effect (1 - arm / baseline) that ships
    warmup: int  # leading iterations the note drops from timing
    min_timed: int  # timed iterations per job
    min_parity_steps: int  # iterations over which the loss curves are compared
    phases: tuple[str, ...] = ()  # phases that must be timed in every timed iteration


PROTOCOLS = {
    # the compile note: at least 8 iterations measured with iteration 1 dropped;
    # the 1000-iteration projection improves by at least 5%.
    "ab": Protocol("iteration", 0.05, 1, 8, 0),
    # the AMP note: advantage + strategy training drops by at least 15% averaged
    # over 20 non-eval iterations (iterations 1-4 dropped); losses track the fp32 baseline
    # over at least 50 iterations.
    "amp": Protocol("training", 0.15, 4, 20, 50, TRAINING),
}
DRIFT_ITERATIONS, DRIFT_EVAL_EVERY = 100, 25  # the compile note's drift check
# the AMP note: a GradScaler scale that stays <= 16 for > 10 iterations has collapsed.
SCALE_FLOOR, SCALE_PATIENCE = 16.0, 10
RELATIVE_TOLERANCE = 1e-9  # a band of width 0 (one seed) still admits float noise
PARITY_ALPHA = 0.05  # an arm that changes nothing fails parity at most this often
SHORT_SETTING = "the short setting ran (a CPU smoke run, not the protocol)"  # never ships


@dataclass
class Job:
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
        jobs.append(
            Job(
                arm["arm"],
                arm["seed"],
                rows,
                config,
                job_dir.name,
                arm.get("host"),
                arm.get("started"),
                arm.get("ended"),
            )
        )
    return jobs


# --- timing ------------------------------------------------------------------------


@dataclass
class Timing:
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


def concurrency_shortfalls(ran: dict[str, Any], jobs: list[Job]) -> list[str]:
    """Why timings of ``jobs`` (an arm's and its baseline's) cannot be compared: paired by
    seed, they must come from one machine, one job at a time, as Hydra's basic launcher
    runs them (a launcher plugin: ``hydra.sweeper.max_batch_size=1``, the timing
    experiments' default, and one node). ``ran``: :func:`concurrency` of the whole sweep
    (a job of a third arm that overlapped one of ``jobs`` counts too)."""
    names = {j.name for j in jobs}
    overlapping = [name for name in ran["overlapping"] if name in names]
    hosts = sorted({j.host for j in jobs if j.host is not None})
    out = []
    if overlapping:
        out.append(
            f"jobs {', '.join(overlapping)} ran at the same time as another on one "
            "machine (one at a time: hydra.sweeper.max_batch_size=1)"
        )
    if len(hosts) > 1:
        out.append(
            f"the jobs ran on {len(hosts)} machines ({', '.join(hosts)}), so the paired "
            "effects compare machines (one node: its name in "
            "hydra.launcher.additional_parameters.nodelist)"
        )
    return out


# --- parity ------------------------------------------------------------------------


def drift_metrics(jobs: list[Job]) -> list[str]:
    keys = {k for job in jobs for row in job.rows for k in row}
    chosen = ["loss/advantage", "loss/strategy", "eval/exploitability"]
    chosen += sorted(k for k in keys if k.startswith("eval/") and k.endswith("/win_rate0"))
    return [k for k in chosen if k in keys]


def compared_steps(jobs: list[Job], key: str) -> list[int]:
    """The steps at which ``key`` is compared: those every job logged, thinned to the steps
    every job evaluated at (the protocols' checkpoints, every 25 iterations in the full
    setting) where there are any, else every common step."""
    steps = set.intersection(*({r["step"] for r in j.rows if key in r} for j in jobs))
    evaluated = set.intersection(
        *({r["step"] for r in j.rows if PHASES["evaluation"] in r} for j in jobs)
    )
    return sorted(steps & evaluated or steps)


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
    non-finite values of the curve."""
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
        "passed": not outside and not nonfinite,
    }


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
    problems = []
    for key, d in drift.items():
        if d["nonfinite"]:
            problems.append(f"{key}: {d['nonfinite']} non-finite value(s)")
        if d["outside"]:
            problems.append(
                f"{key}: {len(d['outside'])}/{d['steps']} steps outside the baseline's "
                "seed-noise band"
            )
    return problems + [p for job in jobs for p in amp_health(job)]


# --- protocol and verdict ----------------------------------------------------------


def gate_of(jobs: list[Job]) -> str | None:
    """The notes' preconditions that make an arm's timing meaningless here."""
    for job in jobs:
        amp_active = job.series("amp/active").values()
        dtype = (job.config.get("amp") or {}).get("dtype", "off")
        if dtype != "off" and amp_active and max(amp_active) == 0:
            return f"AMP {dtype} is inactive on this device (fp32 fallback): not measurable here"
        if (job.config.get("compile") or {}).get("trainer"):
            network = _network(job.config)
            forward = job.series("compile/gpu_forward_us").values()
            gpu_forward_us = max(forward) if forward else None
            if below_threshold(network, gpu_forward_us):
                measured = (
                    "no forward measured on a GPU"
                    if gpu_forward_us is None
                    else f"GPU forward {gpu_forward_us:.0f} us <= 150 us"
                )
                return (
                    f"compile's size gate fails on network {network.name!r} (hidden "
                    f"{network.hidden} < 1024, layers {network.layers} < 6, attention layers "
                    f"{network.attention_layers if network.kind == 'color_shared' else 0} < 2, "
                    f"{measured}): measured anyway"
                )
    return None


def _network(config: dict) -> NetworkConfig:
    names = {f.name for f in dataclasses.fields(NetworkConfig)}
    return NetworkConfig(**{k: v for k, v in (config.get("network") or {}).items() if k in names})


def timing_shortfalls(
    exp: ExperimentConfig, protocol: Protocol, times: list[Timing], parity_steps: int
) -> list[str]:
    """Why an arm's timing (``times``: its jobs' and the baseline's) is not the protocol's."""
    out = []
    if exp.setting == "short":
        out.append(SHORT_SETTING)
    if exp.warmup_iterations < protocol.warmup:
        dropped = "iteration 1" if protocol.warmup == 1 else f"iterations 1-{protocol.warmup}"
        out.append(
            f"{dropped} must be dropped (experiment.warmup_iterations={exp.warmup_iterations})"
        )
    timed = min(t.timed for t in times)
    if timed < protocol.min_timed:
        out.append(
            f"{timed} timed iteration(s) in a job, fewer than {protocol.min_timed} "
            "(warm-up, evaluating and checkpointing iterations are not timed)"
        )
    for phase in protocol.phases:
        if any(phase in t.untimed_phases for t in times):
            out.append(
                f"the {phase} phase was not timed in every timed iteration"
                + (
                    " (it ran only when evaluating or checkpointing: "
                    "optim.policy_training=continual times it every iteration)"
                    if phase == "policy training"
                    else ""
                )
            )
    if parity_steps < protocol.min_parity_steps:
        out.append(
            f"the loss curves compared over {parity_steps} iteration(s), "
            f"fewer than {protocol.min_parity_steps}"
        )
    return out


def drift_shortfalls(exp: ExperimentConfig, jobs: list[Job]) -> list[str]:
    """Why a drift check is shorter than the notes' (>= 100 iterations, evaluation every 25)."""
    out = []
    if exp.setting == "short":
        out.append(SHORT_SETTING)
    iterations = min(max((r["step"] for r in j.rows), default=0) for j in jobs)
    if iterations < DRIFT_ITERATIONS:
        out.append(f"{iterations} iteration(s), fewer than {DRIFT_ITERATIONS}")
    evaluations = min(sum(PHASES["evaluation"] in r for r in j.rows) for j in jobs)
    if evaluations < iterations // DRIFT_EVAL_EVERY:
        out.append(
            f"{evaluations} evaluation(s) in {iterations} iterations "
            f"(one every {DRIFT_EVAL_EVERY} at least)"
        )
    return out


def decide(
    effect: float,
    ship_at: float,
    measure: str = "iteration",
    *,
    gate: str | None = None,
    parity: list[str] | tuple[str, ...] = (),
    shortfalls: list[str] | tuple[str, ...] = (),
) -> tuple[str, str]:
    """The notes' decision tree for a timing arm: (verdict, reason)."""
    if gate:
        return "park", gate
    if parity:
        return "do not ship", "parity fails: " + "; ".join(parity)
    if shortfalls:
        return "park", "cannot ship: " + "; ".join(shortfalls)
    if not math.isfinite(effect):
        return "park", "no timing to compare"
    on = MEASURES[measure]
    if effect >= ship_at:
        return "ship", f"{100 * effect:.1f}% faster on {on} (>= {100 * ship_at:.0f}%), parity holds"
    if effect >= 0:
        return "park", f"only {100 * effect:.1f}% faster on {on} (< {100 * ship_at:.0f}%)"
    return "park", f"a regression: {100 * -effect:.1f}% slower on {on}"


def drift_verdict(parity: list[str], shortfalls: list[str]) -> tuple[str, str]:
    if parity:
        return "fail", "; ".join(parity)
    if shortfalls:
        return "inconclusive", "inside the band, but " + "; ".join(shortfalls)
    return "pass", "inside the baseline's seed-noise band at every step, nothing non-finite"


def _spread(values: list[float]) -> dict[str, float]:
    nan = float("nan")
    if not values:
        return {"mean": nan, "min": nan, "max": nan}
    return {"mean": float(np.mean(values)), "min": min(values), "max": max(values)}


def build_report(exp: ExperimentConfig, sweep_dir: Path, command: list[str]) -> dict[str, Any]:
    """Everything the report says, as plain data (written as report.json)."""
    jobs = load_jobs(sweep_dir)
    if not jobs:
        raise ValueError(f"{sweep_dir}: no finished experiment jobs to report on")
    arms = sorted({j.arm for j in jobs})
    by_arm = {a: [j for j in jobs if j.arm == a] for a in arms}
    base = by_arm.get(exp.baseline) or by_arm[arms[0]]
    base_times = {j.seed: timing(j, exp.warmup_iterations) for j in base}
    protocol = PROTOCOLS.get(exp.kind)
    judged = protocol.measure if protocol else "iteration"
    curves = drift_metrics(jobs)
    ran = concurrency(jobs)
    report: dict[str, Any] = {
        "name": exp.name,
        "kind": exp.kind,
        "setting": exp.setting,
        "sweep_dir": str(sweep_dir),
        "command": command,
        "seeds": sorted({j.seed for j in jobs}),
        "warmup_iterations": exp.warmup_iterations,
        "protocol": dataclasses.asdict(protocol) if protocol else None,
        "curves": curves,
        "concurrency": ran,
        "arms": [],
    }
    for a in arms:
        runs = by_arm[a]
        seeds = [j.seed for j in runs]
        times = [timing(j, exp.warmup_iterations) for j in runs]
        mean = {k: float(np.mean([t.seconds[k] for t in times])) for k in times[0].seconds}
        effects = {m: _spread(paired_effects(times, seeds, base_times, m)) for m in MEASURES}
        comparisons = sum(len(compared_steps(base + runs, key)) for key in curves)
        drift = {key: drift_check(base, runs, key, comparisons) for key in curves}
        parity = parity_problems(drift, runs)
        if runs is base:
            verdict = ("baseline", "")
        elif protocol is None:
            verdict = drift_verdict(parity, drift_shortfalls(exp, runs + base))
        else:
            # the iterations the loss curves span (compared at the evaluation steps)
            compared = [b[0] for b in drift.get("loss/advantage", {}).get("band", [])]
            parity_steps = int(max(compared, default=0))
            shortfalls = timing_shortfalls(
                exp, protocol, times + list(base_times.values()), parity_steps
            ) + concurrency_shortfalls(ran, runs + base)
            verdict = decide(
                effects[judged]["mean"],
                protocol.ship_at,
                judged,
                gate=gate_of(runs),
                parity=parity,
                shortfalls=shortfalls,
            )
        report["arms"].append(
            {
                "arm": a,
                "label": arm_label(exp, a),
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
                "drift": {
                    k: {
                        x: d[x]
                        for x in (
                            "steps",
                            "outside",
                            "outside_range",
                            "outside_widened",
                            "nonfinite",
                            "passed",
                        )
                    }
                    for k, d in drift.items()
                },
                "drift_bands": {k: d["band"] for k, d in drift.items()},
                "drift_passed": all(d["passed"] for d in drift.values()),
                "parity_problems": parity,
                "parity_passed": not parity,
                "verdict": verdict[0],
                "reason": verdict[1],
            }
        )
    return report


# --- output ------------------------------------------------------------------------


def protocol_text(report: dict[str, Any]) -> str:
    """The rules the verdicts applied, in one paragraph."""
    setting = (
        "the short setting (a CPU smoke run: nothing ships or passes on it)"
        if report["setting"] == "short"
        else "the full setting (the notes' protocol)"
    )
    p = report["protocol"]
    if p is None:
        rule = (
            f"a pass needs >= {DRIFT_ITERATIONS} iterations with an evaluation at least every "
            f"{DRIFT_EVAL_EVERY}"
        )
    else:
        rule = (
            f"ships at >= {100 * p['ship_at']:.0f}% on {MEASURES[p['measure']]}, with >= "
            f"{p['min_timed']} timed iterations per job and "
            + ("iteration 1" if p["warmup"] == 1 else f"iterations 1-{p['warmup']}")
            + " dropped"
            + (f", every timed iteration timing {' and '.join(p['phases'])}" if p["phases"] else "")
            + (
                f", the loss curves compared over >= {p['min_parity_steps']} iterations"
                if p["min_parity_steps"]
                else ""
            )
            + ", every job on one machine, one at a time"
            + "; an arm parks on a gate: AMP inactive on the device, or torch.compile of the "
            "trainer on a network with hidden < 1024, layers < 6, < 2 attention layers and "
            "no GPU forward above 150 us"
        )
    return f"Ran {setting}. Rule of kind `{report['kind']}`: {rule}."


def how_jobs_ran(ran: dict[str, Any]) -> str:
    """One sentence from :func:`concurrency`'s record."""
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
        "## Timing",
        "",
        "| arm | iteration s (by seed) | timed iterations | "
        + " | ".join(PHASES)
        + " | 1000-iteration projection | effect on iteration | "
        "effect on advantage + policy training |",
        "| --- | --- | --- | " + " | ".join("---:" for _ in PHASES) + " | ---: | ---: | ---: |",
    ]
    for arm in report["arms"]:
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
    lines += [
        "",
        "Effect = 1 - arm / baseline per seed, mean (min..max) over seeds; positive: faster.",
        "",
        "## Parity",
        "",
        "Rule: at each compared step of each curve (the evaluation steps, else every "
        "step), the arm's mean over seeds differs from the baseline's by less than seed "
        f"noise: the two-sample t interval on the pooled seed spread, family-wise "
        f"{100 * PARITY_ALPHA:.0f}% over all the arm's comparisons (one seed per arm: the "
        "curves must agree exactly); a non-finite value, a skipped non-finite loss or a "
        "collapsed fp16 loss scale fails. In brackets, for comparison, the steps outside "
        "the baseline's [min, max] over seeds, and outside that range widened by the larger "
        "of its width and the curve's median width.",
        "",
        "| arm | " + " | ".join(report["curves"]) + " | passed |",
        "| --- | " + " | ".join("---" for _ in report["curves"]) + " | --- |",
    ]
    for arm in report["arms"]:
        cells = [
            f"{len(d['outside'])}/{d['steps']} steps outside "
            f"({len(d['outside_range'])}, {len(d['outside_widened'])})"
            + (f", {d['nonfinite']} non-finite" if d["nonfinite"] else "")
            for d in arm["drift"].values()
        ]
        lines.append(f"| {arm['label']} | " + " | ".join(cells) + f" | {arm['parity_passed']} |")
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
    ax.set_ylabel("seconds per timed iteration")
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
                    ax.fill_between(steps, lo, hi, alpha=0.2, label="baseline seed-noise band")
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
    """Hydra callback of the experiment sweeps (see conf/experiment/). Both hooks run in
    the launching process, whichever launcher runs the jobs (lostcities/experiments/
    launch.py): the start before any job is submitted, the end after the launcher has
    returned every job. Hydra turns an exception of a callback into a warning; the
    sweep's exit code comes from ``SystemExit``, which it lets through."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from lostcities.tracking import start_parent_run

        exp, tracking = _typed(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        command = settings(list(config.hydra.overrides.task))
        name = f"{exp.name}" + (f" [{' '.join(command)}]" if command else "")
        parent = start_parent_run(
            tracking, name, {"experiment": exp.name, "sweep_dir": str(sweep_dir)}
        )
        self._guard = SweepGuard(tracking, sweep_dir)
        self._guard.open(parent, name)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        exp, tracking = _typed(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        # Only a launcher plugin's jobs get here after failing (the basic launcher's first
        # failure stops the sweep): their exit codes are in their arm.json.
        stopped = stopped_jobs(sweep_dir)
        if stopped:
            code = report_stopped_jobs(tracking, sweep_dir, stopped)
            self._guard.close()
            raise SystemExit(code)
        report = build_report(exp, sweep_dir, settings(list(config.hydra.overrides.task)))
        (sweep_dir / "report.json").write_text(json.dumps(report, indent=1))
        (sweep_dir / "report.md").write_text(render_markdown(report))
        files = [sweep_dir / "report.md", sweep_dir / "report.json", *plot(report, sweep_dir)]
        metrics = {}
        for arm in report["arms"]:
            metrics[f"arm{arm['arm']}/iteration_seconds"] = arm["mean_seconds"]["iteration"]
            metrics[f"arm{arm['arm']}/training_seconds"] = arm["mean_seconds"]["training"]
            metrics[f"arm{arm['arm']}/effect"] = arm["effect_mean"]
            metrics[f"arm{arm['arm']}/drift_passed"] = float(arm["drift_passed"])
            metrics[f"arm{arm['arm']}/parity_passed"] = float(arm["parity_passed"])
        end_sweep(tracking, sweep_dir, "FINISHED", metrics, files)
        self._guard.close()
        print(f"report: {sweep_dir / 'report.md'}", flush=True)
        print(render_markdown(report).split("## Verdict")[-1].strip(), flush=True)


def _typed(config: DictConfig) -> tuple[ExperimentConfig, TrackingConfig]:
    return OmegaConf.to_object(config.experiment), OmegaConf.to_object(config.tracking)
