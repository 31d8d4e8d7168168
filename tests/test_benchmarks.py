"""The traversal benchmark runs on the shipped config (``nox -s bench`` would find out
only when someone times something)."""

from __future__ import annotations

import pytest
from conftest import load_benchmark


@pytest.mark.parametrize("kind", ["regret", "value"])
def test_traversal_benchmark_splits_all_of_the_time(kind, capsys):
    result = load_benchmark("bench_traversal").main(["--traversals", "2", "--kind", kind])
    assert result["nodes_per_second"] > 0
    shares = [v for k, v in result.items() if k != "nodes_per_second"]
    assert sum(shares) == pytest.approx(1.0)
    assert f"rollout {kind} traversals, action values learned" in capsys.readouterr().out


def test_workers_benchmark_runs_the_shipped_config_with_learned_values(capsys):
    rates = load_benchmark("bench_workers").main(["--traversals", "2", "--rounds", "1"])
    assert all(rate > 0 for rate in rates.values())
    assert "same node counts in every executor (off): True" in capsys.readouterr().out


def test_ray_benchmark_compares_the_executors_on_the_same_traversals(capsys):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    result = load_benchmark("bench_ray").main(["--traversals", "2", "--rounds", "1"])
    assert result["ratio_ray_over_processes"] > 0
    out = capsys.readouterr().out
    assert "same node counts in every arm: True" in out
    assert "ray / processes at 2 workers:" in out
