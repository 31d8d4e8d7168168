"""Traversal workers: the worker count, chunk size and inference batch are performance
settings only. With determinism=strict every partition of the work gives the same metrics,
memories and networks, bit for bit; a dead worker is named, rerun and cleaned up."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lostcities.cfr.executors import WorkerError, run_all
from lostcities.cfr.executors.processes import ProcessExecutor
from lostcities.cfr.executors.scheduler import MAX_AUTO_CHUNK, describe_ids
from lostcities.cfr.policy import AdvantagePolicy, NonFiniteError
from lostcities.cfr.traversal import TraversalId, TraversalSpec, make_traverser, run_traversals
from lostcities.config import GameConfig, TrainConfig, TraversalConfig
from lostcities.games import make_game
from lostcities.train import build_executor, build_trainer

TIMING = ("time/", "traversal/nodes_per_second")

LEDUC = [
    "game=leduc",
    "network=small",
    "traversal.traversals_per_player=24",
    "optim.advantage_steps=10",
    "optim.strategy_steps=10",
    "optim.advantage_batch_size=64",
    "optim.strategy_batch_size=64",
]
LOST_CITIES_BASE = [
    "game=lost_cities",
    "network=small",
    "traversal.first_traversals_per_player=6",
    "traversal.traversals_per_player=3",
    "memory.advantage_capacity=2000",
    "memory.strategy_capacity=2000",
    "optim.advantage_steps=5",
    "optim.strategy_steps=5",
    "optim.advantage_batch_size=32",
    "optim.strategy_batch_size=32",
]
LOST_CITIES = [*LOST_CITIES_BASE, "traversal.action_values=playout"]


LEARNED = [
    "traversal.action_values=learned",
    "traversal.value_traversals_per_player=4",
    "traversal.value_record=0.3",
    "value.steps=6",
    "value.batch_size=32",
    "value.hidden=16",
]
LEDUC_LEARNED = [*LEDUC, "traversal.scheme=rollout", "traversal.branch_prob=0.5", *LEARNED]
LOST_CITIES_LEARNED = [*LOST_CITIES_BASE, *LEARNED]


def config(overrides: list[str]) -> TrainConfig:
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        return OmegaConf.to_object(compose("train", overrides=overrides))


def run_trainer(overrides: list[str], iterations: int) -> dict:
    """Metrics (non-timing) per iteration and every learned array of a short run."""
    cfg = config(overrides)
    game = make_game(cfg.game)
    executor = build_executor(cfg)
    try:
        trainer = build_trainer(cfg, game, executor)
        metrics = []
        for _ in range(iterations):
            row = trainer.run_iteration()
            metrics.append({k: v for k, v in row.items() if not k.startswith(TIMING)})
        trainer.train_policy()
    finally:
        executor.close()
    memories = [*trainer.advantage_memories, trainer.strategy_memory]
    return {
        "metrics": metrics,
        "memories": [
            (m.states[: m.size], m.masks[: m.size], m.targets[: m.size], m.iterations[: m.size])
            for m in memories
        ],
        "weights": [
            {k: v.clone() for k, v in net.state_dict().items()}
            for net in (*trainer.advantage_nets, trainer.policy_net)
            + ((trainer.values.net,) if trainer.values is not None else ())
        ],
    }


def assert_same_run(a: dict, b: dict) -> None:
    assert a["metrics"] == b["metrics"]
    for mem_a, mem_b in zip(a["memories"], b["memories"], strict=True):
        for x, y in zip(mem_a, mem_b, strict=True):
            assert np.array_equal(x, y)
    for net_a, net_b in zip(a["weights"], b["weights"], strict=True):
        assert net_a.keys() == net_b.keys()
        for key in net_a:
            assert torch.equal(net_a[key], net_b[key]), key


PARTITIONS = [
    # (executor, workers, chunk size, inference batch)
    ("processes", 1, 0, 0),
    ("processes", 2, 1, 0),
    ("processes", 4, 5, 0),
    ("processes", 2, 0, 7),
]


@pytest.mark.parametrize(
    ("game", "iterations"),
    [(LEDUC, 3), (LOST_CITIES, 2), (LEDUC_LEARNED, 3), (LOST_CITIES_LEARNED, 2)],
    ids=["leduc", "lost_cities", "leduc_learned_values", "lost_cities_learned_values"],
)
def test_strict_results_do_not_depend_on_workers_chunks_or_inference_batch(game, iterations):
    strict = [*game, "determinism=strict"]
    inline = run_trainer([*strict, "executor=inline"], iterations)
    assert inline["metrics"][-1]["samples/advantage"] > 0
    if "traversal.action_values=learned" in game:
        assert inline["metrics"][-1]["value/samples"] > 0
    for executor, workers, chunk, batch in PARTITIONS:
        other = run_trainer(
            [
                *strict,
                f"executor={executor}",
                f"executor.num_workers={workers}",
                f"executor.chunk_size={chunk}",
                f"traversal.inference_batch={batch}",
            ],
            iterations,
        )
        assert_same_run(inline, other)


def test_inline_inference_batch_is_invisible_under_strict():
    """The lockstep playouts of Lost Cities split into forwards of 3 rows: same run."""
    strict = [*LOST_CITIES, "determinism=strict"]
    assert_same_run(
        run_trainer([*strict, "traversal.inference_batch=0"], 2),
        run_trainer([*strict, "traversal.inference_batch=3"], 2),
    )


def test_chunks_cover_the_ids_in_order():
    cfg = config([*LEDUC, "executor=processes", "executor.num_workers=2"])
    spec = TraversalSpec(cfg.game, cfg.network, cfg.traversal, 0, cfg.determinism)
    with ProcessExecutor(spec, num_workers=2, chunk_size=0) as pool:
        ids = [TraversalId(1, 0, k) for k in range(19)]
        chunks = pool.chunks(ids)
        assert len(chunks) == 7  # about 4 per worker: ceil(19 / 8) = 3 IDs each
        assert [i for c in chunks for i in c] == ids
        many = [TraversalId(1, 0, k) for k in range(10_000)]  # capped: bounded messages
        assert {len(c) for c in pool.chunks(many)} == {MAX_AUTO_CHUNK, 10_000 % MAX_AUTO_CHUNK}
    assert describe_ids(ids[:3]) == "traversal IDs (1, 0, 0)..(1, 0, 2) (3 IDs)"


def test_results_stream_in_id_order_and_an_early_stop_leaves_the_pool_usable():
    """The trainer merges each yielded slice as it comes: the slices must be the chunks,
    in ID order, whichever worker finished first; a caller that stops reading (an error
    while merging) must not leave a worker's late answer for the next call to misread."""
    pool, sigma, ids = _leduc_pool(retries=0)
    cfg = config([*LEDUC, "determinism=strict"])
    inline = make_traverser(make_game(cfg.game).prototype, AdvantagePolicy(), cfg.traversal, 0)
    expected = run_traversals(inline, ids)
    try:
        parts = list(pool.run(ids, sigma))
        assert [[r.id for r in part] for part in parts] == pool.chunks(ids)
        stream = pool.run(ids, sigma)
        next(stream)
        busy = pool.busy_pids()
        stream.close()  # the other worker is still on its chunk
        assert busy and _children_alive(busy) == []
        results = run_all(pool, ids, sigma)
    finally:
        pool.close()
    assert [r.id for r in results] == ids
    for got, want in zip(results, expected, strict=True):
        for x, y in zip(got.advantage + got.strategy, want.advantage + want.strategy, strict=True):
            assert np.array_equal(x, y)


def _leduc_pool(retries: int) -> tuple[ProcessExecutor, AdvantagePolicy, list]:
    cfg = config([*LEDUC, "determinism=strict"])
    spec = TraversalSpec(cfg.game, cfg.network, cfg.traversal, 0, cfg.determinism)
    pool = ProcessExecutor(spec, num_workers=2, chunk_size=100, retries=retries)
    ids = [TraversalId(1, 0, k) for k in range(400)]
    return pool, AdvantagePolicy(), ids


def _kill_a_busy_worker(executor, killed: list) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        busy = executor.busy_pids()
        if busy and busy[0] is not None:
            os.kill(busy[0], signal.SIGKILL)
            killed.append(busy[0])
            return
        time.sleep(0.005)


def _children_alive(pids) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # a zombie still answers kill(0); its state letter says it is gone
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(") ")[1][0] != "Z":
                alive.append(pid)
    return alive


def run_with_a_kill(executor, sigma, ids: list, killed: list) -> tuple[list, list[int]]:
    """(results of ``ids``, every worker pid seen) while one busy worker of ``executor``
    (a pooled executor) is killed mid-chunk; its pid lands in ``killed``. The executor
    is closed after."""
    try:
        run_all(executor, ids[:2], sigma)  # workers up and warm: the kill lands mid-chunk
        killer = threading.Thread(target=_kill_a_busy_worker, args=(executor, killed))
        killer.start()
        try:
            results = run_all(executor, ids, sigma)
        finally:
            killer.join()
        return results, executor.pids() + killed
    finally:
        executor.close()


def assert_inline_results(results: list, ids: list) -> None:
    """``results`` are those of ``ids`` run inline (Leduc, strict), bit for bit."""
    cfg = config([*LEDUC, "determinism=strict"])
    inline = make_traverser(make_game(cfg.game).prototype, AdvantagePolicy(), cfg.traversal, 0)
    assert [r.id for r in results] == ids
    for got, want in zip(results, run_traversals(inline, ids), strict=True):
        assert got.stats == want.stats
        for x, y in zip(got.advantage + got.strategy, want.advantage + want.strategy, strict=True):
            assert np.array_equal(x, y)


def test_killed_worker_is_named_rerun_and_gives_identical_results(caplog):
    pool, sigma, ids = _leduc_pool(retries=1)
    killed: list[int] = []
    with caplog.at_level("WARNING"):
        results, everyone = run_with_a_kill(pool, sigma, ids, killed)
    assert killed and pool.restarts >= 1
    assert "traversal IDs (1, 0, " in caplog.text and "killed by SIGKILL" in caplog.text
    assert_inline_results(results, ids)
    assert _children_alive(everyone) == []


def test_killed_worker_without_retries_stops_with_one_line():
    pool, sigma, ids = _leduc_pool(retries=0)
    killed: list[int] = []
    with pytest.raises(WorkerError) as error:
        run_with_a_kill(pool, sigma, ids, killed)
    message = str(error.value)
    assert "\n" not in message
    assert "traversal IDs (1, 0, " in message and "killed by SIGKILL" in message
    assert _children_alive(pool.pids() + killed) == []


def _nan_policy(player: int = 1, iteration: int = 4) -> AdvantagePolicy:
    cfg = config(LEDUC)
    game = make_game(cfg.game)
    from lostcities.cfr.networks import build_network

    net = build_network(cfg.network, game.encoding_size, game.num_actions, seed=0)
    with torch.no_grad():
        net.head.bias[0] = float("nan")
    sigma = AdvantagePolicy()
    sigma.set_network(player, net, 1.0, iteration)
    return sigma


def test_nan_prediction_fails_naming_player_and_iteration():
    sigma = _nan_policy(player=1, iteration=4)
    game = make_game(GameConfig(name="leduc"))
    traverser = make_traverser(
        game.prototype, sigma, TraversalConfig(scheme="external", traversals_per_player=1), 0
    )
    with pytest.raises(NonFiniteError, match="player 1's network of iteration 4"):
        traverser.run(5, 0, 0)


def test_nan_in_a_worker_stops_the_run_with_the_ids_and_the_cause():
    cfg = config([*LEDUC, "executor=processes"])
    spec = TraversalSpec(cfg.game, cfg.network, cfg.traversal, 0, cfg.determinism)
    with ProcessExecutor(spec, num_workers=1, retries=0) as pool:
        with pytest.raises(WorkerError, match=r"\(5, 0, 0\).*NonFiniteError.*iteration 4"):
            run_all(pool, [TraversalId(5, 0, k) for k in range(3)], _nan_policy())


@pytest.mark.parametrize("debug", [False, True])
def test_kernel_never_applies_an_illegal_or_missing_action(debug):
    game = make_game(GameConfig(name="leduc"))

    def illegal(players, features, masks, out):
        out[:] = 0.0
        out[:, np.argmin(masks[0])] = 1.0  # all mass on an illegal action

    def empty(players, features, masks, out):
        out[:] = 0.0  # sampler returns -1

    cfg = TraversalConfig(scheme="external", debug_checks=debug)
    traverser = make_traverser(game.prototype, empty, cfg, 0)
    with pytest.raises(ValueError, match=r"traversal \(1, 0, 0\): sampled action -1"):
        traverser.run(1, 0, 0)
    if debug:
        traverser = make_traverser(game.prototype, illegal, cfg, 0)
        with pytest.raises(ValueError, match="is not legal"):
            traverser.run(1, 0, 0)


@pytest.mark.parametrize(
    ("game", "iterations"),
    [(LEDUC, 3), (LOST_CITIES_LEARNED, 2)],
    ids=["leduc", "lost_cities_learned_values"],
)
def test_worker_count_is_invisible_without_strict_determinism(game, iterations):
    """determinism=off (the default) keeps worker count and chunk size performance settings:
    every stream is keyed by traversal ID, results merge in ID order, and every worker runs
    one torch thread whatever their number, so the forwards a traversal makes are the same
    computations (only the inference batch size may change bits without strict)."""
    default = [*game, "determinism=off", "executor=processes"]
    one = run_trainer([*default, "executor.num_workers=1"], iterations)
    assert one["metrics"][-1]["samples/advantage"] > 0
    two = run_trainer([*default, "executor.num_workers=2", "executor.chunk_size=1"], iterations)
    assert_same_run(one, two)
