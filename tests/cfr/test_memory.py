"""Reservoir memories: compact rows in, expanded minibatches out, checkpoints that continue
the reservoir exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lostcities.cfr.memory import ReservoirMemory
from lostcities.checkpoint import load_checkpoint, save_checkpoint
from lostcities.config import GameConfig
from lostcities.games import make_game
from lostcities.rng import Stream

CPU = torch.device("cpu")
ACTIONS, SLOTS = 6, 4


def bytes_as_floats(states):
    """A stand-in for a game's expand: each byte becomes one float feature."""
    return states.astype(np.float32)


def memory(capacity=64, precision="float16", state_size=4, slots=SLOTS):
    return ReservoirMemory(capacity, state_size, ACTIONS, bytes_as_floats, slots, precision)


def batch(n, start=0, rng=None):
    """Rows that carry their sample number (states: id // 256, id % 256, twice), at most
    SLOTS legal actions per row, regrets at the legal ones only."""
    rng = rng or np.random.default_rng(start)
    ids = np.arange(start, start + n)
    states = np.stack([ids // 256, ids % 256] * 2, axis=1).astype(np.uint8)
    masks = np.zeros((n, ACTIONS), dtype=np.uint8)
    for row in range(n):
        masks[row, rng.choice(ACTIONS, size=rng.integers(1, SLOTS + 1), replace=False)] = 1
    targets = np.where(masks, rng.normal(size=(n, ACTIONS)), 0.0).astype(np.float32)
    return states, masks, targets


def ids_of(states):
    return states[:, 0].astype(np.int64) * 256 + states[:, 1]


def test_reservoir_fills_then_keeps_capacity_and_a_uniform_sample():
    mem = memory(capacity=1000)
    stream = Stream(1)
    for k in range(20):
        mem.add(*batch(500, start=500 * k), iteration=k + 1, stream=stream)
    assert mem.size == 1000 and mem.seen == 10_000
    ids = ids_of(mem.states)
    # uniform over 0..9999: mean ~5000, each decile ~100 samples
    assert abs(ids.mean() - 5000) < 300
    counts = np.histogram(ids, bins=10, range=(0, 10_000))[0]
    assert counts.min() > 60 and counts.max() < 140
    # row integrity: a slot's iteration belongs to its state
    assert np.all(mem.iterations == ids // 500 + 1)


def test_minibatches_are_the_inserted_rows_expanded():
    """sample() gives back each drawn row's expanded state, its mask and its targets at the
    legal actions (0 elsewhere), whatever the legal count; float32 storage is exact."""
    states, masks, targets = batch(50, rng=np.random.default_rng(3))
    mem = memory(precision="float32")
    mem.add(states, masks, targets, iteration=7, stream=Stream(0))
    features, got_masks, got_targets, iterations = mem.sample(40, np.random.default_rng(2), CPU)
    idx = np.random.default_rng(2).integers(0, 50, size=40)  # the rows sample() drew
    assert features.dtype == got_targets.dtype == iterations.dtype == torch.float32
    assert got_masks.dtype == torch.bool
    np.testing.assert_array_equal(features.numpy(), states[idx].astype(np.float32))
    np.testing.assert_array_equal(got_masks.numpy(), masks[idx].astype(bool))
    np.testing.assert_array_equal(got_targets.numpy(), targets[idx])
    assert set(iterations.tolist()) == {7.0}


def test_float16_targets_are_rounded_and_float32_kept():
    states, masks, targets = batch(8)
    targets[masks.astype(bool)] = 1 / 3
    stored = {}
    for precision in ("float16", "float32"):
        mem = memory(precision=precision)
        mem.add(states, masks, targets, iteration=1, stream=Stream(0))
        stored[precision] = mem.rows(np.arange(8), CPU)[2].numpy()
    np.testing.assert_array_equal(stored["float32"], targets)
    assert not np.array_equal(stored["float16"], targets)
    np.testing.assert_allclose(stored["float16"], targets, rtol=1e-3)
    assert memory().targets.dtype == np.float16  # the default


def test_a_row_with_more_legal_actions_than_slots_is_refused():
    states, masks, targets = batch(3)
    masks[1, :5] = 1
    with pytest.raises(ValueError, match="5 legal actions, more than this memory's 4"):
        memory().add(states, masks, targets, iteration=1, stream=Stream(0))


def test_lost_cities_sample_takes_114_bytes():
    game = make_game(GameConfig(name="lost_cities"))
    mem = ReservoirMemory(
        10, game.compact_size, game.num_actions, game.expand, game.max_legal_actions
    )
    # 64-byte compact state + packed mask + 16 float16 targets + int32 iteration
    assert mem.bytes_per_sample == 64 + 14 + 16 * 2 + 4 == 114


def test_lost_cities_rows_expand_to_their_encodings():
    """A memory of real Lost Cities states gives back, bit for bit, their features."""
    game = make_game(GameConfig(name="lost_cities"))
    state, rng = game.prototype.copy(), np.random.default_rng(0)
    state.reset_from_state(11)
    rows, features, masks = [], [], []
    while state.player() >= 0 and len(rows) < 40:
        player = state.player()
        rows.append(state.compact_view(player))
        features.append(state.encoding(player))
        masks.append(state.mask())
        state.step(int(rng.choice(state.legal())))
    mem = ReservoirMemory(
        64, game.compact_size, game.num_actions, game.expand, game.max_legal_actions
    )
    masks = np.array(masks)
    mem.add(np.array(rows), masks, masks.astype(np.float32), iteration=1, stream=Stream(0))
    got, got_masks, got_targets, _ = mem.rows(np.arange(len(rows)), CPU)
    assert got.numpy().view(np.uint32).tolist() == np.array(features).view(np.uint32).tolist()
    np.testing.assert_array_equal(got_masks.numpy(), masks.astype(bool))
    np.testing.assert_array_equal(got_targets.numpy(), masks.astype(np.float32))


def filled(total, capacity=64, precision="float16", seed=0):
    mem = memory(capacity=capacity, precision=precision)
    stream = Stream(seed)
    for k in range(0, total, 25):
        mem.add(*batch(min(25, total - k), start=k), iteration=k + 1, stream=stream)
    return mem


@pytest.mark.parametrize("total", [0, 40, 200])  # empty, partly filled, full and replacing
def test_round_trip_through_a_checkpoint_continues_identically(tmp_path, total):
    original = filled(total)
    state = original.state_dict()
    n = original.size
    for key in ("states", "masks", "targets", "iterations"):
        assert state[key]["shape"][0] == n, key  # the filled rows only
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"memory": state})  # weights_only-loadable payload
    restored = memory()
    restored.load_state_dict(load_checkpoint(path)["memory"])
    assert (restored.size, restored.seen) == (n, original.seen)
    names = ("states", "masks", "targets", "iterations")
    for name in names:
        np.testing.assert_array_equal(getattr(restored, name)[:n], getattr(original, name)[:n])
    # Same stream and generator from here: same replacements and the same minibatches.
    for k in range(4):
        original.add(*batch(30, start=1000 + 30 * k), iteration=99 + k, stream=Stream(k))
        restored.add(*batch(30, start=1000 + 30 * k), iteration=99 + k, stream=Stream(k))
    assert (restored.size, restored.seen) == (original.size, original.seen)
    for name in names:
        np.testing.assert_array_equal(getattr(restored, name), getattr(original, name))
    x = original.sample(32, np.random.default_rng(1), CPU)
    y = restored.sample(32, np.random.default_rng(1), CPU)
    for u, v in zip(x, y, strict=True):
        assert torch.equal(u, v)


def test_a_float32_state_loads_into_a_float16_memory_rounded():
    exact = filled(40, precision="float32")
    half = memory()
    half.load_state_dict(exact.state_dict())
    np.testing.assert_array_equal(half.targets[:40], exact.targets[:40].astype(np.float16))


def test_mismatched_and_older_states_are_refused():
    state = filled(40).state_dict()
    with pytest.raises(ValueError, match="state_size 4, this one 8"):
        memory(state_size=8).load_state_dict(state)
    with pytest.raises(ValueError, match="target_slots 4, this one 6"):
        memory(slots=6).load_state_dict(state)
    with pytest.raises(ValueError, match="capacity 16"):
        memory(capacity=16).load_state_dict(state)
    state["targets"]["data"] = state["targets"]["data"][:-3]
    with pytest.raises(ValueError, match="saved targets are corrupt"):
        memory().load_state_dict(state)
    older = {"capacity": 64, "size": 0, "seen": 0, "features": torch.zeros(0, 4)}
    with pytest.raises(ValueError, match="feature rows, a format from before compact"):
        memory().load_state_dict(older)


def test_memory_precision_reaches_the_trainers_memories():
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from lostcities.cfr.memory import PRECISIONS
    from lostcities.config import MEMORY_PRECISIONS, register_configs
    from lostcities.train import build_trainer

    register_configs()
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        default = OmegaConf.to_object(compose("train", overrides=["game=kuhn"]))
        wide = OmegaConf.to_object(
            compose("train", overrides=["game=kuhn", "memory.precision=float32"])
        )
    assert default.memory.precision == "float16"
    assert tuple(PRECISIONS) == MEMORY_PRECISIONS  # the vocabulary is what memory.py stores
    for cfg, dtype in ((default, np.float16), (wide, np.float32)):
        trainer = build_trainer(cfg, make_game(cfg.game))
        memories = [*trainer.advantage_memories, trainer.strategy_memory]
        assert {m.targets.dtype for m in memories} == {np.dtype(dtype)}
        assert {m.states.dtype for m in memories} == {np.dtype(np.uint8)}
