"""The learned history value (traversal.action_values=learned): it learns sigma's value,
the regret targets it gives are CFR's, and it is relabelled, checkpointed and resumed
like every other network."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import load_exact_tree

from lostcities.cfr.fitting import history_relabel
from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.cfr.traversal import TraversalSpec
from lostcities.cfr.values import value_loss
from lostcities.config import (
    GameConfig,
    MemoryConfig,
    NetworkConfig,
    OptimConfig,
    TraversalConfig,
    ValueConfig,
)
from lostcities.games import make_game
from lostcities.games.kuhn import KuhnGame

exact_tree = load_exact_tree()


def uniform(game) -> list[float]:
    legal = game.legal_mask()
    return list(legal / legal.sum())


def kuhn_trainer(traversals: int, value: ValueConfig, seed: int = 0) -> DeepCFRTrainer:
    traversal = TraversalConfig(
        scheme="rollout",
        branch_prob=1.0,
        traversals_per_player=50,
        action_values="learned",
        value_traversals_per_player=traversals,
        value_record=1.0,
    )
    kuhn = GameConfig(name="kuhn")
    return DeepCFRTrainer(
        make_game(kuhn),
        TraversalSpec(kuhn, NetworkConfig(hidden=16, layers=2), traversal, seed, value=value),
        MemoryConfig(20_000, 20_000),
        OptimConfig(advantage_steps=20, advantage_batch_size=64),
    )


def history_features(game, seat: int) -> np.ndarray:
    return np.concatenate([game.encode(seat), game.encode(1 - seat)])[None].astype(np.float32)


def test_value_targets_are_unbiased_and_the_network_fits_them_on_kuhn():
    """sigma_1 is uniform. At every decision history a traverser's action leads to (where
    regret targets query the value), from both seats: the value traversals' targets
    average to the exact expected return of uniform play (within 4 standard errors), and
    the network fitted to them predicts their average."""
    trainer = kuhn_trainer(6000, ValueConfig(hidden=32, steps=1500, batch_size=256, lr=3e-3))
    metrics = trainer.values.learn(1, (0, 1), trainer.executor, trainer.sigma, trainer.step)
    assert metrics["value/samples"] > 12_000 and metrics["value/traversals"] == 12_000
    memory = trainer.values.memory
    features = memory.rows(np.arange(memory.size), torch.device("cpu"))[0].numpy()
    targets = memory.targets[: memory.size, 0].astype(np.float64)
    checked = 0
    with torch.no_grad():
        for _, game in exact_tree.histories(KuhnGame.new()):
            if game.is_terminal or game.is_chance or not game.history:
                continue  # the root's decisions are no action's child
            exact = exact_tree.expected_returns(game, uniform)
            for seat in (0, 1):
                row = history_features(game, seat)
                here = targets[np.all(features == row[0], axis=1)]
                assert len(here) > 50
                standard_error = here.std(ddof=1) / np.sqrt(len(here))
                assert abs(here.mean() - exact[seat]) < 4 * standard_error + 1e-9
                learned = trainer.values.net(torch.from_numpy(row)).item()
                assert learned == pytest.approx(here.mean(), abs=0.06)
                checked += 1
    assert checked == 2 * 18


def test_learned_regrets_are_the_values_of_the_children():
    """With learned values a regret target is V(b.a) - sum sigma V(b.a') at a branching
    node: on Kuhn's first decision (uniform sigma_1) both children's values come from the
    network, and the targets' weighted sum is zero."""
    trainer = kuhn_trainer(200, ValueConfig(hidden=8, steps=30))
    trainer.values.learn(1, (0, 1), trainer.executor, trainer.sigma, trainer.step)
    result = trainer.executor.traverser(trainer.sigma).run(1, 0, 0)
    (features, masks, targets), _, stats = result
    assert stats["value_rows"] > 0 and len(targets) >= 1
    sigma = masks / masks.sum(axis=1, keepdims=True)  # uniform
    np.testing.assert_allclose((sigma * targets).sum(axis=1), 0.0, atol=1e-6)


def test_a_history_row_is_relabelled_by_one_symmetry_in_both_halves():
    game = make_game(GameConfig(name="lost_cities"))
    feature_index, _ = (torch.from_numpy(i) for i in game.symmetries)
    relabel = history_relabel((feature_index, None))
    d = game.encoding_size
    rng = np.random.default_rng(0)
    features = torch.from_numpy(rng.random((32, 2 * d), dtype=np.float32))
    masks, targets = torch.ones(32, 1, dtype=torch.bool), torch.from_numpy(rng.random((32, 1)))
    new, new_masks, new_targets = relabel(features, masks, targets, np.random.default_rng(1))
    assert new_masks is masks and new_targets is targets  # a value does not move
    for row in range(32):
        first = features[row, :d]
        (s,) = [s for s in range(120) if torch.equal(new[row, :d], first[feature_index[s]])]
        assert torch.equal(new[row, d:], features[row, d:][feature_index[s]])


def test_value_loss_is_the_weighted_squared_error():
    pred = torch.tensor([[1.0], [2.0]], dtype=torch.float16)
    targets = torch.tensor([[0.0], [0.0]])
    loss = value_loss(pred, torch.ones(2, 1, dtype=torch.bool), targets, torch.tensor([1.0, 0.5]))
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx((1.0 + 0.5 * 4.0) / 2)
