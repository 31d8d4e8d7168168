"""Trainer threads on a shared machine: ``run.threads`` 1 vs N, alone and beside busy
processes.

    python benchmarks/bench_threads.py [--threads 1 2] [--busy 0 1] [--rounds 2]
        [--iterations 3] [overrides ...]

Each arm is a fresh ``python -m lostcities.train`` (default: ``game=kuhn``, tracking off,
3 iterations) with ``run.threads=T``, run while ``B`` busy-looping processes compete for
the cores; arms run interleaved for ``--rounds`` rounds so machine noise hits all alike.
Reported: the mean seconds per iteration (iteration 1 dropped: start-up) per arm, and each
arm's ratio to the 1-thread arm at the same load. Why: torch's intra-op threads spin-wait
on each other, so with as many threads as cores a single competing process can stall
every parallel region (measured 2026-12-03: 51 s vs 1.1 s per Kuhn iteration at load 6.5).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def one_run(threads: int, iterations: int, overrides: list[str]) -> float:
    """Mean seconds per iteration after the first, of one training run."""
    with tempfile.TemporaryDirectory() as run_dir:
        command = [
            sys.executable, "-m", "lostcities.train", *overrides,
            f"run.iterations={iterations}", f"run.threads={threads}",
            "tracking.enabled=false", "run.progress=false", "checkpoint.every=0",
            f"hydra.run.dir={run_dir}",
        ]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True)
        rows = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").open()]
    return statistics.fmean(r["time/iteration_seconds"] for r in rows[1:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("overrides", nargs="*", default=["game=kuhn"])
    args = parser.parse_args(argv)
    times: dict[tuple[int, int], list[float]] = {}
    for _ in range(args.rounds):
        for busy in args.busy:
            for threads in args.threads:
                spinners = [
                    multiprocessing.Process(target=spin, args=(time.monotonic() + 3600,))
                    for _ in range(busy)
                ]
                for p in spinners:
                    p.start()
                try:
                    seconds = one_run(threads, args.iterations, args.overrides)
                finally:
                    for p in spinners:
                        p.terminate()
                        p.join()
                times.setdefault((busy, threads), []).append(seconds)
    print(f"{' '.join(args.overrides)}: seconds per iteration (mean of {args.rounds} rounds)")
    for busy in args.busy:
        base = statistics.fmean(times[(busy, args.threads[0])])
        for threads in args.threads:
            mean = statistics.fmean(times[(busy, threads)])
            print(
                f"  busy processes {busy}  run.threads={threads}  {mean:7.2f} s"
                f"  ratio to {args.threads[0]} thread(s): {mean / base:5.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
