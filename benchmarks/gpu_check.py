"""The GPU check in one command: CUDA smoke tests, then the performance sweeps at sizes where
the notes expect a gain, and one report.

    python benchmarks/gpu_check.py [--out DIR] [--budget 600] [--seeds 0,1]
                                   [--only tests compile_ab amp_ab inference drift]
    nox -s gpu [-- --out DIR ...]

Steps, in order, each in its own process with its output in ``DIR/<step>.log``:

1. ``tests``: ``pytest tests/test_gpu.py`` (fp16 + GradScaler, bf16, compile, strict
   determinism twice on one GPU, the CUDA trainer with CPU traversal workers). A failed
   test stops the check: the sweeps would measure a broken path.
2. ``compile_ab``: ``+experiment=compile_ab`` (compile target A: the trainer's networks).
3. ``amp_ab``: ``+experiment=amp_ab`` (amp off, fp16, bf16).
4. ``inference``: ``benchmarks/bench_inference.py --compile --device cuda`` (compile target
   B: the policy's batched evaluation forward), on the wide network.
5. ``drift``: ``+experiment=drift`` (compile off vs trainer, with evaluation: exact
   exploitability), the compile note's learning-curve check.

The sweeps run Leduc (exact exploitability) with ``network=wide`` (1024 x 3: over the
compile note's gate of hidden >= 1024 or layers >= 6, where the notes expect a gain; a
512 x 3 MLP measured slower compiled) on ``run.device=cuda``, each at the length its
verdict rules ask for (lostcities/experiments/protocols.py: compile A/B 10 iterations, AMP
A/B 50, drift 100 with evaluation every 25) but with fewer traversals and fit steps per
iteration than Leduc's recipe (:data:`SIZES`), so that all of it should fit ~10 minutes on
one H100 with two seeds (an estimate: the report's table gives each step's seconds). Each
job is a fresh process (~10 s of start-up, CUDA and MLflow); the first compiled job pays
inductor's compile (~1 min; later ones hit its cache). Each step has a share of the budget
(:data:`STEPS`); time a step leaves over passes to the next, and a step past its time is
stopped and reported as such (its finished jobs stay in its sweep directory). Every sweep
writes report.md / report.json (``arms[].verdict``, ``arms[].reason``) in ``DIR/<step>/``
and logs to MLflow in ``DIR/mlflow.db``; this script collects the verdicts into
``DIR/report.md``.

The sweeps run in the reduced setting (``+experiment/setting=reduced``: the protocol's
length, less work per iteration), so their verdicts are indicative and none ships or passes:
shipping a switch needs the experiment at its own sizes.

Exit codes: 2 without CUDA (one line, before doing anything else); 1 a step failed, ran out
of time, or was skipped; 3 every step ran but a sweep wrote no report or an arm failed
parity (``do not ship``, drift ``fail``: the GPU path changes what is learned beyond seed
noise); 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
GAME = ["game=leduc", "network=wide", "run.device=cuda", "run.progress=false"]
# Leduc's recipe trains 1000 advantage steps of 2048 rows per player and 3000 policy steps
# after 4000 traversals per player: seconds per iteration. The A/Bs keep the fits the bulk
# of an iteration (the phases compile and AMP wrap) at a fraction of that; the drift check
# needs 100 iterations, so it takes the smallest fits.
SIZES = {
    "compile_ab": [
        "run.iterations=10",  # the rule: >= 8 timed, iteration 1 (compile) and 10 (eval) not
        "traversal.traversals_per_player=1000",
        "optim.advantage_steps=200",
        "optim.strategy_steps=200",
    ],
    "amp_ab": [
        "run.iterations=50",  # the rule: loss curves over >= 50, >= 20 timed after 1-4
        "traversal.traversals_per_player=300",
        "optim.advantage_steps=100",
        "optim.strategy_steps=100",  # every iteration (amp_ab trains the policy continually)
    ],
    "drift": [
        "run.iterations=100",  # the rule: >= 100 iterations, evaluation every 25
        "eval.every=25",
        "traversal.traversals_per_player=300",
        "optim.advantage_steps=50",
        "optim.strategy_steps=100",
    ],
}
INFERENCE = ["--compile", "--device", "cuda", "--networks", "wide"]


@dataclass(frozen=True)
class Step:
    name: str
    share_s: float  # this step's part of the 600 s default budget (scaled to --budget)
    what: str


STEPS = (
    Step("tests", 150, "CUDA smoke tests (tests/test_gpu.py)"),  # ~1 min of it compiling
    Step("compile_ab", 120, "torch.compile A/B of the trainer (target A)"),
    Step("amp_ab", 120, "AMP A/B: off, fp16, bf16"),
    Step("inference", 60, "compiled evaluation forward (compile target B)"),
    Step("drift", 120, "learning-curve drift of the compiled trainer"),
)
RESERVE_S = 30  # kept back for stopping a step and writing the report
MIN_STEP_S = 20  # a step given less than this is skipped rather than started


@dataclass
class Outcome:
    step: Step
    status: str  # ok | failed (exit N) | timed out after N s | skipped: why
    seconds: float
    command: list[str]
    log: Path | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def sweep_command(step: str, out: Path, seeds: str) -> list[str]:
    """``python -m lostcities.train -m +experiment=<step>`` sized for the check."""
    return [
        sys.executable,
        "-m",
        "lostcities.train",
        "-m",
        f"+experiment={step}",
        "+experiment/setting=reduced",  # below the protocol's sizes: indicative verdicts
        *GAME,
        *SIZES[step],
        f"run.seed={seeds}",
        f"hydra.sweep.dir={out / step}",
        f"tracking.tracking_uri=sqlite:///{out / 'mlflow.db'}",
    ]


def run_step(command: list[str], log: Path, timeout: float) -> str:
    """Run ``command`` (its output to ``log``) for at most ``timeout`` s; its status. It runs
    in the check's directory: MLflow writes run artifacts under ``./mlruns`` of the working
    directory, which must not be the repository."""
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=log.parent, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(process)
            return f"timed out after {timeout:.0f} s"
        except BaseException:  # Ctrl-C: no sweep job outlives the check
            _stop(process)
            raise
    return "ok" if code == 0 else f"failed (exit {code})"


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the step's process group (a sweep passes it on to its job), then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


FAILED_VERDICTS = ("do not ship", "fail")  # parity failed: the path changes the learning
SWEEPS = ("compile_ab", "amp_ab", "drift")


def parity_failures(out: Path, outcomes: list[Outcome]) -> list[str]:
    """What fails the check among sweeps that ran to the end: a missing report, or an arm
    whose verdict says parity failed (one line each)."""
    failures = []
    for o in outcomes:
        if o.step.name not in SWEEPS or not o.ok:
            continue
        path = out / o.step.name / "report.json"
        if not path.exists():
            failures.append(f"{o.step.name}: no report.json")
            continue
        for arm in json.loads(path.read_text())["arms"]:
            if arm["verdict"] in FAILED_VERDICTS:
                failures.append(f"{o.step.name}: {arm['label']}: {arm['verdict']}: {arm['reason']}")
    return failures


def exit_code(out: Path, outcomes: list[Outcome]) -> int:
    """1 if a step did not run to the end, 3 if a verdict failed, else 0."""
    if not all(o.ok for o in outcomes):
        return 1
    return 3 if parity_failures(out, outcomes) else 0


def sweep_verdicts(sweep_dir: Path) -> list[str]:
    """Markdown lines of a sweep's report.json: one per arm."""
    path = sweep_dir / "report.json"
    if not path.exists():
        return [f"- no report: finished jobs (if any) are in `{sweep_dir}`"]
    report = json.loads(path.read_text())
    lines = []
    for arm in report["arms"]:
        seconds = arm["mean_seconds"]["iteration"]
        verdict = arm["verdict"] + (f": {arm['reason']}" if arm["reason"] else "")
        effect = (
            ""
            if arm["verdict"] == "baseline"
            else f", effect {arm['effect_mean']:+.1%} on {arm.get('judged_on', 'iteration')}"
        )
        lines.append(f"- **{arm['label']}**: {verdict} ({seconds:.2f} s/iteration{effect})")
    lines.append(f"- report: `{sweep_dir / 'report.md'}`")
    return lines


def bench_verdicts(log: Path) -> list[str]:
    """The inference bench's per-network headers and verdict lines."""
    text = log.read_text() if log.exists() else ""
    keep = [line.strip() for line in text.splitlines() if line.startswith("==")]
    keep += [line.strip() for line in text.splitlines() if line.strip().startswith("verdict:")]
    return [f"- {line}" for line in keep] or ["- no verdict: see the log"]


def write_report(out: Path, outcomes: list[Outcome], budget: float) -> Path:
    props = torch.cuda.get_device_properties(0)
    lines = [
        f"# GPU check, {datetime.now():%Y-%m-%d %H:%M}",
        "",
        f"{props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}; budget {budget:.0f} s, used "
        f"{sum(o.seconds for o in outcomes):.0f} s. The verdicts are the sweeps' own "
        "(lostcities/experiments/protocols.py), at the sizes in each command.",
        "",
        "| step | what | status | s |",
        "| --- | --- | --- | ---: |",
    ]
    for o in outcomes:
        lines.append(f"| {o.step.name} | {o.step.what} | {o.status} | {o.seconds:.0f} |")
    for o in outcomes:
        lines += ["", f"## {o.step.name}: {o.status}", ""]
        if o.command:
            lines += [f"`{' '.join(o.command)}`", ""]
        if o.step.name in SWEEPS and o.command:
            lines += sweep_verdicts(out / o.step.name)
        elif o.step.name == "inference" and o.log is not None:
            lines += bench_verdicts(o.log)
        if o.log is not None:
            lines.append(f"- log: `{o.log}`")
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    parser.add_argument("--out", type=Path, default=ROOT / "multirun" / f"gpu_check_{stamp}")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for all steps")
    parser.add_argument("--seeds", default="0,1", help="seeds of every sweep (two: a band)")
    names = [s.name for s in STEPS]
    parser.add_argument("--only", nargs="+", choices=names, default=names)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA GPU (torch.cuda.is_available() is false): nothing run",
            file=sys.stderr,
        )
        return 2

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    scale = (args.budget - RESERVE_S) / sum(s.share_s for s in STEPS)
    outcomes: list[Outcome] = []
    carried = 0.0  # time earlier steps left over
    tests_failed = False
    for step in STEPS:
        share = step.share_s * scale
        if step.name not in args.only:
            carried += share
            continue
        left = args.budget - RESERVE_S - (time.monotonic() - start)
        timeout = min(share + carried, left)
        if tests_failed:
            outcomes.append(Outcome(step, "skipped: the smoke tests failed", 0.0, []))
            continue
        if timeout < MIN_STEP_S:
            outcomes.append(Outcome(step, "skipped: out of time", 0.0, []))
            continue
        if step.name == "tests":
            command = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(ROOT / "tests" / "test_gpu.py"),
            ]
        elif step.name == "inference":
            command = [sys.executable, str(ROOT / "benchmarks" / "bench_inference.py"), *INFERENCE]
        else:
            command = sweep_command(step.name, out, args.seeds)
        log = out / f"{step.name}.log"
        print(f"gpu_check: {step.name} ({step.what}), up to {timeout:.0f} s", flush=True)
        began = time.monotonic()
        status = run_step(command, log, timeout)
        spent = time.monotonic() - began
        carried = max(0.0, share + carried - spent)
        outcomes.append(Outcome(step, status, spent, command, log))
        # a failed test stops the check; one that ran out of time says nothing of the GPU
        tests_failed = tests_failed or (step.name == "tests" and status.startswith("failed"))
        print(f"gpu_check: {step.name}: {status} ({spent:.0f} s)", flush=True)

    report = write_report(out, outcomes, args.budget)
    print(f"report: {report}")
    for failure in parity_failures(out, outcomes):
        print(f"gpu_check: {failure}", file=sys.stderr)
    return exit_code(out, outcomes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
