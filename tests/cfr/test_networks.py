"""Networks: the color_shared kind (layout, color equivariance, deterministic init,
training, inference through NetworkForward), the unchanged MLP init, and errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from lostcities.cfr.networks import (
    ACTIONS_PER_COLOR,
    MLP,
    ColorSharedNet,
    build_network,
    lost_cities_layout,
)
from lostcities.cfr.policy import NetworkForward
from lostcities.config import NetworkConfig
from lostcities.games import lost_cities_spec as spec
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.train import train  # noqa: F401  (registers the config schemas)

FEATURE_INDEX, ACTION_INDEX = spec.color_permutations()
# pi of permutation s: the old color whose blocks become color c (read off the pile draws)
PERMS = ACTION_INDEX[:, spec.DRAW_PILE : spec.DRAW_PILE + spec.NUM_COLORS] - spec.DRAW_PILE
SMALL = NetworkConfig(
    name="t", kind="color_shared", hidden=32, layers=2, attention_layers=2, attention_heads=4
)
SHIPPED = NetworkConfig(
    name="color_shared",
    kind="color_shared",
    hidden=128,
    layers=2,
    attention_layers=2,
    attention_heads=4,
)
# Relabelled inputs reach the same tokens in another order: the per-token layers give the
# same values, but attention (softmax and weighted sums over 5 tokens) and the mean pool sum
# in another order. Measured on 2000 real encodings x 120 relabellings, seeds 0-2, hidden
# 128: max |difference| 1.9e-6 for outputs up to 2.0 (about 16 float32 ulps). 1e-5 leaves
# 5x headroom and is still far below any layout error (a wrong block moves outputs by 0.1).
EQUIVARIANCE_TOL = 1e-5


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """These forwards are tiny: on a busy machine, intra-op threads waiting for each other
    at every op made this file 3x slower (measured 18 s against 6 s on 2 loaded cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def lost_cities(cfg: NetworkConfig, seed: int = 0) -> torch.nn.Module:
    return build_network(cfg, spec.ENCODING_SIZE, spec.NUM_ACTIONS, seed)


@functools.cache
def encodings() -> np.ndarray:
    """float32 (n, 1077): the acting player's encoding at every step of 6 random games."""
    rows = []
    rng = np.random.default_rng(0)
    for seed in range(6):
        game = LostCitiesGame.from_seed(seed)
        while not game.is_terminal:
            rows.append(game.encode(game.current_player))
            legal = game.legal_actions()
            game.apply(legal[rng.integers(len(legal))])
    return np.stack(rows).astype(np.float32)


@functools.cache
def small_net(seed: int) -> torch.nn.Module:
    return lost_cities(SMALL, seed)


def forward(net: torch.nn.Module, x: np.ndarray, fast_path: bool) -> torch.Tensor:
    """fast_path: eval mode under inference_mode, where nn.TransformerEncoderLayer runs its
    fused inference kernel (what NetworkForward runs); else train mode with autograd on."""
    net.train(not fast_path)
    try:
        if fast_path:
            with torch.inference_mode():
                return net(torch.from_numpy(x)).clone()
        return net(torch.from_numpy(x)).detach()
    finally:
        net.eval()


# --- layout ---------------------------------------------------------------------------


def test_layout_partitions_features_and_actions_and_matches_color_permutations() -> None:
    color_features, global_features, action_source = lost_cities_layout()
    assert color_features.shape == (spec.NUM_COLORS, 214)
    assert list(global_features) == [750, 801, 802, 853, 854, 1075, 1076]
    assert sorted([*color_features.ravel(), *global_features]) == list(range(spec.ENCODING_SIZE))
    assert sorted(action_source) == list(range(spec.NUM_ACTIONS))
    action_of_column = np.argsort(action_source)
    per_color_actions = action_of_column[:-1].reshape(spec.NUM_COLORS, ACTIONS_PER_COLOR)
    assert action_of_column[-1] == spec.DRAW_DECK
    for s, pi in enumerate(PERMS):
        # feature_index[s] gathers, into color c's block, old color pi[c]'s block
        assert (FEATURE_INDEX[s][color_features] == color_features[pi]).all()
        assert (FEATURE_INDEX[s][global_features] == global_features).all()
        assert (ACTION_INDEX[s][per_color_actions] == per_color_actions[pi]).all()
        assert ACTION_INDEX[s][spec.DRAW_DECK] == spec.DRAW_DECK
    # each color's actions: its 10 plays, its 10 discards, its pile draw
    for color, actions in enumerate(per_color_actions):
        types = color * spec.RANKS_PER_COLOR + np.arange(spec.RANKS_PER_COLOR)
        assert list(actions) == [*(spec.PLAY + types), *(spec.DISCARD + types), 101 + color]


# --- equivariance ---------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    s=st.integers(0, len(PERMS) - 1),
    net_seed=st.integers(0, 2),
    rows=st.lists(st.integers(0, 10**6), min_size=1, max_size=16),
    fast_path=st.booleans(),
)
def test_relabelling_colors_permutes_actions(s, net_seed, rows, fast_path) -> None:
    x = encodings()[np.array(rows) % len(encodings())]
    net = small_net(net_seed)
    y = forward(net, x, fast_path)
    y_relabelled = forward(net, x[:, FEATURE_INDEX[s]], fast_path)
    torch.testing.assert_close(y_relabelled, y[:, ACTION_INDEX[s]], rtol=0, atol=EQUIVARIANCE_TOL)


def test_equivariance_of_the_shipped_size_on_every_relabelling_and_is_not_vacuous() -> None:
    x = encodings()[::32]  # 59 rows from all phases of the games
    net = lost_cities(SHIPPED, seed=11)
    with torch.inference_mode():
        y = net(torch.from_numpy(x))
        relabelled = net(torch.from_numpy(x[:, FEATURE_INDEX]).flatten(0, 1))  # (n * 120, 106)
    expected = y[:, ACTION_INDEX].flatten(0, 1)  # (n * 120, 106), row-major like the input
    torch.testing.assert_close(relabelled, expected, rtol=0, atol=EQUIVARIANCE_TOL)
    # not vacuous: colors are told apart (outputs really move with the relabelling)
    assert (y[:, ACTION_INDEX[1:]] - y[:, None]).abs().amax(dim=(0, 2)).min() > 1e-3
    # and a same-size MLP is not equivariant, so the test can fail
    mlp = build_network(NetworkConfig(hidden=128, layers=2), spec.ENCODING_SIZE, 106, seed=11)
    with torch.inference_mode():
        moved = (
            mlp(torch.from_numpy(x[:, FEATURE_INDEX[7]]))
            - mlp(torch.from_numpy(x))[:, ACTION_INDEX[7]]
        )
    assert moved.abs().max() > 100 * EQUIVARIANCE_TOL


# --- shape, init ----------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("attention_layers", [0, 1])
def test_output_shape(batch, attention_layers) -> None:
    cfg = NetworkConfig(kind="color_shared", hidden=16, layers=1, attention_layers=attention_layers)
    net = lost_cities(cfg)
    assert isinstance(net, ColorSharedNet)
    out = net(torch.from_numpy(encodings()[:batch]))
    assert out.shape == (batch, spec.NUM_ACTIONS)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_color_shared_init_is_deterministic_from_the_seed_only() -> None:
    before = torch.get_rng_state()
    first = lost_cities(SMALL, seed=5).state_dict()
    assert torch.equal(torch.get_rng_state(), before), "the global generator was touched"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)  # another global state changes nothing
        again = lost_cities(SMALL, seed=5).state_dict()
    other = lost_cities(SMALL, seed=6).state_dict()
    assert first.keys() == again.keys() == other.keys()
    assert "color_features" not in first  # index tables are not weights
    for key in first:
        assert torch.equal(first[key], again[key]), key
    linear = [k for k in first if k.endswith("weight") and first[k].dim() == 2]
    assert len(linear) >= 6
    assert not any(torch.equal(first[k], other[k]) for k in linear)


def test_mlp_init_is_unchanged() -> None:
    """Today's MLP init, written out: nn.Linear layers in module order, weight then bias,
    uniform(-1/sqrt(in), 1/sqrt(in)) from a generator seeded with the seed."""
    cfg = NetworkConfig(hidden=24, layers=3)
    for seed in (0, 2**63 - 1):
        net = build_network(cfg, 40, 9, seed)
        assert type(net) is MLP
        generator = torch.Generator().manual_seed(seed)
        reference = {}
        for name, fan_in, fan_out in [
            ("body.0", 40, 24), ("body.2", 24, 24), ("body.4", 24, 24), ("head", 24, 9)
        ]:  # fmt: skip
            bound = 1.0 / fan_in**0.5
            weight = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=generator)
            bias = torch.empty(fan_out).uniform_(-bound, bound, generator=generator)
            reference |= {f"{name}.weight": weight, f"{name}.bias": bias}
        state = net.state_dict()
        assert state.keys() == reference.keys()
        for key, value in reference.items():
            assert torch.equal(state[key], value), key


# --- errors ---------------------------------------------------------------------------


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"network.kind must be one of.*mlp.*color_shared"):
        build_network(NetworkConfig(kind="transformer"), 10, 3, seed=0)


@pytest.mark.parametrize(("dim", "actions"), [(7, 2), (spec.ENCODING_SIZE, 3), (30, 106)])
def test_color_shared_needs_lost_cities(dim, actions) -> None:
    with pytest.raises(ValueError, match="network.kind=color_shared needs game=lost_cities"):
        build_network(SMALL, dim, actions, seed=0)


# --- training, inference, config ------------------------------------------------------


def test_a_training_step_reaches_every_weight() -> None:
    net = lost_cities(SMALL, seed=0).train()
    x = torch.from_numpy(encodings()[:32])
    target = torch.randn(32, spec.NUM_ACTIONS, generator=torch.Generator().manual_seed(0))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), target)
        loss.backward()
        for name, param in net.named_parameters():
            assert param.grad is not None and torch.isfinite(param.grad).all(), name
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    after = net.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k, _ in net.named_parameters())


def test_network_forward_with_and_without_batch_invariance() -> None:
    net = small_net(1)
    x = encodings()[:40]
    batched = NetworkForward(net, torch.device("cpu"), batch_invariant=False)
    per_row = NetworkForward(net, torch.device("cpu"), batch_invariant=True)
    assert per_row.per_row and per_row.rowwise is None  # not an MLP: one row per forward
    out = per_row(x)
    np.testing.assert_allclose(batched(x), out, rtol=0, atol=1e-5)
    # a row's result does not depend on the rows that share its batch
    order = np.random.default_rng(0).permutation(len(x))[:13]
    np.testing.assert_array_equal(per_row(x[order]), out[order])
    np.testing.assert_array_equal(per_row(x[5:6]), out[5:6])


def test_config_group_composes_and_builds() -> None:
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        composed = compose("train", overrides=["network=color_shared"])
        with pytest.raises(ConfigCompositionException):
            compose("train", overrides=["network=color_shared", "network.heads=4"])
    cfg = OmegaConf.to_object(composed.network)
    assert cfg == SHIPPED
    assert composed.game.name == "lost_cities"
    assert isinstance(lost_cities(cfg), ColorSharedNet)
