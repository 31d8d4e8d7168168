"""The traversal benchmark runs on the shipped config (``nox -s bench`` would find out
only when someone times something)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["regret", "value"])
def test_traversal_benchmark_splits_all_of_the_time(kind, capsys):
    result = load("bench_traversal").main(["--traversals", "2", "--kind", kind])
    assert result["nodes_per_second"] > 0
    shares = [v for k, v in result.items() if k != "nodes_per_second"]
    assert sum(shares) == pytest.approx(1.0)
    assert f"rollout {kind} traversals, action values learned" in capsys.readouterr().out
