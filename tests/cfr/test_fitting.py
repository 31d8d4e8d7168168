"""The held-out measure of a fit: known answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lostcities.cfr.fitting import Fit, held_out_r2
from lostcities.cfr.memory import ReservoirMemory
from lostcities.rng import Stream


def linear_memory(n=200, seed=0):
    """Rows whose targets are a known linear map of their (byte) features, all legal."""
    rng = np.random.default_rng(seed)
    states = rng.integers(0, 4, size=(n, 3)).astype(np.uint8)
    weight = np.array([[1.0, -2.0], [0.5, 0.0], [0.0, 3.0]])
    targets = (states @ weight).astype(np.float32)
    memory = ReservoirMemory(n, 3, 2, lambda s: s.astype(np.float32), 2, "float32")
    memory.add(states, np.ones((n, 2), np.uint8), targets, iteration=1, stream=Stream(0))
    net = torch.nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.from_numpy(weight.T))
    return memory, net, targets


def fit_of(stride):
    return Fit(1, 8, loss_fn=None, weigh=torch.ones_like, holdout_stride=stride)


def test_r2_is_one_for_the_true_map_and_zero_for_the_mean():
    memory, net, targets = linear_memory()
    cpu = torch.device("cpu")
    assert held_out_r2(net, memory, fit_of(4), cpu) == pytest.approx(1.0)
    mean = torch.nn.Linear(3, 2)
    with torch.no_grad():  # predicts the held-out rows' mean, pooled over both actions
        mean.weight.zero_()
        mean.bias.fill_(float(targets[::4].mean()))
    assert held_out_r2(mean, memory, fit_of(4), cpu) == pytest.approx(0.0, abs=1e-9)
    assert np.isnan(held_out_r2(net, memory, fit_of(0), cpu))  # nothing held out


def test_a_fit_never_draws_a_held_out_row():
    """With holdout_stride k the minibatches draw every slot but the multiples of k, which
    are the held-out rows."""
    ids = np.arange(30)
    states = np.stack([ids // 16, ids // 4 % 4, ids % 4], axis=1).astype(np.uint8)
    memory = ReservoirMemory(30, 3, 2, lambda s: s.astype(np.float32), 2, "float32")
    memory.add(states, np.ones((30, 2), np.uint8), np.zeros((30, 2), np.float32), 1, Stream(0))
    drawn = set()
    generator = np.random.default_rng(0)
    for _ in range(50):
        features = memory.sample(16, generator, torch.device("cpu"), holdout_stride=3)[0]
        drawn |= set((features.numpy().astype(np.int64) @ np.array([16, 4, 1])).tolist())
    np.testing.assert_array_equal(memory.held_out(3), np.arange(0, 30, 3))
    assert drawn == set(range(30)) - set(range(0, 30, 3))
