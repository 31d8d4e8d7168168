"""The training entry point: Hydra composition, end-to-end runs, MLflow, checkpoints, resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import session_processes
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from lostcities.checkpoint import CheckpointError, latest_checkpoint
from lostcities.config import TrainConfig
from lostcities.train import train  # also registers the schemas

TIMING = ("time/", "traversal/nodes_per_second")


def compose_cfg(overrides: list[str]):
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=False)


def typed(dict_cfg) -> TrainConfig:
    return OmegaConf.to_object(dict_cfg)


def run(overrides: list[str], run_dir: Path) -> dict[str, float]:
    dict_cfg = compose_cfg(overrides)
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    return train(typed(dict_cfg), run_dir, resolved, overrides)


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def non_timing(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "time" and not k.startswith(TIMING)}


@pytest.mark.parametrize(
    ("game", "network"), [("lost_cities", "compact"), ("kuhn", "small"), ("leduc", "small")]
)
def test_every_game_composes_with_its_default_network(game, network):
    cfg = typed(compose_cfg([f"game={game}"]))
    assert cfg.game.name == game
    assert cfg.network.name == network
    # the command line still wins over a game's network default
    assert typed(compose_cfg([f"game={game}", "network=deep"])).network.layers == 6


@pytest.mark.parametrize(
    ("network", "hidden", "layers"),
    [("default", 512, 3), ("wide", 1024, 3), ("deep", 512, 6), ("compact", 256, 2)],
)
def test_network_group(network, hidden, layers):
    cfg = typed(compose_cfg([f"network={network}"]))
    assert (cfg.network.name, cfg.network.hidden, cfg.network.layers) == (network, hidden, layers)


def test_bad_key_and_bad_value_fail_at_compose_time():
    with pytest.raises(ConfigCompositionException, match="bogus"):
        compose_cfg(["run.bogus=1"])
    with pytest.raises(Exception, match="iterations"):
        typed(compose_cfg(["run.iterations=many"]))
    with pytest.raises(ConfigCompositionException, match="network"):
        compose_cfg(["network=huge"])


KUHN_FAST = ["game=kuhn", "network=small", "run.progress=false"]


def test_kuhn_learns_below_005_exploitability(tmp_path):
    """Deep CFR with external sampling on Kuhn: exploitability < 0.05 (about 20 s)."""
    metrics = run([*KUHN_FAST, "tracking.enabled=false", "run.iterations=15"], tmp_path)
    assert metrics["eval/exploitability"] < 0.05
    assert metrics["eval/nash_conv"] == pytest.approx(2 * metrics["eval/exploitability"])


def test_run_records_everything_in_mlflow(tmp_path, mlflow_uri):
    from mlflow import MlflowClient

    run(
        [
            *KUHN_FAST,
            f"tracking.tracking_uri={mlflow_uri}",
            "run.iterations=3",
            "eval.every=3",
            "tracking.experiment=e2e",
        ],
        tmp_path,
    )
    client = MlflowClient(mlflow_uri)
    (mlrun,) = client.search_runs([client.get_experiment_by_name("e2e").experiment_id])
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params["game.name"] == "kuhn"
    assert mlrun.data.params["network.hidden"] == "64"
    assert mlrun.data.tags["game"] == "kuhn"
    history = client.get_metric_history(mlrun.info.run_id, "loss/advantage")
    assert [m.step for m in history] == [1, 2, 3]
    for name in (
        "eval/exploitability",
        "traversal/nodes",
        "memory/advantage",
        "time/iteration_seconds",
        "time/traversal_seconds",
        "samples/strategy",
    ):
        assert name in mlrun.data.metrics, name
    artifacts = {a.path for a in client.list_artifacts(mlrun.info.run_id)}
    assert {
        "config.yaml",
        "overrides.yaml",
        "metrics.jsonl",
        "learning_curve.png",
        "agent",
    } <= artifacts
    assert "checkpoints" not in artifacts  # hundreds of MB on Lost Cities: only on request
    assert len(read_metrics(tmp_path)) == 3


LEARNED_VALUES = [
    "traversal.scheme=rollout",
    "traversal.branch_prob=0.5",
    "traversal.action_values=learned",
    "traversal.value_traversals_per_player=10",
    "value.steps=10",
    "value.hidden=16",
]


# continued nets on bootstrapped targets, fits sized in passes with a held-out slice, an
# annealed anchor, the moving magnet (the continual policy net) and normalised last layers:
# every piece of state these keep must come back from the checkpoint
BOOTSTRAPPED = [
    "optim.advantage_target=bootstrapped",
    "optim.reinit_advantage=false",
    "optim.advantage_passes=2",
    "optim.advantage_holdout=0.1",
    "traversal.anchor=0.3",
    "traversal.anchor_decay=0.5",
    "optim.policy_training=continual",
    "optim.magnet=0.2",
    "network.normalize_last=true",
]


@pytest.mark.parametrize(
    "values",
    [[], LEARNED_VALUES, BOOTSTRAPPED],
    ids=["external", "learned_values", "bootstrapped"],
)
def test_resumed_run_matches_uninterrupted_run(tmp_path, values):
    common = [
        *values,
        "game=leduc",
        "network=small",
        "tracking.enabled=false",
        "run.progress=false",
        "traversal.traversals_per_player=30",
        "optim.advantage_steps=20",
        "optim.strategy_steps=20",
        "eval.every=2",
        "checkpoint.every=2",
        "run.iterations=4",
    ]
    straight, first, resumed = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    run(common, straight)
    run([*common, "run.iterations=2"], first)
    ckpt = latest_checkpoint(first / "checkpoints")
    run([*common, f"run.resume={ckpt}"], resumed)
    expected = [non_timing(r) for r in read_metrics(straight)]
    # the resumed run's metrics.jsonl starts with the resumed run's rows (steps 1-2)
    got = [non_timing(r) for r in read_metrics(resumed)]
    assert got == expected


def test_bad_checkpoint_fails_with_one_line_naming_the_file(tmp_path):
    run([*KUHN_FAST, "tracking.enabled=false", "run.iterations=1"], tmp_path / "k")
    ckpt = latest_checkpoint(tmp_path / "k" / "checkpoints")
    with pytest.raises(CheckpointError, match=f"{ckpt}.*game 'kuhn', expected 'leduc'"):
        run(
            ["game=leduc", "network=small", "tracking.enabled=false", f"run.resume={ckpt}"],
            tmp_path / "l",
        )
    broken = tmp_path / "broken.pt"
    broken.write_bytes(ckpt.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="broken.pt"):
        run([*KUHN_FAST, "tracking.enabled=false", f"run.resume={broken}"], tmp_path / "m")


def test_command_line_run_and_multirun(tmp_path, mlflow_uri):
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    entry = [sys.executable, "-m", "lostcities.train"]
    overrides = [
        *KUHN_FAST,
        "run.iterations=1",
        "optim.advantage_steps=5",
        "optim.strategy_steps=5",
    ]
    done = subprocess.run(
        [*entry, "-m", *overrides, "run.seed=1,2"],  # -m before the overrides
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "multirun").rglob("metrics.jsonl"))) == 2
    bad = subprocess.run(
        [*entry, *overrides, "run.resume=/nonexistent/ckpt.pt"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2
    assert "error: /nonexistent/ckpt.pt: checkpoint file not found" in bad.stderr


# --- determinism, workers and cadence (issue: worker count is a performance setting) -------
LEDUC_TINY = [
    "game=leduc",
    "network=small",
    "tracking.enabled=false",
    "run.progress=false",
    "determinism=strict",
    "traversal.traversals_per_player=20",
    "optim.advantage_steps=10",
    "optim.strategy_steps=10",
    "optim.advantage_batch_size=64",
    "optim.strategy_batch_size=64",
]
EVAL_ONLY = ("eval/", "loss/strategy")


def final_policy(run_dir: Path) -> dict:
    from lostcities.checkpoint import load_checkpoint

    return load_checkpoint(latest_checkpoint(run_dir / "checkpoints"))["trainer"]["policy_net"]


@pytest.mark.parametrize("policy_training", ["scratch", "continual"])
def test_eval_and_checkpoint_cadence_change_nothing_but_eval_metrics(tmp_path, policy_training):
    common = [*LEDUC_TINY, f"optim.policy_training={policy_training}", "run.iterations=4"]
    run([*common, "eval.every=1", "checkpoint.every=1"], tmp_path / "a")
    run([*common, "eval.every=3", "checkpoint.every=0"], tmp_path / "b")

    def training_metrics(run_dir):
        rows = [non_timing(r) for r in read_metrics(run_dir)]
        return [{k: v for k, v in r.items() if not k.startswith(EVAL_ONLY)} for r in rows]

    assert training_metrics(tmp_path / "a") == training_metrics(tmp_path / "b")
    a, b = final_policy(tmp_path / "a"), final_policy(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    last_a, last_b = read_metrics(tmp_path / "a")[-1], read_metrics(tmp_path / "b")[-1]
    assert last_a["eval/exploitability"] == last_b["eval/exploitability"]


def test_resume_with_another_executor_and_worker_count_continues_the_same_run(tmp_path):
    common = [*LEDUC_TINY, "eval.every=1", "checkpoint.every=1", "run.iterations=3"]
    run(common, tmp_path / "straight")
    run([*common, "run.iterations=2"], tmp_path / "first")
    ckpt = latest_checkpoint(tmp_path / "first" / "checkpoints")
    run(
        [
            *common,
            f"run.resume={ckpt}",
            "executor=processes",
            "executor.num_workers=2",
        ],
        tmp_path / "resumed",
    )
    expected = [non_timing(r) for r in read_metrics(tmp_path / "straight")]
    assert [non_timing(r) for r in read_metrics(tmp_path / "resumed")] == expected


def test_command_line_workers_give_the_same_mlflow_metrics(tmp_path, mlflow_uri):
    from mlflow import MlflowClient

    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    overrides = [o for o in LEDUC_TINY if not o.startswith("tracking.")] + [
        "run.iterations=2",
        "executor=processes",
        "tracking.experiment=workers",
    ]
    for workers in (1, 2):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "lostcities.train",
                *overrides,
                f"executor.num_workers={workers}",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("workers").experiment_id])
    assert sorted(r.data.tags["executor/num_workers"] for r in runs) == ["1", "2"]
    assert {r.data.tags["determinism"] for r in runs} == {"strict"}

    def metrics(mlrun):
        return {k: v for k, v in mlrun.data.metrics.items() if not k.startswith(TIMING)}

    assert metrics(runs[0]) == metrics(runs[1])
    assert "eval/exploitability" in metrics(runs[0])


def test_ctrl_c_stops_workers_and_keeps_the_last_checkpoint(tmp_path):
    import signal
    import time

    from lostcities.checkpoint import load_checkpoint

    overrides = [
        *LEDUC_TINY,
        "executor=processes",
        "executor.num_workers=2",
        "traversal.traversals_per_player=400",
        "run.iterations=1000",
        "eval.every=1000",
        "checkpoint.every=1",
        "hydra.run.dir=run",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lostcities.train", *overrides],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session: every process it starts is findable
        # a shell starts background jobs with SIGINT ignored, and Python then never raises
        # KeyboardInterrupt: the run must start as a terminal's foreground job does
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    ckpts = tmp_path / "run" / "checkpoints"
    deadline = time.monotonic() + 240
    while latest_checkpoint(ckpts) is None and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    assert len(session_processes(proc.pid)) >= 3  # the trainer and its two workers
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "interrupted" in stderr
    time.sleep(0.5)
    assert session_processes(proc.pid) == []
    last = latest_checkpoint(ckpts)
    assert load_checkpoint(last)["trainer"]["iteration"] >= 1


def test_cosine_learning_rate_changes_training_and_restores_the_rate(tmp_path):
    from lostcities.checkpoint import load_checkpoint

    common = [
        *LEDUC_TINY,
        "optim.policy_training=continual",
        "optim.reinit_advantage=false",  # continued: the checkpoint keeps their optimisers
        "run.iterations=2",
        "optim.advantage_lr=0.004",
    ]
    run([*common, "optim.lr_schedule=constant"], tmp_path / "constant")
    run([*common, "optim.lr_schedule=cosine", "optim.strategy_lr=0.002"], tmp_path / "cosine")
    loss = [
        [r["loss/advantage"] for r in read_metrics(tmp_path / d)] for d in ("constant", "cosine")
    ]
    assert loss[0][0] != loss[1][0]  # the schedule reaches the advantage fits
    state = load_checkpoint(latest_checkpoint(tmp_path / "cosine" / "checkpoints"))["trainer"]
    # the continued policy optimiser starts its next fit from the set rate, not from 0
    assert [g["lr"] for g in state["policy_optimizer"]["param_groups"]] == [0.002]
    assert all(g["lr"] == 0.004 for g in state["advantage_optimizers"][0]["param_groups"])
