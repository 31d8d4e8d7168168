"""Experiment sweeps: fresh process per arm, parent MLflow run with nested arms, report."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import load_benchmark, session_processes
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lostcities.config import (
    AmpConfig,
    CompileConfig,
    ExperimentConfig,
    NetworkConfig,
    register_configs,
)
from lostcities.config_checks import typed_config
from lostcities.experiments.jobs import MEASURES, Job
from lostcities.experiments.protocols import PROTOCOLS, DriftProtocol, decide
from lostcities.experiments.render import render_markdown
from lostcities.experiments.report import build_report
from lostcities.experiments.statistics import drift_check
from lostcities.perf.compile import below_threshold, compile_module, measure_forward_us
from lostcities.perf.step import TrainingStep

TINY_KUHN = [
    "game=kuhn",
    "run.progress=false",
    "traversal.traversals_per_player=20",
    "optim.advantage_steps=5",
    "optim.strategy_steps=5",
    "optim.advantage_batch_size=32",
    "optim.strategy_batch_size=32",
]
EXPERIMENTS = ("amp_ab", "compile_ab", "drift", "network_ab")


def write_job(
    root: Path, num: int, arm: int, seed: int, rows: list[dict], config: dict | None = None
) -> None:
    """A finished job directory as a sweep leaves it: arm.json, metrics.jsonl and the
    composed config (.hydra/config.yaml)."""
    job = root / f"{num}_arm{arm}_seed{seed}"
    job.mkdir(parents=True)
    (job / "arm.json").write_text(json.dumps({"arm": arm, "seed": seed, "label": str(arm)}))
    (job / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    if config is not None:
        (job / ".hydra").mkdir()
        (job / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(config))


def fake_job(
    root: Path, num: int, arm: int, seed: int, seconds: float, loss: float, iterations: int = 9
) -> None:
    warm = {1: 5.0}  # iteration 1 is slow (compile, start-up): the report drops it
    rows = [
        {"step": t, "time/iteration_seconds": seconds * warm.get(t, 1.0), "loss/advantage": loss}
        for t in range(1, iterations + 1)
    ]
    write_job(root, num, arm, seed, rows)


def test_report_pairs_seeds_drops_warmup_and_applies_the_decision_tree(tmp_path):
    exp = ExperimentConfig(name="x", arms=["a", "b", "c"], warmup_iterations=1)
    for seed, jitter in [(0, 0.0), (1, 0.1)]:
        fake_job(tmp_path, 3 * seed, 0, seed, 1.0 + jitter, 1.0 + jitter)  # baseline
        fake_job(tmp_path, 3 * seed + 1, 1, seed, 0.8 + jitter, 1.05)  # faster, inside band
        fake_job(tmp_path, 3 * seed + 2, 2, seed, 0.99, 3.0)  # drifts
    report = build_report(exp, tmp_path, ["game=kuhn"])
    base, fast, drifting = report["arms"]
    assert base["verdict"] == "baseline"
    assert base["mean_seconds"]["iteration"] == pytest.approx(1.05)  # warm-up dropped
    assert fast["effect_min"] == pytest.approx(1 - 0.9 / 1.1)
    assert fast["effect_max"] == pytest.approx(0.2)
    assert fast["timed_iterations"] == [8, 8]
    assert fast["drift_passed"] and fast["verdict"] == "ship"
    assert not drifting["drift_passed"] and drifting["verdict"] == "do not ship"
    text = render_markdown(report)
    assert "## Verdict" in text and "**b**: ship" in text
    assert "(ab, full setting)" in text and "Ran the full setting" in text


def test_decision_tree():
    assert decide(0.10, 0.05)[0] == "ship"
    assert decide(0.02, 0.05) == (
        "park",
        "only 2.0% faster on the 1000-iteration projection (< 5%)",
    )
    assert decide(-0.10, 0.05)[0] == "park"
    assert decide(0.50, 0.05, parity=["drifts"]) == ("do not ship", "parity fails: drifts")
    assert decide(0.50, 0.05, gate="gate")[1] == "gate"
    assert decide(0.50, 0.05, shortfalls=["too short"]) == ("park", "cannot ship: too short")
    assert decide(0.16, 0.15, "training")[1].endswith(
        "faster on advantage + policy training (>= 15%), parity holds"
    )


# --- AMP: >= 15% on advantage + policy training, both timed; AMP's health is parity ---


def amp_rows(
    iterations: int = 60,
    advantage: float = 1.0,
    policy: float | None = 0.5,
    loss: float = 1.0,
    scale: float = 65536.0,
    **at: dict[int, dict],
) -> list[dict]:
    """An AMP A/B job: traversal 2 s, the two training phases, losses, AMP's metrics; an
    evaluation every 25 iterations (not timed); ``at``: {"step_N": {key: value}} overrides."""
    rows = []
    for t in range(1, iterations + 1):
        row = {
            "step": t,
            "time/traversal_seconds": 2.0,
            "time/advantage_train_seconds": advantage,
            "loss/advantage": loss,
            "loss/strategy": 2 * loss,
            "amp/active": 1.0,
            "amp/grad_scale": scale,
            "amp/nonfinite_loss_count": 0,
        }
        if policy is not None:
            row["time/strategy_train_seconds"] = policy
        if t % 25 == 0 or t == iterations:
            row["time/eval_seconds"] = 3.0
            row.setdefault("time/strategy_train_seconds", 0.5)  # scratch: at evaluation only
        row.update(at.get(f"step_{t}", {}))
        row["time/iteration_seconds"] = 2.0 + advantage + row.get("time/strategy_train_seconds", 0)
        rows.append(row)
    return rows


def amp_report(tmp_path: Path, arm_rows: dict[int, list[dict]], **exp) -> dict:
    """Baseline amp=off (seeds 0, 1: losses 1.0 and 1.1) against an fp16 arm."""
    experiment = ExperimentConfig(
        name="amp_ab", kind="amp", arms=["amp=off", "amp=fp16"], warmup_iterations=4, **exp
    )
    for seed in (0, 1):
        write_job(
            tmp_path, 2 * seed, 0, seed, amp_rows(loss=1.0 + 0.1 * seed), {"amp": {"dtype": "off"}}
        )
        write_job(tmp_path, 2 * seed + 1, 1, seed, arm_rows[seed], {"amp": {"dtype": "fp16"}})
    return build_report(experiment, tmp_path, [])


def test_amp_ships_at_15_percent_of_the_training_phases(tmp_path):
    # 20% less advantage + policy training (1.5 s -> 1.2 s): 6% of the iteration only
    arm = amp_report(tmp_path, {s: amp_rows(advantage=0.8, policy=0.4, loss=1.05) for s in (0, 1)})[
        "arms"
    ][1]
    assert arm["judged_on"] == "training"
    assert arm["effect_mean"] == pytest.approx(0.2)
    assert arm["effects"]["iteration"]["mean"] == pytest.approx(0.3 / 3.5)
    assert arm["verdict"] == "ship", arm["reason"]


def test_amp_parks_at_10_percent(tmp_path):
    arm = amp_report(
        tmp_path, {s: amp_rows(advantage=0.9, policy=0.45, loss=1.05) for s in (0, 1)}
    )["arms"][1]
    assert arm["verdict"] == "park"
    assert arm["reason"] == "only 10.0% faster on advantage + policy training (< 15%)"


@pytest.mark.parametrize(
    ("at", "problem"),
    [
        ({"step_30": {"loss/advantage": float("nan")}}, "loss/advantage: 1 non-finite value(s)"),
        ({"step_30": {"loss/strategy": float("inf")}}, "loss/strategy: 1 non-finite value(s)"),
        ({"step_30": {"amp/nonfinite_loss_count": 2}}, "seed 0: 2 non-finite loss(es) skipped"),
        (
            {f"step_{t}": {"amp/grad_scale": 16.0} for t in range(20, 31)},
            "seed 0: fp16 loss scale <= 16 for 11 iterations (collapsed: more than 10)",
        ),
    ],
)
def test_amp_fails_parity_on_nonfinite_values_and_a_collapsed_scale(tmp_path, at, problem):
    fast = {"advantage": 0.8, "policy": 0.4, "loss": 1.05}  # 20% faster: ships but for parity
    report = amp_report(tmp_path, {0: amp_rows(**fast, **at), 1: amp_rows(**fast)})
    arm = report["arms"][1]
    assert arm["verdict"] == "do not ship" and problem in arm["reason"], arm["reason"]
    assert not arm["parity_passed"]


def test_amp_scale_at_16_for_10_iterations_is_not_a_collapse(tmp_path):
    low = {f"step_{t}": {"amp/grad_scale": 16.0} for t in range(20, 30)}
    fast = {"advantage": 0.8, "policy": 0.4, "loss": 1.05}
    arm = amp_report(tmp_path, {0: amp_rows(**fast, **low), 1: amp_rows(**fast)})["arms"][1]
    assert arm["verdict"] == "ship", arm["reason"]


def test_amp_cannot_ship_when_the_policy_phase_was_never_timed(tmp_path):
    # optim.policy_training=scratch: the policy trains only at the (untimed) evaluations
    report = amp_report(
        tmp_path, {s: amp_rows(advantage=0.5, policy=None, loss=1.05) for s in (0, 1)}
    )
    arm = report["arms"][1]
    assert arm["verdict"] == "park" and arm["reason"].startswith("cannot ship: ")
    assert "the policy training phase was not timed in every timed iteration" in arm["reason"]
    assert "optim.policy_training=continual" in arm["reason"]
    assert "policy training" in arm["untimed_phases"]


def test_amp_cannot_ship_on_the_short_setting(tmp_path):
    short = {s: amp_rows(iterations=3, advantage=0.5, policy=0.25, loss=1.05) for s in (0, 1)}
    experiment = ExperimentConfig(
        name="amp_ab", kind="amp", arms=["amp=off", "amp=fp16"], setting="short"
    )
    for seed in (0, 1):
        write_job(tmp_path, 2 * seed, 0, seed, amp_rows(iterations=3, loss=1.0 + 0.1 * seed))
        write_job(tmp_path, 2 * seed + 1, 1, seed, short[seed])
    report = build_report(experiment, tmp_path, [])
    reason = report["arms"][1]["reason"]
    assert reason.startswith("cannot ship: the short setting ran")
    assert "iterations 1-4 must be dropped" in reason
    assert "1 timed iteration(s) in a job, fewer than 20" in reason
    assert "compared over 3 iteration(s), fewer than 50" in reason
    assert "(amp, short setting)" in render_markdown(report)


# --- compile (target A): size gate, >= 8 timed iterations, >= 5% on the projection -------


def compile_report(tmp_path: Path, network: dict, iterations: int, speedup: float) -> dict:
    experiment = ExperimentConfig(
        name="compile_ab", kind="ab", arms=["+compile=off", "+compile=trainer"]
    )
    for seed in (0, 1):
        for arm, seconds in ((0, 1.0), (1, 1.0 - speedup)):
            rows = [
                {"step": t, "time/iteration_seconds": seconds * (20 if t == 1 else 1),
                 "loss/advantage": 1.0 + 0.1 * seed}
                for t in range(1, iterations + 1)
            ]  # fmt: skip
            config = {"network": network, "compile": {"trainer": arm == 1}}
            write_job(tmp_path, 2 * seed + arm, arm, seed, rows, config)
    return build_report(experiment, tmp_path, [])


def test_compile_parks_a_network_under_the_size_gate(tmp_path):
    small = {"name": "small", "kind": "mlp", "hidden": 64, "layers": 3, "attention_layers": 0}
    arm = compile_report(tmp_path, small, 9, 0.30)["arms"][1]
    assert arm["verdict"] == "park" and "size gate fails on network 'small'" in arm["reason"]


def test_compile_ships_a_big_network_6_percent_faster_over_8_timed_iterations(tmp_path):
    wide = {"name": "wide", "kind": "mlp", "hidden": 1024, "layers": 3}
    arm = compile_report(tmp_path, wide, 9, 0.06)["arms"][1]
    assert arm["timed_iterations"] == [8, 8]
    assert arm["verdict"] == "ship", arm["reason"]
    assert arm["reason"].startswith("6.0% faster on the 1000-iteration projection")


def test_compile_cannot_ship_on_5_timed_iterations(tmp_path):
    wide = {"name": "wide", "kind": "mlp", "hidden": 1024, "layers": 3}
    arm = compile_report(tmp_path, wide, 6, 0.30)["arms"][1]
    assert arm["verdict"] == "park"
    assert arm["reason"] == (
        "cannot ship: 5 timed iteration(s) in a job, fewer than 8 (warm-up, evaluating and "
        "checkpointing iterations are not timed)"
    )


def test_the_compile_size_gate_is_the_notes():
    assert below_threshold(NetworkConfig(hidden=512, layers=3))
    assert not below_threshold(NetworkConfig(hidden=1024, layers=3))
    assert not below_threshold(NetworkConfig(hidden=512, layers=6))
    shared = NetworkConfig(kind="color_shared", hidden=128, layers=2, attention_layers=2)
    assert not below_threshold(shared)
    assert below_threshold(dataclasses.replace(shared, attention_layers=1))
    # an MLP has no attention, whatever attention_layers says
    assert below_threshold(NetworkConfig(hidden=512, layers=3, attention_layers=2))
    # the fourth arm: an eager forward measured on a GPU above 150 us
    assert not below_threshold(NetworkConfig(hidden=512, layers=3), gpu_forward_us=151.0)
    assert below_threshold(NetworkConfig(hidden=512, layers=3), gpu_forward_us=150.0)


def test_compile_passes_the_gate_on_a_measured_gpu_forward(tmp_path):
    small = {"name": "small", "kind": "mlp", "hidden": 64, "layers": 3, "attention_layers": 0}
    experiment = ExperimentConfig(
        name="compile_ab", kind="ab", arms=["+compile=off", "+compile=trainer"]
    )
    for seed in (0, 1):
        for arm, seconds in ((0, 1.0), (1, 0.9)):
            rows = [
                {"step": t, "time/iteration_seconds": seconds * (20 if t == 1 else 1),
                 "loss/advantage": 1.0 + 0.1 * seed}
                | ({"compile/gpu_forward_us": 180.0} if arm == 1 else {})
                for t in range(1, 10)
            ]  # fmt: skip
            config = {"network": small, "compile": {"trainer": arm == 1}}
            write_job(tmp_path, 2 * seed + arm, arm, seed, rows, config)
    arm = build_report(experiment, tmp_path, [])["arms"][1]
    assert arm["verdict"] == "ship", arm["reason"]


def test_the_gate_measures_the_forward_on_cuda_only():
    """On a CPU the trainer records no forward for the gate (its 150 us is a GPU's)."""
    net = torch.nn.Linear(8, 3)
    assert measure_forward_us(net, torch.zeros(16, 8), repeats=3) > 0
    step = TrainingStep(
        AmpConfig(), CompileConfig(trainer=True), NetworkConfig(hidden=8, layers=1),
        torch.device("cpu"), grad_clip=0.0,
    )  # fmt: skip
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    wrapper = torch.nn.Sequential(net)  # stands for the compiled wrapper: not `net` itself
    step(net, wrapper, optimizer, torch.zeros(4, 8), lambda out: out.sum())
    assert "compile/gpu_forward_us" not in step.metrics()


# --- drift: the baseline's seed band, the protocol's length --------------------------


def drift_rows(iterations: int, exploitability: float, every: int = 25) -> list[dict]:
    rows = []
    for t in range(1, iterations + 1):
        row = {"step": t, "time/iteration_seconds": 1.0, "loss/advantage": 1.0}
        if t % every == 0 or t == iterations:
            row.update({"time/eval_seconds": 0.1, "eval/exploitability": exploitability / t})
        rows.append(row)
    return rows


def drift_report(
    tmp_path: Path, arm: float, iterations: int = 100, every: int = 25, setting: str = "full"
) -> dict:
    experiment = ExperimentConfig(
        name="drift", kind="drift", arms=["+compile=off", "+compile=trainer"], setting=setting
    )
    for seed, base in ((0, 1.0), (1, 1.2), (2, 1.1)):
        write_job(tmp_path, 2 * seed, 0, seed, drift_rows(iterations, base, every))
        write_job(tmp_path, 2 * seed + 1, 1, seed, drift_rows(iterations, arm, every))
    return build_report(experiment, tmp_path, [])


def test_drift_fails_an_arm_outside_the_seed_band(tmp_path):
    arm = drift_report(tmp_path, arm=1.6)["arms"][1]
    assert arm["verdict"] == "fail"
    assert arm["reason"] == (
        "eval/exploitability: 4/4 steps outside the baseline's seed-noise band"
    )


def test_drift_passes_inside_the_band_only_at_the_protocols_length(tmp_path):
    assert drift_report(tmp_path / "full", arm=1.1)["arms"][1]["verdict"] == "pass"
    short = drift_report(tmp_path / "short", arm=1.1, iterations=6, every=2)["arms"][1]
    assert short["verdict"] == "inconclusive"
    assert short["reason"] == "inside the band, but 6 iteration(s), fewer than 100"
    sparse = drift_report(tmp_path / "sparse", arm=1.1, every=50)["arms"][1]
    assert sparse["verdict"] == "inconclusive" and "one every 25 at least" in sparse["reason"]


def test_nothing_passes_or_ships_on_the_reduced_setting(tmp_path):
    """The protocol's length with less work per iteration (the GPU check's sweeps): a drift
    arm inside the band is inconclusive, not a pass, and the report says why."""
    arm = drift_report(tmp_path, arm=1.1, setting="reduced")["arms"][1]
    assert arm["verdict"] == "inconclusive"
    assert "the reduced setting ran" in arm["reason"]
    assert drift_report(tmp_path / "full", arm=1.1)["arms"][1]["verdict"] == "pass"


def test_drift_checks_the_spacing_of_the_evaluations_not_their_count(tmp_path):
    # every 30 over 120 iterations: 4 evaluations, as many as every 25 over 100, too far apart
    spaced = drift_report(tmp_path / "every30", arm=1.1, iterations=120, every=30)["arms"][1]
    assert spaced["verdict"] == "inconclusive"
    assert spaced["reason"] == (
        "inside the band, but evaluations up to 30 iterations apart, from the start "
        "(one every 25 at least)"
    )
    assert (
        drift_report(tmp_path / "every25", arm=1.1, iterations=100, every=25)["arms"][1]["verdict"]
        == "pass"
    )


def test_a_curve_with_no_step_every_job_evaluated_at_fails_parity(tmp_path):
    """The baseline evaluates every 25 over 100 iterations, the arm every 35 over 110: no
    step of eval/exploitability to compare, which is a failure, not a pass on nothing."""
    experiment = ExperimentConfig(
        name="drift", kind="drift", arms=["+compile=off", "+compile=trainer"]
    )
    for seed, base in ((0, 1.0), (1, 1.2), (2, 1.1)):
        write_job(tmp_path, 2 * seed, 0, seed, drift_rows(100, base, every=25))
        write_job(tmp_path, 2 * seed + 1, 1, seed, drift_rows(110, 1.1, every=35))
    report = build_report(experiment, tmp_path, [])
    arm = report["arms"][1]
    assert arm["drift"]["eval/exploitability"]["steps"] == 0
    assert not arm["drift_passed"] and not arm["parity_passed"]
    assert arm["verdict"] == "fail"
    assert arm["reason"] == (
        "eval/exploitability: nothing compared (no step at which every job logged it, finite)"
    )
    assert "| no step to compare |" in render_markdown(report)


@pytest.mark.parametrize("kind", ["ab", "amp", "drift"])
def test_each_protocol_states_the_numbers_it_checks(kind):
    """The rule the report prints is the one the verdict applies."""
    protocol = PROTOCOLS[kind]
    if isinstance(protocol, DriftProtocol):
        expected = [
            f">= {protocol.min_iterations} iterations",
            f"at most {protocol.eval_every} iterations apart",
        ]
    else:
        warmup = "iteration 1" if protocol.warmup == 1 else f"iterations 1-{protocol.warmup}"
        expected = [
            f">= {protocol.ship_at:.0%} on {MEASURES[protocol.measure]}",
            f">= {protocol.min_timed} timed iterations",
            f"{warmup} dropped",
        ]
        if protocol.min_parity_steps:
            expected.append(f"compared over >= {protocol.min_parity_steps} iterations")
    assert [x for x in expected if x not in protocol.rule] == []


def sweep_fail_rates(shift: float, sweeps: int = 400) -> dict[str, float]:
    """How often each band fails a whole sweep: 3 seeds per arm, a curve of 100 steps
    evaluated every 25 (4 compared steps), steps independent, seed noise 1, the arm's
    curve moved by ``shift`` (0: a switch that changes nothing)."""
    rng = np.random.default_rng(0)
    failed = {"seed noise": 0, "range": 0, "widened": 0}
    for _ in range(sweeps):
        jobs = {
            arm: [Job(arm, seed, noisy_rows(rng, shift * arm)) for seed in range(3)]
            for arm in (0, 1)
        }
        d = drift_check(jobs[0], jobs[1], "loss/advantage", 4)
        assert d["steps"] == 4
        failed["seed noise"] += bool(d["outside"])
        failed["range"] += bool(d["outside_range"])
        failed["widened"] += bool(d["outside_widened"])
    return {rule: n / sweeps for rule, n in failed.items()}


def noisy_rows(rng: np.random.Generator, shift: float) -> list[dict]:
    rows = []
    for t in range(1, 101):
        row = {"step": t, "loss/advantage": float(rng.normal(shift))}
        if t % 25 == 0:
            row["time/eval_seconds"] = 0.1
        rows.append(row)
    return rows


def test_seed_noise_band_against_the_ranges():
    """The table in experiments/perf_switches/README.md: the seed-noise band fails a switch
    that changes nothing in at most ~5% of sweeps (measured 0.035), the baseline's [min,
    max] in most of them (0.83; the widened range 0.08); a shift of 2 seed standard
    deviations fails 0.54 of sweeps (widened range 0.66), of 4: 0.99 (0.995)."""
    rates = {shift: sweep_fail_rates(shift) for shift in (0.0, 2.0, 4.0)}
    assert rates[0.0]["seed noise"] <= 0.08
    assert rates[0.0]["range"] >= 0.5
    assert rates[4.0]["seed noise"] >= 0.8


# --- the experiment files: full protocol by default, one override for the short run ---


def composed(overrides: list[str]):
    register_configs()
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        return typed_config(compose("train", overrides=overrides))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_each_experiment_composes_its_protocol_and_the_short_setting(experiment):
    full = composed([f"+experiment={experiment}", "game=leduc"])
    assert full.experiment.setting == "full" and full.checkpoint.every == 0
    if full.experiment.kind == "drift":
        assert (full.run.iterations, full.eval.every) == (100, 25)
    elif full.experiment.kind == "amp":
        assert (full.run.iterations, full.experiment.warmup_iterations) == (100, 4)
        assert full.optim.policy_training == "continual"  # both phases timed
    else:
        assert (full.run.iterations, full.experiment.warmup_iterations) == (10, 1)
        assert full.eval.every > full.run.iterations  # no evaluation in the timing window
    short = composed([f"+experiment={experiment}", "+experiment/setting=short", "game=leduc"])
    assert short.experiment.setting == "short"
    assert (short.run.iterations, short.experiment.warmup_iterations) == (3, 1)
    assert short.experiment.kind == full.experiment.kind and short.eval.every == full.eval.every
    # after the experiment or not at all: a short setting before it is overridden, whole
    before = composed(["+experiment/setting=short", f"+experiment={experiment}", "game=leduc"])
    assert before.experiment.setting == "full" and before.run.iterations == full.run.iterations


def test_reduce_overhead_is_refused_for_the_dynamic_inference_wrapper():
    cfg = CompileConfig(name="inference", trainer=False, inference=True, mode="reduce-overhead")
    with pytest.raises(ValueError) as raised:
        compile_module(torch.nn.Linear(2, 2), cfg, dynamic=True)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("compile.mode=reduce-overhead: expected one of default, ")
    assert "compile.inference" in message
    # the run's evaluation forward is made there (a run prints it as one `error:` line)
    step = TrainingStep(AmpConfig(), cfg, NetworkConfig(hidden=1024), torch.device("cpu"), 1.0)
    with pytest.raises(ValueError, match="^compile.mode=reduce-overhead: expected"):
        step.inference_forward_of(torch.nn.Linear(2, 2))


def test_the_inference_bench_ships_target_b_at_20_percent():
    bench = load_benchmark("bench_inference")
    assert bench.compile_verdict(1.0, 0.79)[0] == "ship"
    assert bench.compile_verdict(1.0, 0.85) == (
        "park",
        "compiled forward 15.0% faster (< 20%): leave compile.inference off",
    )
    assert bench.compile_verdict(1.0, 1.1)[0] == "park"


def run_sweep(tmp_path: Path, mlflow_uri: str, overrides: list[str]) -> Path:
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    done = subprocess.run(
        [sys.executable, "-m", "lostcities.train", "-m", *overrides],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (report,) = (tmp_path / "multirun").rglob("report.md")
    return report


@pytest.mark.parametrize(
    ("experiment", "arms"),
    [("compile_ab", "0,1"), ("amp_ab", "0,1"), ("network_ab", "0,1"), ("drift", "0")],
)
def test_each_experiment_sweeps_kuhn_end_to_end(tmp_path, mlflow_uri, experiment, arms):
    from mlflow import MlflowClient

    report = run_sweep(
        tmp_path,
        mlflow_uri,
        [
            f"+experiment={experiment}",
            "+experiment/setting=short",
            *TINY_KUHN,
            "run.seed=0",
            f"experiment.arm={arms}",
        ],
    )
    text = report.read_text()
    assert "## Timing" in text and "## Parity" in text and "## Verdict" in text
    assert "short setting" in text
    assert (report.parent / "timing.png").is_file()
    data = json.loads((report.parent / "report.json").read_text())
    assert len(data["arms"]) == len(arms.split(",")) and data["setting"] == "short"
    assert all(len(arm["iterations"]) == 1 and arm["iterations"][0] == 3 for arm in data["arms"])
    if experiment == "amp_ab":  # this CPU: the fp16 arm ran fp32 and says so
        assert "inactive on this device" in data["arms"][1]["reason"]
        assert "policy training" not in data["arms"][0]["untimed_phases"]  # continual
    elif len(data["arms"]) > 1:  # a smoke run never ships
        assert data["arms"][1]["verdict"] != "ship"
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("lostcities").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    (parent,) = parents
    assert parent.info.run_name.startswith(experiment) and parent.info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == len(arms.split(","))
    assert len({c.info.run_name for c in children}) == len(children)
    assert {"report.md", "report.json", "timing.png"} <= {
        a.path for a in client.list_artifacts(parent.info.run_id)
    }


def test_unknown_appended_key_fails_at_start(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "lostcities.train", *TINY_KUHN, "+run.bogus=1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "error: unknown config key 'run.bogus'" in done.stderr


@pytest.mark.slow
def test_compile_ab_on_leduc_three_seeds(tmp_path, mlflow_uri):
    """The longer variant: Leduc, wide network, 3 seeds (minutes: compile per arm)."""
    report = run_sweep(
        tmp_path, mlflow_uri, ["+experiment=compile_ab", "game=leduc", "network=wide"]
    )
    data = json.loads((report.parent / "report.json").read_text())
    assert data["setting"] == "full" and len(data["arms"]) == 2
    for arm in data["arms"]:
        assert arm["seeds"] == [0, 1, 2] and arm["iterations"] == [10, 10, 10]
        assert min(arm["timed_iterations"]) >= 8  # the protocol's count, iteration 1 dropped
    compiled = data["arms"][1]
    # the wide net is over the size gate and the protocol was met: a real verdict, by timing
    assert compiled["parity_passed"], compiled["parity_problems"]
    assert all(d["steps"] > 0 for d in compiled["drift"].values())
    assert not compiled["reason"].startswith("cannot ship")
    assert compiled["verdict"] == ("ship" if compiled["effect_mean"] >= 0.05 else "park")
    assert f"**{compiled['label']}**: {compiled['verdict']}" in report.read_text()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_sweep_ends_its_job_and_itself_killed(tmp_path, mlflow_uri, signum):
    """Ctrl-C (to the sweep's process group, as a terminal sends it) or SIGTERM (to the
    sweep process only) while a job trains: the job stops as a run does, the sweep stops,
    and neither MLflow run is left RUNNING."""
    from mlflow import MlflowClient

    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "lostcities.train", "-m", "+experiment=drift", *TINY_KUHN),
            *("experiment.arm=0", "run.seed=0,1", "run.iterations=1000", "checkpoint.every=1"),
        ],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session and process group, like a terminal job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # see the Ctrl-C test
    )
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("multirun/*/*/0_*/checkpoints/ckpt_*.pt")):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the first job wrote no checkpoint"
        time.sleep(0.2)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)  # what Ctrl-C in the terminal does
    else:
        os.kill(proc.pid, signum)  # what kill, a scheduler's time limit do
    _, stderr = proc.communicate(timeout=120)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr
    assert re.search(rf"interrupted \({name}\) at iteration \d+; last checkpoint \S+", stderr)
    assert stderr.rstrip().endswith(f"interrupted ({name}): sweep stopped in job 0"), stderr
    assert not list(tmp_path.glob("multirun/*/*/1_*"))  # the second job never started
    time.sleep(0.5)
    assert session_processes(proc.pid) == []
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("lostcities").experiment_id])
    assert sorted(r.info.status for r in runs) == ["KILLED", "KILLED"]  # parent and job
