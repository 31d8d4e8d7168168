"""The learning-curve PNG drawn from a run's metrics.jsonl."""

from __future__ import annotations

import json

from lostcities.learning_curve import CURVE_FILE, plot_learning_curve


def test_learning_curve_picks_existing_families(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    lines = [
        json.dumps(
            {
                "step": s,
                "time": 0.0,
                "eval/random/win_rate0": 0.5,
                "eval/bot/win_rate0": 0.4,
                "eval/random/score_diff": 3.0,
                "other/thing": 1.0,
            }
        )
        for s in range(4)
    ]
    metrics.write_text("\n".join(lines) + '\n{"step": 4, "eval/ran')  # a line cut by a crash
    out = plot_learning_curve(metrics, tmp_path / CURVE_FILE)
    assert out == tmp_path / CURVE_FILE and out.read_bytes()[:4] == b"\x89PNG"

    (tmp_path / "none.jsonl").write_text(json.dumps({"step": 0, "time": 0.0, "other": 1.0}) + "\n")
    assert plot_learning_curve(tmp_path / "none.jsonl", tmp_path / "none.png") is None
    assert plot_learning_curve(tmp_path / "missing.jsonl", tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()
