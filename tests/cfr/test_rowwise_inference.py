"""The batch-invariant row-wise MLP forward: kernel against its numpy twin, batch
invariance, construction from modules and state dicts, closeness to torch, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities.cfr.inference import RowwiseMLP
from lostcities.cfr.networks import build_network
from lostcities.config import NetworkConfig
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.reference.rowwise import rowwise_mlp_reference

# Entries of the random feature matrices: mostly zeros (both signs), ones, negatives and
# arbitrary values, like the 0/1 indicators and small counts of the game encodings.
VALUES = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -3.25], dtype=np.float32)


def sparse_features(rows: int, dim: int, density: float, seed: int) -> np.ndarray:
    """(rows, dim) float32: about ``density`` of the entries nonzero."""
    rng = np.random.default_rng(seed)
    shape = (rows, dim)
    nonzero = np.where(
        rng.random(shape) < 0.5, rng.choice(VALUES[2:], size=shape), rng.normal(size=shape)
    )
    zeros = rng.choice(VALUES[:2], size=shape)  # +0.0 and -0.0
    return np.where(rng.random(shape) < density, nonzero, zeros).astype(np.float32)


def torch_forward(net: torch.nn.Module, features: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return net(torch.from_numpy(features)).numpy()


mlp_shapes = st.fixed_dictionaries(
    {
        "dim": st.integers(1, 40),
        "actions": st.integers(1, 12),
        "hidden": st.integers(1, 24),
        "layers": st.integers(1, 3),
        "normalize_last": st.booleans(),
        "seed": st.integers(0, 2**32 - 1),
    }
)
feature_draws = st.fixed_dictionaries(
    {"rows": st.integers(1, 12), "density": st.floats(0.0, 1.0), "seed": st.integers(0, 2**32)}
)


def make(shape: dict) -> torch.nn.Module:
    cfg = NetworkConfig(
        hidden=shape["hidden"],
        layers=shape["layers"],
        normalize_last=shape.get("normalize_last", False),
    )
    return build_network(cfg, shape["dim"], shape["actions"], shape["seed"]).eval()


@settings(max_examples=60, deadline=None)
@given(shape=mlp_shapes, draw=feature_draws)
def test_kernel_matches_numpy_twin_bitwise_and_torch_closely(shape, draw) -> None:
    net = make(shape)
    rowwise = RowwiseMLP.from_module(net)
    features = sparse_features(draw["rows"], shape["dim"], draw["density"], draw["seed"])

    out = rowwise.forward(features)

    assert out.dtype == np.float32 and out.shape == (draw["rows"], shape["actions"])
    assert rowwise.normalize_last == shape["normalize_last"]
    np.testing.assert_array_equal(
        out, rowwise_mlp_reference(rowwise.layers, features, rowwise.normalize_last)
    )
    # the normalisation divides by the hidden layer's spread (at least sqrt(NORM_EPS)),
    # which scales rounding differences by up to ~300
    tolerance = 1e-3 if shape["normalize_last"] else 1e-5
    np.testing.assert_allclose(out, torch_forward(net, features), rtol=1e-4, atol=tolerance)


@settings(max_examples=60, deadline=None)
@given(
    shape=mlp_shapes,
    draw=feature_draws,
    cuts=st.lists(st.integers(0, 12), max_size=4),
    order_seed=st.integers(0, 2**32),
)
def test_row_output_ignores_batch_size_position_and_neighbours(
    shape, draw, cuts, order_seed
) -> None:
    rowwise = RowwiseMLP.from_module(make(shape))
    rows = draw["rows"]
    features = sparse_features(rows, shape["dim"], draw["density"], draw["seed"])
    whole = rowwise.forward(features)

    alone = np.concatenate([rowwise.forward(features[i : i + 1]) for i in range(rows)])
    np.testing.assert_array_equal(alone, whole)

    # Any split of the batch into consecutive chunks.
    bounds = [0, *sorted(c for c in cuts if c < rows), rows]
    chunks = [rowwise.forward(features[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    np.testing.assert_array_equal(np.concatenate(chunks), whole)

    # Any position, among other rows (more rows than one kernel block).
    rng = np.random.default_rng(order_seed)
    others = sparse_features(2 * rows + 9, shape["dim"], 0.5, order_seed)
    mixed = np.concatenate([features, others])
    order = rng.permutation(len(mixed))
    shuffled = rowwise.forward(mixed[order])
    np.testing.assert_array_equal(shuffled[np.argsort(order)][:rows], whole)


def state_dicts(net: torch.nn.Module) -> dict[str, dict]:
    state = net.state_dict()
    return {
        "tensors": state,
        "numpy": {key: value.numpy() for key, value in state.items()},
        "torch.compile keys": {f"_orig_mod.{key}": value for key, value in state.items()},
    }


class FakeCompiled(torch.nn.Module):
    """Stands in for torch.compile's OptimizedModule (``_orig_mod``), which takes seconds
    to create."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self._orig_mod = net


@settings(max_examples=20, deadline=None)
@given(shape=mlp_shapes, draw=feature_draws)
def test_module_and_state_dict_constructions_agree(shape, draw) -> None:
    net = make(shape)
    features = sparse_features(draw["rows"], shape["dim"], draw["density"], draw["seed"])
    expected = RowwiseMLP.from_module(net).forward(features)
    np.testing.assert_array_equal(RowwiseMLP.from_module(FakeCompiled(net))(features), expected)
    for name, state in state_dicts(net).items():
        rowwise = RowwiseMLP.from_state_dict(state, shape["normalize_last"])
        np.testing.assert_array_equal(rowwise.forward(features), expected, err_msg=name)


def test_snapshot_is_independent_of_later_training() -> None:
    net = make({"dim": 6, "actions": 3, "hidden": 5, "layers": 2, "seed": 4})
    features = sparse_features(4, 6, 0.7, 1)
    rowwise = RowwiseMLP.from_module(net)
    before = rowwise.forward(features)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.add_(1.0)
    np.testing.assert_array_equal(rowwise.forward(features), before)
    assert not rowwise.layers[0][0].flags.writeable


def test_out_argument_empty_batch_and_strided_input() -> None:
    rowwise = RowwiseMLP.from_module(
        make({"dim": 7, "actions": 4, "hidden": 9, "layers": 3, "seed": 2})
    )
    features = sparse_features(10, 7, 0.5, 3)
    expected = rowwise.forward(features)

    out = np.full((10, 4), np.nan, dtype=np.float32)
    assert rowwise.forward(features, out=out) is out
    np.testing.assert_array_equal(out, expected)

    np.testing.assert_array_equal(rowwise.forward(features[::2]), expected[::2])
    assert rowwise.forward(np.zeros((0, 7), dtype=np.float32)).shape == (0, 4)
    assert repr(rowwise) == "RowwiseMLP(7 -> 9 -> 9 -> 9 -> 4)"


def test_normalized_last_layer_has_mean_zero_and_unit_variance() -> None:
    """The head of a normalised MLP reads a row of mean 0 and variance 1: an identity
    head (bias 0) shows the normalised layer itself, in the kernel and in torch."""
    net = make({"dim": 7, "actions": 9, "hidden": 9, "layers": 2, "seed": 3})
    net.normalize_last = True
    with torch.no_grad():
        net.head.weight.copy_(torch.eye(9))
        net.head.bias.zero_()
    features = sparse_features(6, 7, 0.8, 5)
    out = RowwiseMLP.from_module(net).forward(features).astype(np.float64)
    live = out.std(axis=1) > 0  # a row whose hidden layer is all equal normalises to 0
    assert live.sum() >= 3
    np.testing.assert_allclose(out[live].mean(axis=1), 0, atol=1e-6)
    np.testing.assert_allclose(out[live].var(axis=1), 1, atol=1e-3)
    np.testing.assert_allclose(out, torch_forward(net, features), atol=1e-4)
    assert repr(RowwiseMLP.from_module(net)) == "RowwiseMLP(7 -> 9 -> 9 -> 9, normalize_last)"


def test_non_finite_features_follow_the_twin() -> None:
    rowwise = RowwiseMLP.from_module(
        make({"dim": 5, "actions": 3, "hidden": 6, "layers": 2, "seed": 8})
    )
    features = np.array(
        [[np.nan, 0, 1, 0, 0], [np.inf, -np.inf, 0, 0, 1], [0, 0, 0, 0, 0]], dtype=np.float32
    )
    np.testing.assert_array_equal(
        rowwise.forward(features), rowwise_mlp_reference(rowwise.layers, features)
    )


def test_friendly_errors() -> None:
    net = make({"dim": 6, "actions": 3, "hidden": 5, "layers": 2, "seed": 0})
    rowwise = RowwiseMLP.from_module(net)
    with pytest.raises(ValueError, match=r"features must have shape \(n, 6\), got \(2, 5\)"):
        rowwise.forward(np.zeros((2, 5), dtype=np.float32))
    with pytest.raises(ValueError, match=r"shape \(n, 6\), got \(6,\)"):
        rowwise.forward(np.zeros(6, dtype=np.float32))
    with pytest.raises(ValueError, match="features must be float32, got float64"):
        rowwise.forward(np.zeros((2, 6)))
    with pytest.raises(ValueError, match=r"out must be .* shape \(2, 3\)"):
        rowwise.forward(np.zeros((2, 6), dtype=np.float32), out=np.zeros((3, 3), np.float32))

    state = net.state_dict()
    with pytest.raises(ValueError, match=r"not the state dict of an MLP.*missing \['head.bias'\]"):
        RowwiseMLP.from_state_dict({k: v for k, v in state.items() if k != "head.bias"})
    with pytest.raises(ValueError, match=r"not the state dict of an MLP.*unexpected \['extra'\]"):
        RowwiseMLP.from_state_dict({**state, "extra": state["head.bias"]})
    with pytest.raises(ValueError, match="not the state dict of an MLP"):
        RowwiseMLP.from_state_dict(torch.nn.Linear(4, 2).state_dict())
    with pytest.raises(ValueError, match="body.2.weight must be float32, got torch.float64"):
        RowwiseMLP.from_state_dict({**state, "body.2.weight": state["body.2.weight"].double()})
    with pytest.raises(ValueError, match="layer 1 takes 4 inputs, the layer before gives 5"):
        RowwiseMLP.from_state_dict({**state, "body.2.weight": torch.zeros(5, 4)})
    with pytest.raises(ValueError, match=r"head.weight must be 2-D"):
        RowwiseMLP.from_state_dict({**state, "head.weight": torch.zeros(15)})
    with pytest.raises(TypeError, match="expects an MLP, got Linear"):
        RowwiseMLP.from_module(torch.nn.Linear(4, 2))
    with pytest.raises(ValueError, match="normalize_last needs a hidden layer"):
        RowwiseMLP(rowwise.layers[-1:], normalize_last=True)


@pytest.fixture(scope="module")
def lost_cities_rows() -> np.ndarray:
    """Encodings (n, 1077) seen by the player to move along random games."""
    rng = np.random.default_rng(11)
    rows = []
    for seed in range(2):
        game = LostCitiesGame.from_seed(seed)
        while not game.is_terminal:
            rows.append(game.encode(game.current_player))
            legal = game.legal_actions()
            game.apply(legal[rng.integers(len(legal))])
    return np.stack(rows)


@pytest.mark.parametrize(
    ("hidden", "layers", "normalize"), [(256, 2, False), (64, 3, False), (256, 2, True)]
)
def test_lost_cities_rows(lost_cities_rows, hidden, layers, normalize) -> None:
    game = LostCitiesGame.from_seed(0).kernel
    cfg = NetworkConfig(hidden=hidden, layers=layers, normalize_last=normalize)
    net = build_network(cfg, game.encoding_size, game.num_actions, 5).eval()
    rowwise = RowwiseMLP.from_module(net)
    features = lost_cities_rows
    whole = rowwise.forward(features)

    picked = np.random.default_rng(0).choice(len(features), size=12, replace=False)
    np.testing.assert_array_equal(
        whole[picked], rowwise_mlp_reference(rowwise.layers, features[picked], normalize)
    )
    alone = np.concatenate([rowwise.forward(features[i : i + 1]) for i in range(len(features))])
    np.testing.assert_array_equal(alone, whole)
    chunks = [rowwise.forward(features[a : a + 13]) for a in range(0, len(features), 13)]
    np.testing.assert_array_equal(np.concatenate(chunks), whole)
    np.testing.assert_allclose(
        whole, torch_forward(net, features), rtol=1e-4, atol=1e-4 if normalize else 1e-5
    )
