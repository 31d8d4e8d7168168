"""CUDA smoke tests: the performance switches and the determinism contract on a GPU.

Skipped without CUDA (every test but the last, which checks that benchmarks/gpu_check.py
refuses such a machine in one line). ``benchmarks/gpu_check.py`` runs this file first; on
a GPU machine it is also ``pytest -q tests/test_gpu.py``. Runs are tiny (Kuhn or Leduc, a
few iterations): they check that each path works on CUDA, not that it is fast (the sweeps
of gpu_check.py measure that).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

import lostcities.cfr.targets as targets_module
from lostcities.checkpoint import checkpoint_path, load_checkpoint
from lostcities.config import register_configs
from lostcities.games import make_game
from lostcities.perf.compile import COMPILED_PREFIX
from lostcities.train import build_executor, build_trainer

ROOT = Path(__file__).resolve().parents[1]
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

KUHN = [
    "game=kuhn",
    "network=small",
    "run.device=cuda",
    "traversal.traversals_per_player=20",
    "optim.advantage_steps=20",
    "optim.strategy_steps=20",
    "optim.advantage_batch_size=64",
    "optim.strategy_batch_size=64",
]
LEDUC_RUN = [  # a whole run (python -m lostcities.train): evaluation and a checkpoint at 2
    "game=leduc",
    "network=small",
    "run.device=cuda",
    "traversal.traversals_per_player=50",
    "optim.advantage_steps=20",
    "optim.strategy_steps=20",
    "optim.advantage_batch_size=128",
    "optim.strategy_batch_size=128",
    "eval.every=2",
    "checkpoint.every=2",
    "run.iterations=2",
    "run.progress=false",
    "tracking.enabled=false",
]
TIMING = ("time", "time/", "traversal/nodes_per_second")


def drive(overrides: list[str], iterations: int):
    """(trainer, metrics rows) of ``iterations`` iterations in this process (the executor
    closed after), each row with the policy's loss."""
    register_configs()
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        cfg = OmegaConf.to_object(compose("train", overrides=overrides))
    executor = build_executor(cfg)
    try:
        trainer = build_trainer(cfg, make_game(cfg.game), executor)
        rows = []
        for _ in range(iterations):
            row = trainer.run_iteration()
            row["loss/strategy"] = trainer.train_policy()
            rows.append(row)
        return trainer, rows
    finally:
        executor.close()


def forward_dtypes(monkeypatch) -> list[torch.dtype]:
    """The dtypes of the advantage nets' outputs, recorded as the regret loss sees them."""
    seen: list[torch.dtype] = []
    regret_loss = targets_module.regret_loss

    def recording(pred, *args):
        seen.append(pred.dtype)
        return regret_loss(pred, *args)

    monkeypatch.setattr(targets_module, "regret_loss", recording)
    return seen


def assert_finite_losses(rows: list[dict]) -> None:
    for row in rows:
        assert math.isfinite(row["loss/advantage"]) and math.isfinite(row["loss/strategy"])


@cuda
def test_fp16_trains_with_the_grad_scaler_on_cuda(monkeypatch):
    seen = forward_dtypes(monkeypatch)
    trainer, rows = drive([*KUHN, "amp=fp16"], 3)
    assert set(seen) == {torch.float16}
    assert trainer.step.amp.scaler is not None and trainer.device.type == "cuda"
    assert all(row["amp/active"] == 1.0 for row in rows)
    scale = rows[-1]["amp/grad_scale"]
    assert 0 < scale <= 65536.0 and math.isfinite(scale)  # halved on overflow, never grown
    assert rows[-1]["amp/nonfinite_loss_count"] == 0
    assert_finite_losses(rows)


@cuda
def test_bf16_trains_on_cuda_without_a_scaler(monkeypatch):
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    seen = forward_dtypes(monkeypatch)
    trainer, rows = drive([*KUHN, "amp=bf16"], 3)
    assert set(seen) == {torch.bfloat16}
    assert trainer.step.amp.scaler is None
    assert all(row["amp/active"] == 1.0 and row["amp/grad_scale"] == 1.0 for row in rows)
    assert_finite_losses(rows)


@cuda
@pytest.mark.filterwarnings("ignore:torch.compile on network")  # Kuhn's net is small
def test_compiled_trainer_runs_on_cuda_and_saves_clean_weights(tmp_path):
    torch._dynamo.reset()
    try:
        trainer, rows = drive([*KUHN, "+compile=trainer"], 2)
    finally:
        torch._dynamo.reset()
    assert trainer.step._compiled  # the fits ran through compiled wrappers
    assert all(row["compile/recompiles"] <= 1 for row in rows)
    # the size gate's measured arm: the eager forward at the training batch, on the GPU
    assert all(row["compile/gpu_forward_us"] > 0 for row in rows)
    assert_finite_losses(rows)
    state = trainer.state_dict()
    for weights in [*state["advantage_nets"], state["policy_net"]]:
        assert weights and not any(COMPILED_PREFIX in key for key in weights)


def run_process(overrides: list[str], run_dir: Path) -> tuple[list[dict], dict]:
    """``python -m lostcities.train`` in a fresh process (determinism=strict must be set up
    before any CUDA work): its non-timing metric rows and its iteration-2 checkpoint."""
    done = subprocess.run(
        [sys.executable, "-m", "lostcities.train", *overrides, f"hydra.run.dir={run_dir}"],
        cwd=run_dir.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in rows]
    return rows, load_checkpoint(checkpoint_path(run_dir / "checkpoints", 2))["trainer"]


def assert_same_tree(a, b, where: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_tree(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_tree(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b or (a != a and b != b), where  # NaN == NaN here


@cuda
def test_strict_determinism_repeats_bit_for_bit_on_one_gpu_with_or_without_cpu_workers(
    tmp_path,
):
    """determinism=strict, the trainer on CUDA: the same run twice gives identical metrics
    and networks, and so does the same run with its traversals in two CPU worker
    processes (they receive clean CPU weights and run the same row-wise kernel)."""
    strict = [*LEDUC_RUN, "determinism=strict"]
    first = run_process([*strict, "executor=inline"], tmp_path / "first")
    again = run_process([*strict, "executor=inline"], tmp_path / "again")
    workers = run_process(
        [*strict, "executor=processes", "executor.num_workers=2"],
        tmp_path / "workers",
    )
    assert first[0][-1]["samples/advantage"] > 0
    assert math.isfinite(first[0][-1]["eval/exploitability"])
    for other in (again, workers):
        assert other[0] == first[0]
        for name in ("advantage_nets", "policy_net", "advantage_optimizers", "strategy_memory"):
            assert_same_tree(other[1][name], first[1][name], name)


@cuda
def test_cuda_trainer_with_cpu_traversal_workers_and_default_settings():
    """The default (determinism=off) trainer on CUDA feeding two CPU worker processes."""
    trainer, rows = drive([*KUHN, "executor=processes", "executor.num_workers=2"], 2)
    assert next(trainer.policy_net.parameters()).device.type == "cuda"
    assert all(row["samples/advantage"] > 0 for row in rows)
    assert_finite_losses(rows)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_gpu_check_refuses_a_machine_without_cuda_in_one_line(tmp_path):
    out = tmp_path / "check"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0], done.stderr
    assert not out.exists()  # nothing was started or written
