"""The protocol each experiment kind's arms are judged by, and the verdicts it gives.

An entry of :data:`PROTOCOLS` holds the numbers the verdict checks and the same rule in
words, which the report prints. The timing rules are the design notes' bench protocols for
torch.compile of the trainer and for trainer AMP; the drift rule is the compile note's
learning-curve check. Every kind also needs parity (statistics.py), and nothing run in the
short or reduced setting (``+experiment/setting=short``: a CPU smoke run; ``reduced``: less
work per iteration than the protocol's) ships or passes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from lostcities.config import ExperimentConfig, NetworkConfig
from lostcities.experiments.jobs import MEASURES, TRAINING, Job, Timing
from lostcities.experiments.statistics import evaluated_steps
from lostcities.perf.compile import (
    GATE_ATTENTION_LAYERS,
    GATE_FORWARD_US,
    GATE_HIDDEN,
    GATE_LAYERS,
    below_threshold,
)

SHORT_SETTING = "the short setting ran (a CPU smoke run, not the protocol)"  # never ships
# settings whose verdict is indicative: named as a shortfall, so nothing run in one ships
SETTING_SHORTFALLS = {
    "short": SHORT_SETTING,
    "reduced": "the reduced setting ran (the protocol's length with fewer traversals and fit "
    "steps per iteration than the experiment's: indicative, not the protocol)",
}
GATES = (
    "an arm parks, measured anyway, on a gate: AMP inactive on the device (amp/active = 0, "
    "the fp32 fallback of a CPU: not measurable there), or torch.compile of the trainer on a "
    f"network under compile's size gate (hidden < {GATE_HIDDEN}, layers < {GATE_LAYERS}, "
    f"< {GATE_ATTENTION_LAYERS} attention layers, and no eager forward at the training batch "
    f"above {GATE_FORWARD_US:.0f} us measured on a CUDA device: compile/gpu_forward_us)"
)


@dataclass(frozen=True)
class ArmEvidence:
    """What an arm's verdict rests on, its baseline's share included."""

    runs: list[Job]  # the arm's jobs
    jobs: list[Job]  # the arm's and the baseline's
    times: list[Timing]  # their timings (the baseline's: one per seed)
    effect: float  # the arm's paired effect on the protocol's measure, mean over seeds
    drift: dict[str, dict[str, Any]]  # the arm's curves: statistics.drift_checks
    parity: list[str]  # why parity fails (statistics.parity_problems); none: it holds
    ran: dict[str, Any]  # how the sweep's jobs ran: jobs.concurrency


@dataclass(frozen=True, kw_only=True)
class TimingProtocol:
    """A timing A/B: what an arm must measure, and beat, to ship."""

    rule: str  # the rule in words, as the report states it
    measure: str  # a key of MEASURES: the seconds the paired effect is taken on
    ship_at: float  # the effect (1 - arm / baseline) that ships
    warmup: int  # leading iterations the note drops from timing
    min_timed: int  # timed iterations per job
    min_parity_steps: int = 0  # iterations over which the loss curves are compared
    phases: tuple[str, ...] = ()  # phases that must be timed in every timed iteration

    def verdict(self, exp: ExperimentConfig, arm: ArmEvidence) -> tuple[str, str]:
        """(verdict, reason): :func:`decide` on the arm's effect, gate, parity and what its
        timing lacks against this protocol."""
        # the iterations the loss curves span (compared at the evaluation steps)
        compared = [b[0] for b in arm.drift.get("loss/advantage", {}).get("band", [])]
        shortfalls = timing_shortfalls(
            exp, self, arm.times, int(max(compared, default=0))
        ) + concurrency_shortfalls(arm.ran, arm.jobs)
        return decide(
            arm.effect,
            self.ship_at,
            self.measure,
            gate=gate_of(arm.runs),
            parity=arm.parity,
            shortfalls=shortfalls,
        )


@dataclass(frozen=True, kw_only=True)
class DriftProtocol:
    """A learning-curve check: an arm passes or fails on parity alone, over a run long
    enough and evaluated often enough to show drift."""

    rule: str  # the rule in words, as the report states it
    min_iterations: int  # the shortest run that can pass
    eval_every: int  # the most iterations between compared evaluations, from the start
    measure: str = "iteration"  # the effect the report headlines; no verdict rests on it

    def verdict(self, exp: ExperimentConfig, arm: ArmEvidence) -> tuple[str, str]:
        """(verdict, reason): :func:`drift_verdict` on the arm's parity and what its run
        lacks against this protocol."""
        return drift_verdict(arm.parity, drift_shortfalls(exp, self, arm.jobs))


Protocol = TimingProtocol | DriftProtocol

PROTOCOLS: dict[str, Protocol] = {
    "ab": TimingProtocol(
        rule="torch.compile of the trainer (the compile plan's target A), or any switch "
        "judged on iteration time: ships at >= 5% on the 1000-iteration projection, paired by "
        "seed; it cannot ship unless each job has >= 8 timed iterations, iteration 1 dropped, "
        "and every job ran on one machine, one at a time; " + GATES,
        measure="iteration",
        ship_at=0.05,
        warmup=1,
        min_timed=8,
    ),
    "amp": TimingProtocol(
        rule="trainer AMP: ships at >= 15% on advantage + policy training, paired by seed; it "
        "cannot ship unless both phases are timed in every timed iteration "
        "(optim.policy_training=continual: with scratch the policy trains only at evaluation "
        "and checkpoint iterations, which are not timed), each job has >= 20 timed "
        "iterations, iterations 1-4 dropped, the loss curves are compared over >= 50 "
        "iterations, and every job ran on one machine, one at a time; " + GATES,
        measure="training",
        ship_at=0.15,
        warmup=4,
        min_timed=20,
        min_parity_steps=50,
        phases=TRAINING,
    ),
    "drift": DriftProtocol(
        rule="pass or fail on parity alone; a pass needs >= 100 iterations, the curves "
        "compared at evaluations at most 25 iterations apart, counted from the start "
        "(shorter or sparser: inconclusive)",
        min_iterations=100,
        eval_every=25,
    ),
}


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
                attention = network.attention_layers if network.kind == "color_shared" else 0
                measured = (
                    "no forward measured on a GPU"
                    if gpu_forward_us is None
                    else f"GPU forward {gpu_forward_us:.0f} us <= {GATE_FORWARD_US:.0f} us"
                )
                return (
                    f"compile's size gate fails on network {network.name!r} (hidden "
                    f"{network.hidden} < {GATE_HIDDEN}, layers {network.layers} < {GATE_LAYERS}, "
                    f"attention layers {attention} < {GATE_ATTENTION_LAYERS}, "
                    f"{measured}): measured anyway"
                )
    return None


def _network(config: dict) -> NetworkConfig:
    names = {f.name for f in dataclasses.fields(NetworkConfig)}
    return NetworkConfig(**{k: v for k, v in (config.get("network") or {}).items() if k in names})


def timing_shortfalls(
    exp: ExperimentConfig, protocol: TimingProtocol, times: list[Timing], parity_steps: int
) -> list[str]:
    """Why an arm's timing (``times``: its jobs' and the baseline's) is not the protocol's."""
    out = []
    if exp.setting in SETTING_SHORTFALLS:
        out.append(SETTING_SHORTFALLS[exp.setting])
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


def concurrency_shortfalls(ran: dict[str, Any], jobs: list[Job]) -> list[str]:
    """Why timings of ``jobs`` (an arm's and its baseline's) cannot be compared: paired by
    seed, they must come from one machine, one job at a time, as Hydra's basic launcher
    runs them (a launcher plugin: ``hydra.sweeper.max_batch_size=1``, the timing
    experiments' default, and one node). ``ran``: :func:`jobs.concurrency` of the whole
    sweep (a job of a third arm that overlapped one of ``jobs`` counts too)."""
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


def drift_shortfalls(exp: ExperimentConfig, protocol: DriftProtocol, jobs: list[Job]) -> list[str]:
    """Why a drift check is shorter or sparser than the protocol's: the run's length, and
    the spacing of the evaluations every job made (the steps its curves are compared at),
    the first counted from the start."""
    out = []
    if exp.setting in SETTING_SHORTFALLS:
        out.append(SETTING_SHORTFALLS[exp.setting])
    iterations = min(max((r["step"] for r in j.rows), default=0) for j in jobs)
    if iterations < protocol.min_iterations:
        out.append(f"{iterations} iteration(s), fewer than {protocol.min_iterations}")
    evaluated = evaluated_steps(jobs)
    every = f"one every {protocol.eval_every} at least"
    if not evaluated:
        out.append(f"no step at which every job evaluated ({every})")
    else:
        gap = max(b - a for a, b in pairwise([0, *evaluated]))
        if gap > protocol.eval_every:
            out.append(f"evaluations up to {gap} iterations apart, from the start ({every})")
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
    """A drift arm's (verdict, reason): parity fails it; a shortfall leaves it inconclusive."""
    if parity:
        return "fail", "; ".join(parity)
    if shortfalls:
        return "inconclusive", "inside the band, but " + "; ".join(shortfalls)
    return "pass", "inside the baseline's seed-noise band at every step, nothing non-finite"
