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
    measured 0.092 (seed 0; 0.097 / 0.097 with seeds 1 / 2), the policy network 0.109.
    The bar is 0.10; the policy net's leaves room for BLAS rounding on another
    machine, not for a regression to batch 1024's 0.122 or the old 0.136."""
    rows = run(["game=leduc"], tmp_path)
    final = rows[-1]
    assert final["eval/sdcfr_exploitability"] <= 0.10
    assert final["eval/exploitability"] <= 0.13


def test_leduc_rollout_scheme_learns(tmp_path):
    """The Lost Cities scheme on Leduc, shipped Leduc settings, 50 iterations: measured
    0.113 (seed 0; the uniform policy is at 2.37). The bar catches a return of the
    underfitting advantage nets (0.254 with lr 1e-3, batch 1024)."""
    rows = run(["game=leduc", "traversal.scheme=rollout", "run.iterations=50"], tmp_path)
    assert rows[-1]["eval/exploitability"] < 0.2


def test_leduc_learned_action_values_fall_with_iterations(tmp_path):
    """The Lost Cities estimator on Leduc (rollout scheme, learned action values): the
    regret targets must still be sigma_t's counterfactual values, so exact
    exploitability falls with iterations. Measured (seed 0): 0.590 at 10 iterations, 0.383
    at 20, 0.227 at 50."""
    overrides = ["game=leduc", "traversal.scheme=rollout", "traversal.action_values=learned"]
    rows = run([*overrides, "run.iterations=20"], tmp_path)
    curve = [row["eval/exploitability"] for row in rows if "eval/exploitability" in row]
    assert len(curve) == 2
    assert curve[1] < 0.8 * curve[0]
    assert curve[1] < 0.5


def test_lost_cities_default_run_keeps_learning(tmp_path):
    """The default run (no overrides, 8 iterations, ~13 min) keeps improving after its
    first iteration: its last agent beats its iteration-1 agent on paired deals (the
    interval of the head-to-head win rate above 1/2), the search best response's margin
    against it has fallen, and it beats sigma_1 (the heuristic it starts from, played the
    same way on the same 400 games) with the score gain's interval above zero against
    each bot. Measured (seed 0, 2026-12-07): head-to-head 0.744 [0.699, 0.784], margin
    15.0 -> -0.1 points, score gains +23.1 to +39.0 (lower ends +20.5 to +35.6); win rate
    against cautious and committer, averaged, 0.604 (iteration 1: 0.474; the same recipe
    without traversal.anchor: 0.540), against discard_only 0.973."""
    rows = run([], tmp_path)
    first, final = rows[0], rows[-1]
    assert final["eval/h2h/win_rate_low"] > 0.5
    assert final["eval/br/score_diff"] < first["eval/br/score_diff"]
    for bot in ("discard_only", "cautious", "committer", "sigma1_greedy"):
        assert final[f"eval/{bot}/gain_score_diff_low"] > 0, bot
    assert final["eval/discard_only/win_rate0"] >= 0.95
    strong = (final["eval/cautious/win_rate0"] + final["eval/committer/win_rate0"]) / 2
    assert strong >= 0.56
