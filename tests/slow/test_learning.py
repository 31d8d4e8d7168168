"""Slow learning checks (``pytest -m slow``): the shipped recipes still learn.

Each runs the real entry point with the shipped recipe and a fixed seed,
so a result is reproducible on the same machine and thread count; a change to
the algorithm that hurts learning fails these.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lostcities.train import train

pytestmark = pytest.mark.slow


def run(overrides: list[str], run_dir: Path) -> list[dict]:
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        dict_cfg = compose("train", overrides=[*overrides, "tracking.enabled=false"])
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    train(OmegaConf.to_object(dict_cfg), run_dir, resolved, overrides)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_leduc_single_deep_cfr_reaches_010(tmp_path):
    """Shipped Leduc config, 100 iterations (~13 min): single Deep CFR's exact average
    measured 0.090 (seed 0; 0.097 / 0.097 with seeds 1 / 2), the policy network 0.115.
    The bar is 0.10; the policy net's leaves room for BLAS rounding on another
    machine, not for a regression to batch 1024's 0.122 or the old 0.136."""
    rows = run(["game=leduc"], tmp_path)
    final = rows[-1]
    assert final["eval/sdcfr_exploitability"] <= 0.10
    assert final["eval/exploitability"] <= 0.13


def test_leduc_rollout_scheme_learns(tmp_path):
    """The Lost Cities scheme on Leduc, shipped Leduc settings, 50 iterations: measured
    0.110 (seed 0; the uniform policy is at 2.37). The bar catches a return of the
    underfitting advantage nets (0.254 with lr 1e-3, batch 1024)."""
    rows = run(["game=leduc", "traversal.scheme=rollout", "run.iterations=50"], tmp_path)
    assert rows[-1]["eval/exploitability"] < 0.2


def test_lost_cities_default_run_gains_over_sigma1(tmp_path):
    """The default run (no overrides, ~5 min), evaluated as shipped (single Deep CFR,
    sampled): its paired score gain over sigma_1 (the heuristic it starts from, played the
    same way on the same 400 games) has its 95% interval above zero against each of these
    bots. sigma_1 itself gains exactly 0, so a CFR regression that falls back to the
    heuristic fails here (a bar the heuristic already meets would prove nothing). Its win
    rate against cautious and committer, averaged, measured 0.494 (seed 0); the bar is one
    the previous default (5 iterations of 250 traversals, c = 1: 0.418) and sigma_1
    (0.320 sampled, 0.435 greedy) do not meet."""
    rows = run([], tmp_path)
    final = rows[-1]
    for bot in ("discard_only", "cautious", "committer", "sigma1_greedy"):
        assert final[f"eval/{bot}/gain_score_diff_low"] > 0, bot
    assert final["eval/random/win_rate0"] >= 0.95
    strong = (final["eval/cautious/win_rate0"] + final["eval/committer/win_rate0"]) / 2
    assert strong >= 0.47
