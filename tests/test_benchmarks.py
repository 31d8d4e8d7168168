"""The traversal benchmark runs on the shipped config (``nox -s bench`` would find out
only when someone times something)."""

from __future__ import annotations

import json

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


def test_the_gpu_check_fails_on_a_failed_verdict_or_a_missing_report(tmp_path):
    """Every step ran: still exit 3 when an arm failed parity or a sweep wrote no report,
    1 when a step did not run to the end, 0 only when all is well."""
    check = load_benchmark("gpu_check")
    steps = {s.name: s for s in check.STEPS}

    def ran(name: str, status: str = "ok"):
        return check.Outcome(steps[name], status, 1.0, ["cmd"])

    def report(name: str, *verdicts: str) -> None:
        arms = [{"label": f"arm{i}", "verdict": v, "reason": "r"} for i, v in enumerate(verdicts)]
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "report.json").write_text(json.dumps({"arms": arms}))

    outcomes = [ran("tests"), ran("compile_ab"), ran("drift")]
    report("compile_ab", "baseline", "park")
    report("drift", "baseline", "inconclusive")
    assert check.exit_code(tmp_path, outcomes) == 0
    report("drift", "baseline", "fail")
    assert check.exit_code(tmp_path, outcomes) == 3
    assert check.parity_failures(tmp_path, outcomes) == ["drift: arm1: fail: r"]
    report("drift", "baseline", "inconclusive")
    (tmp_path / "compile_ab" / "report.json").unlink()
    assert check.parity_failures(tmp_path, outcomes) == ["compile_ab: no report.json"]
    assert check.exit_code(tmp_path, [*outcomes[:2], ran("drift", "timed out after 9 s")]) == 1


def test_the_gpu_check_sweeps_run_in_the_reduced_setting(tmp_path):
    """Its sweeps are smaller than the protocol's: their verdicts must not ship."""
    check = load_benchmark("gpu_check")
    for step in check.SWEEPS:
        assert "+experiment/setting=reduced" in check.sweep_command(step, tmp_path, "0,1")
