"""Reservoir memory and regret matching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lostcities.cfr.memory import ReservoirMemory
from lostcities.cfr.policy import AdvantagePolicy, IterationStrategy, regret_matching
from lostcities.checkpoint import load_checkpoint, save_checkpoint
from lostcities.rng import Stream


def batch(n, dim=4, actions=3, start=0):
    """Rows that carry their sample number exactly (float16 storage: ids split in two)."""
    ids = np.arange(start, start + n)
    features = np.stack([ids // 64, ids % 64] * (dim // 2), axis=1).astype(np.float32)
    masks = np.ones((n, actions), dtype=np.uint8)
    masks[:, -1] = np.arange(n) % 2
    return features, masks, features[:, :actions].copy()


def test_reservoir_fills_then_keeps_capacity_and_a_uniform_sample():
    memory = ReservoirMemory(capacity=1000, dim=4, num_actions=3)
    stream = Stream(1)
    for k in range(20):
        memory.add(*batch(500, start=500 * k), iteration=k + 1, stream=stream)
    assert memory.size == 1000 and memory.seen == 10_000
    ids = memory.features[:, 0].astype(np.float64) * 64 + memory.features[:, 1]
    # uniform over 0..9999: mean ~5000, each decile ~100 samples
    assert abs(ids.mean() - 5000) < 300
    counts = np.histogram(ids, bins=10, range=(0, 10_000))[0]
    assert counts.min() > 60 and counts.max() < 140
    # row integrity: a slot's mask/target/iteration belong to its features
    assert np.all(memory.iterations == ids.astype(np.int64) // 500 + 1)


def test_reservoir_is_deterministic_and_round_trips():
    def fill():
        memory = ReservoirMemory(capacity=64, dim=4, num_actions=3)
        stream = Stream(9)
        for k in range(5):
            memory.add(*batch(40, start=40 * k), iteration=k + 1, stream=stream)
        return memory

    a, b = fill(), fill()
    np.testing.assert_array_equal(a.features, b.features)
    restored = ReservoirMemory(capacity=64, dim=4, num_actions=3)
    restored.load_state_dict(a.state_dict())
    gen = np.random.default_rng(0)
    x = a.sample(16, np.random.default_rng(0), torch.device("cpu"))
    y = restored.sample(16, gen, torch.device("cpu"))
    for u, v in zip(x, y, strict=True):
        assert torch.equal(u, v)
    masks = x[1]
    assert masks.dtype == torch.bool and masks.shape == (16, 3)


def test_bytes_per_sample_is_compact():
    memory = ReservoirMemory(capacity=10, dim=855, num_actions=106)
    # float16 features + packed mask + float16 targets + int32 iteration
    assert memory.bytes_per_sample == 855 * 2 + 14 + 106 * 2 + 4


def sparse_batch(n, rng, dim=40, actions=6):
    """Rows shaped like Lost Cities': features mostly zero (a few ones and fractions),
    targets nonzero at legal actions only. Also -0.0 and NaN, which must survive bit for bit."""
    features = np.where(rng.random((n, dim)) < 0.1, rng.choice([1.0, 0.25, -0.1], (n, dim)), 0.0)
    features[0, 1], features[-1, 2] = -0.0, np.nan
    masks = (rng.random((n, actions)) < 0.4).astype(np.uint8)
    masks[:, 0] = 1
    targets = np.where(masks, rng.normal(size=(n, actions)), 0.0)
    return features.astype(np.float32), masks, targets.astype(np.float32)


def dense_batch(n, rng, dim=40, actions=6):
    """Rows without zeros: sparse storage would be larger, so the state stays dense."""
    masks = np.ones((n, actions), dtype=np.uint8)
    return rng.normal(size=(n, dim)) + 5.0, masks, rng.normal(size=(n, actions)) + 5.0


def filled_memory(make, total, capacity=64, seed=0):
    memory = ReservoirMemory(capacity=capacity, dim=40, num_actions=6)
    rng, stream = np.random.default_rng(seed), Stream(seed)
    for k in range(0, total, 25):
        memory.add(*make(min(25, total - k), rng), iteration=k + 1, stream=stream)
    return memory


def same_bits(a, b):
    """Equal arrays, bit for bit (NaN == NaN, -0.0 != 0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    view = {2: np.uint16, 4: np.uint32}.get(a.itemsize)
    if a.dtype.kind == "f":
        a, b = a.view(view), b.view(view)
    return a.shape == b.shape and np.array_equal(a, b)


def rows_of(saved):
    """First dimension of every stored array: the row count, or nnz for sparse values."""
    return saved["nonzero"].shape[0] if isinstance(saved, dict) else saved.shape[0]


@pytest.mark.parametrize("make", [sparse_batch, dense_batch])
def test_state_dict_holds_only_filled_rows(make):
    memory = filled_memory(make, total=40)  # capacity 64: 24 rows never written
    assert memory.size == 40
    state = memory.state_dict()
    for key in ("features", "masks", "targets", "iterations"):
        assert rows_of(state[key]) == 40, key
    packed = state["features"]
    if make is sparse_batch:  # sparse pays: a pattern plus exactly the nonzero values
        assert isinstance(packed, dict)
        nonzero = memory.features[:40].view(np.uint16) != 0
        assert packed["values"].shape == (nonzero.sum(),)
        assert isinstance(state["targets"], dict)
    else:  # no zeros: the pattern would only add bytes
        assert isinstance(packed, torch.Tensor) and packed.shape == (40, 40)
    assert state["size"] == 40 and state["seen"] == 40 and state["capacity"] == 64


@pytest.mark.parametrize("make", [sparse_batch, dense_batch])
@pytest.mark.parametrize("total", [0, 40, 200])  # empty, partly filled, full and replacing
def test_round_trip_through_a_checkpoint_continues_identically(tmp_path, make, total):
    original = filled_memory(make, total)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"memory": original.state_dict()})  # weights_only-loadable payload
    restored = ReservoirMemory(capacity=64, dim=40, num_actions=6)
    restored.load_state_dict(load_checkpoint(path)["memory"])
    n = original.size
    assert (restored.size, restored.seen) == (n, original.seen)
    for name in ("features", "masks", "targets", "iterations"):
        assert same_bits(getattr(restored, name)[:n], getattr(original, name)[:n]), name
    # Same stream and generator from here: same replacements and the same minibatches.
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    for k in range(4):
        original.add(*make(30, rng_a), iteration=99 + k, stream=Stream(k))
        restored.add(*make(30, rng_b), iteration=99 + k, stream=Stream(k))
    assert (restored.size, restored.seen) == (original.size, original.seen)
    for name in ("features", "masks", "targets", "iterations"):
        assert same_bits(getattr(restored, name), getattr(original, name)), name
    x = original.sample(32, np.random.default_rng(1), torch.device("cpu"))
    y = restored.sample(32, np.random.default_rng(1), torch.device("cpu"))
    for u, v in zip(x, y, strict=True):
        assert same_bits(u.numpy(), v.numpy())


@pytest.mark.parametrize("whole", [True, False])
def test_older_dense_states_still_load(whole):
    """Older checkpoints stored dense arrays: whole (capacity rows) or the filled rows."""
    original = filled_memory(sparse_batch, total=40)
    rows = slice(None) if whole else slice(0, 40)
    old = {"capacity": 64, "size": 40, "seen": 40}  # no dim / num_actions keys back then
    for name in ("features", "masks", "targets", "iterations"):
        old[name] = torch.from_numpy(getattr(original, name)[rows].copy())
    assert old["features"].shape[0] == (64 if whole else 40)
    restored = ReservoirMemory(capacity=64, dim=40, num_actions=6)
    restored.load_state_dict(old)
    assert restored.size == 40 and restored.seen == 40
    for name in ("features", "masks", "targets", "iterations"):
        assert same_bits(getattr(restored, name)[:40], getattr(original, name)[:40]), name


def test_mismatched_states_are_refused():
    state = filled_memory(sparse_batch, total=40).state_dict()
    with pytest.raises(ValueError, match="dim 40, this one 30"):
        ReservoirMemory(capacity=64, dim=30, num_actions=6).load_state_dict(state)
    with pytest.raises(ValueError, match="capacity 16"):
        ReservoirMemory(capacity=16, dim=40, num_actions=6).load_state_dict(state)
    state["features"]["values"] = state["features"]["values"][:-1]
    with pytest.raises(ValueError, match="features hold"):
        ReservoirMemory(capacity=64, dim=40, num_actions=6).load_state_dict(state)


def test_regret_matching_known_answers():
    advantages = np.array([[1.0, 3.0, -2.0], [-1.0, -3.0, -0.5], [2.0, 5.0, 1.0]])
    masks = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 1]], dtype=np.uint8)
    sigma = regret_matching(advantages, masks)
    np.testing.assert_allclose(sigma[0], [0.25, 0.75, 0.0])
    np.testing.assert_allclose(sigma[1], [1.0, 0.0, 0.0])  # none positive: argmax legal
    np.testing.assert_allclose(sigma[2], [2 / 3, 0.0, 1 / 3])  # illegal positive ignored


def test_untrained_player_plays_uniform_and_cache_is_exact():
    policy = AdvantagePolicy(cache=True)
    features = np.ones((2, 4), dtype=np.float32)
    masks = np.array([[1, 1, 0], [1, 0, 0]], dtype=np.uint8)
    out = np.zeros((2, 3))
    policy(np.array([0, 1], np.int8), features, masks, out)
    np.testing.assert_allclose(out, [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    net = torch.nn.Linear(4, 3)
    policy.set_network(0, net)
    cached = np.zeros((1, 3))
    policy(np.array([0], np.int8), features[:1], masks[:1], cached)
    policy(np.array([0], np.int8), features[:1], masks[:1], cached)
    expected = regret_matching(net(torch.from_numpy(features[:1])).detach().numpy(), masks[:1])
    np.testing.assert_allclose(cached, expected)


def _fixed_strategy(players, features, masks):
    """A non-uniform sigma_1: 0.8 on the first legal action, the rest spread."""
    legal = masks.astype(np.float64)
    sigma = 0.2 * legal / legal.sum(axis=1, keepdims=True)
    sigma[np.arange(len(masks)), masks.argmax(axis=1)] += 0.8
    return sigma


def _one_state_net():
    """One information state (features (1, 4), three legal actions) and an advantage net
    predicting the mean regrets R_t / W_t = [-0.1, 0.3, -0.2] there."""
    features = np.ones((1, 4), dtype=np.float32)
    masks = np.array([[1, 1, 1]], dtype=np.uint8)
    net = torch.nn.Linear(4, 3)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.copy_(torch.tensor([-0.1, 0.3, -0.2]))
    return features, masks, net


def test_warm_start_seeds_regrets_with_sigma_1_and_fades():
    features, masks, net = _one_state_net()
    seed = _fixed_strategy(None, features, masks)[0]  # [0.8667, 0.0667, 0.0667]
    policy = AdvantagePolicy(initial=_fixed_strategy, warm_start=0.5)
    out = np.zeros((1, 3))
    policy(np.array([0], np.int8), features, masks, out)
    np.testing.assert_allclose(out, _fixed_strategy(None, features, masks))  # no net: sigma_1
    for weight in (1.0, 10.0):
        policy.set_network(0, net, regret_weight=weight)
        policy(np.array([0], np.int8), features, masks, out)
        expected = regret_matching(np.array([[-0.1, 0.3, -0.2]]) + 0.5 / weight * seed, masks)
        np.testing.assert_allclose(out, expected)
    assert out[0, 1] > 0.9  # at W_t = 10 the regrets dominate the seed
    policy.set_network(0, net, regret_weight=1.0)
    policy(np.array([0], np.int8), features, masks, out)
    assert out[0, 0] > 0.45  # at W_t = 1 the seed still holds sigma_1's favourite


def test_anchor_pulls_towards_sigma_1_at_every_iteration():
    """anchor a adds a * sigma_1 to the mean regrets whatever W_t: unlike the warm-start
    seed c / W_t * sigma_1, it does not fade."""
    features, masks, net = _one_state_net()
    seed = _fixed_strategy(None, features, masks)
    anchored = AdvantagePolicy(initial=_fixed_strategy, warm_start=0.5, anchor=0.6)
    plain = AdvantagePolicy(initial=_fixed_strategy, warm_start=0.5)
    for weight in (1.0, 10.0, 1000.0):
        for policy in (anchored, plain):
            policy.set_network(0, net, regret_weight=weight)
        pull = 0.6 + 0.5 / weight
        np.testing.assert_allclose(
            anchored.regret_scores(0, features, masks), [[-0.1, 0.3, -0.2]] + pull * seed, rtol=1e-6
        )
        np.testing.assert_allclose(
            anchored.regret_scores(0, features, masks) - plain.regret_scores(0, features, masks),
            0.6 * seed,
            rtol=1e-6,
        )
    # at W_t = 1000 the seed is gone: the plain policy follows the regrets, the anchored
    # one still plays sigma_1's favourite most (0.3 + 0.6 * 0.0667 < -0.1 + 0.6 * 0.8667)
    assert plain.strategy(0, features, masks)[0].argmax() == 1
    assert anchored.strategy(0, features, masks)[0].argmax() == 0


def test_regret_scores_are_what_regret_matching_plays_and_order_its_zeros():
    """The scores play-time search ranks by: regret matching of them is sigma, and they
    still order the actions sigma gives probability 0 (iteration_strategies' scores)."""
    features = np.ones((2, 4), dtype=np.float32)
    masks = np.array([[1, 1, 1], [1, 1, 0]], dtype=np.uint8)
    net = torch.nn.Linear(4, 3)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.copy_(torch.tensor([-0.3, 0.2, -0.1]))
    policy = AdvantagePolicy(initial=_fixed_strategy, warm_start=0.1)
    np.testing.assert_allclose(  # no net yet: sigma_1
        policy.regret_scores(0, features, masks), _fixed_strategy(None, features, masks)
    )
    policy.set_network(0, net, regret_weight=1.0)
    scores = policy.regret_scores(0, features, masks)
    seed = _fixed_strategy(None, features, masks)
    np.testing.assert_allclose(scores, np.array([[-0.3, 0.2, -0.1]] * 2) + 0.1 * seed, rtol=1e-6)
    sigma = policy.strategy(0, features, masks)
    np.testing.assert_array_equal(regret_matching(scores, masks), sigma)
    assert sigma[0, 0] == sigma[0, 2] == 0.0 and scores[0, 2] > scores[0, 0]
    strategy = IterationStrategy(policy)  # what iteration_strategies returns per iteration
    np.testing.assert_array_equal(strategy(np.zeros(2, np.int8), features, masks), sigma)
    np.testing.assert_array_equal(strategy.scores(np.zeros(2, np.int8), features, masks), scores)


# --- memory.precision --------------------------------------------------------------------


def precise_rows(n, dim=6, actions=3, seed=0):
    """float32 values float16 cannot hold: fractions, tiny and large regrets."""
    rng = np.random.default_rng(seed)
    features = (rng.random((n, dim)) / 3).astype(np.float32)
    features[0, 0] = 1 / 9  # a Lost Cities-like fraction (a color's top rank / 9)
    targets = rng.normal(scale=50.0, size=(n, actions)).astype(np.float32)
    targets[0, :2] = [1e-6, 70000.0]  # below float16's normal range; above its maximum
    return features, np.ones((n, actions), dtype=np.uint8), targets


def test_float32_memory_returns_exactly_what_it_was_given_and_float16_rounds():
    features, masks, targets = precise_rows(32)
    stored = {}
    for precision in ("float32", "float16"):
        memory = ReservoirMemory(64, dim=6, num_actions=3, precision=precision)
        with np.errstate(over="ignore"):  # 70000 -> float16 inf: what float32 avoids
            memory.add(features, masks, targets, iteration=1, stream=Stream(0))  # slots 0..31
        x, _, y, _ = memory.sample(16, np.random.default_rng(0), torch.device("cpu"))
        idx = np.random.default_rng(0).integers(0, 32, size=16)  # the rows sample() drew
        assert x.dtype == y.dtype == torch.float32  # minibatches are float32 either way
        stored[precision] = (memory, x.numpy(), y.numpy(), idx)
    exact, x, y, idx = stored["float32"]
    assert exact.features.dtype == exact.targets.dtype == np.float32
    assert same_bits(exact.features[:32], features) and same_bits(exact.targets[:32], targets)
    assert same_bits(x, features[idx]) and same_bits(y, targets[idx])
    rounded, x, y, idx = stored["float16"]
    assert rounded.features.dtype == rounded.targets.dtype == np.float16
    assert not np.array_equal(x, features[idx])
    np.testing.assert_allclose(x, features[idx], rtol=1e-3)
    assert rounded.targets[0, 0] != np.float32(1e-6) and np.isinf(rounded.targets[0, 1])
    assert ReservoirMemory(8, dim=6, num_actions=3).features.dtype == np.float16  # default
    assert exact.bytes_per_sample == 6 * 4 + 1 + 3 * 4 + 4
    assert rounded.bytes_per_sample == 6 * 2 + 1 + 3 * 2 + 4


@pytest.mark.parametrize("make", [sparse_batch, dense_batch])
def test_float32_memory_state_round_trips_bit_for_bit(make):
    memory = ReservoirMemory(capacity=64, dim=40, num_actions=6, precision="float32")
    rng, stream = np.random.default_rng(3), Stream(3)
    for k in range(0, 100, 25):
        memory.add(*make(25, rng), iteration=k + 1, stream=stream)
    state = memory.state_dict()
    assert isinstance(state["features"], dict) == (make is sparse_batch)  # sparse still pays
    restored = ReservoirMemory(capacity=64, dim=40, num_actions=6, precision="float32")
    restored.load_state_dict(state)
    for name in ("features", "targets", "masks", "iterations"):
        assert same_bits(getattr(restored, name), getattr(memory, name)), name
    # a float32 state loads into a float16 memory (rounded) and back into float32 unchanged
    half = ReservoirMemory(capacity=64, dim=40, num_actions=6)
    half.load_state_dict(state)
    np.testing.assert_array_equal(half.features, memory.features.astype(np.float16))
    again = ReservoirMemory(capacity=64, dim=40, num_actions=6, precision="float32")
    again.load_state_dict(half.state_dict())
    np.testing.assert_array_equal(again.features, half.features.astype(np.float32))


def test_memory_precision_reaches_the_trainers_memories():
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from lostcities.cfr.memory import PRECISIONS
    from lostcities.config import MEMORY_PRECISIONS, register_configs
    from lostcities.games import make_game
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
        assert {m.features.dtype for m in memories} == {m.targets.dtype for m in memories}
        assert {m.features.dtype for m in memories} == {np.dtype(dtype)}
