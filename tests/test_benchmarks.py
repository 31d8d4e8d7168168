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
