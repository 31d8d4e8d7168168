"""DeepCFRTrainer options: update order, a larger first iteration, symmetry augmentation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lostcities.cfr.fitting import action_relabel
from lostcities.cfr.policy import AdvantagePolicy
from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.cfr.traversal import TraversalId, TraversalSpec, make_traverser, run_traversals
from lostcities.config import GameConfig, MemoryConfig, NetworkConfig, OptimConfig, TraversalConfig
from lostcities.games import make_game


def kuhn_trainer(
    traversal: TraversalConfig,
    optim: OptimConfig | None = None,
    network: NetworkConfig | None = None,
) -> DeepCFRTrainer:
    kuhn = GameConfig(name="kuhn")
    return DeepCFRTrainer(
        make_game(kuhn),
        TraversalSpec(kuhn, network or NetworkConfig(hidden=8, layers=1), traversal, seed=3),
        MemoryConfig(10_000, 10_000),
        optim or OptimConfig(advantage_steps=5, advantage_batch_size=16),
    )


def memory_rows(memory) -> tuple[np.ndarray, np.ndarray]:
    """Every stored sample, expanded: features (n, d), targets (n, A)."""
    features, _, targets, _ = memory.rows(np.arange(memory.size), torch.device("cpu"))
    return features.numpy(), targets.numpy()


@pytest.mark.parametrize("updates", ["alternating", "simultaneous"])
def test_update_order_decides_what_player_1_traverses_against(updates):
    cfg = TraversalConfig(scheme="external", traversals_per_player=6, updates=updates)
    trainer = kuhn_trainer(cfg)
    trainer.run_iteration()
    # player 1's iteration-1 traversals replayed against sigma_1 (no network yet)
    alone = make_traverser(make_game(GameConfig(name="kuhn")).prototype, AdvantagePolicy(), cfg, 3)
    results = run_traversals(alone, [TraversalId(1, 1, k) for k in range(6)])
    targets = np.concatenate([r.advantage.targets for r in results]).astype(np.float16)
    targets = targets.astype(np.float32)  # float16 storage, float32 minibatches
    same = np.array_equal(memory_rows(trainer.advantage_memories[1])[1], targets)
    assert same == (updates == "simultaneous")
    assert all(net is not None for net in trainer.advantage_nets)


def test_normalized_last_layer_reaches_every_network_and_sigma():
    cfg = TraversalConfig(scheme="external", traversals_per_player=6)
    network = NetworkConfig(hidden=8, layers=2, normalize_last=True)
    trainer = kuhn_trainer(cfg, network=network)
    trainer.run_iteration()
    trainer.run_iteration()
    trainer.train_policy()
    nets = [*trainer.advantage_nets, trainer.policy_net]
    assert all(net.normalize_last for net in nets)
    # sigma's forwards (the per-row kernel for small batches) normalise as torch does
    features = np.eye(trainer.game.encoding_size, dtype=np.float32)[:5]
    with torch.no_grad():
        expected = trainer.advantage_nets[1](torch.from_numpy(features)).numpy()
    np.testing.assert_allclose(trainer.sigma.advantages(1, features), expected, atol=1e-5)
    hidden = trainer.advantage_nets[1].body(torch.from_numpy(features))
    assert hidden.std(dim=1).min() > 0  # a normalisation that changes something
    plain = kuhn_trainer(cfg, network=NetworkConfig(hidden=8, layers=2))
    plain.run_iteration()
    assert not plain.advantage_nets[0].normalize_last


def test_larger_first_iteration_adds_samples_not_weight():
    cfg = TraversalConfig(scheme="external", traversals_per_player=2, first_traversals_per_player=8)
    trainer = kuhn_trainer(cfg)
    assert trainer.run_iteration()["traversal/traversals"] == 16
    assert trainer.run_iteration()["traversal/traversals"] == 4
    weights = trainer._weights(torch.tensor([1.0, 2.0, 1.0]), t=2)
    # iteration 1 ran 4x the traversals, so each of its samples weighs 1/4 of 1/2
    np.testing.assert_allclose(weights.numpy(), [0.125, 1.0, 0.125])
    plain = kuhn_trainer(TraversalConfig(scheme="external", traversals_per_player=2))
    np.testing.assert_allclose(plain._weights(torch.tensor([1.0, 2.0]), t=2).numpy(), [0.5, 1.0])


def test_symmetry_augmentation_relabels_each_row_consistently():
    lost_cities = GameConfig(name="lost_cities")
    game = make_game(lost_cities)
    traversal = TraversalConfig(scheme="rollout", traversals_per_player=1)
    trainer = DeepCFRTrainer(
        game,
        TraversalSpec(lost_cities, NetworkConfig(hidden=8, layers=1), traversal, seed=0),
        MemoryConfig(100, 100),
        OptimConfig(augment_symmetries=True),
    )
    rng = np.random.default_rng(0)
    features = torch.from_numpy(rng.random((64, game.encoding_size), dtype=np.float32))
    masks = torch.from_numpy(rng.random((64, game.num_actions)) < 0.5)
    targets = torch.from_numpy(rng.random((64, game.num_actions), dtype=np.float32))
    relabel = action_relabel(trainer.symmetries)
    new = relabel(features, masks, targets, np.random.default_rng(1))
    feature_index, action_index = game.symmetries
    picks = set()
    for row in range(64):
        # the row's features identify its permutation; masks and targets follow the same one
        (s,) = [s for s in range(120) if torch.equal(new[0][row], features[row][feature_index[s]])]
        assert torch.equal(new[1][row], masks[row][action_index[s]])
        assert torch.equal(new[2][row], targets[row][action_index[s]])
        picks.add(s)
    assert len(picks) > 30  # a fresh draw per row, not one permutation per batch


def test_fits_sized_in_passes_over_their_memory_and_measured_on_a_held_out_slice():
    """advantage_passes: ceil(passes * trained rows / batch) steps, at least
    advantage_steps; advantage_holdout keeps every round(1 / share)-th slot out of the fit
    and reports the net's R^2 on them."""
    cfg = TraversalConfig(scheme="external", traversals_per_player=40)
    optim = OptimConfig(
        advantage_steps=2,
        advantage_batch_size=16,
        advantage_passes=1.5,
        advantage_holdout=0.25,
        advantage_lr=0.01,
    )
    trainer = kuhn_trainer(cfg, optim)
    metrics = trainer.run_iteration()
    for player in (0, 1):
        size = trainer.advantage_memories[player].size
        trained = size - len(range(0, size, 4))  # every 4th slot held out
        steps = -(-3 * trained // (2 * 16))  # ceil(1.5 * trained / 16)
        assert metrics[f"fit/advantage_steps_p{player}"] == steps > 2
        assert metrics[f"fit/advantage_passes_p{player}"] == steps * 16 / size
        assert -1.0 < metrics[f"fit/advantage_r2_p{player}"] <= 1.0
    few = kuhn_trainer(cfg, OptimConfig(advantage_steps=500, advantage_batch_size=16,
                                        advantage_passes=1.0))  # fmt: skip
    metrics = few.run_iteration()
    assert metrics["fit/advantage_steps_p0"] == 500  # the floor
    assert "fit/advantage_r2_p0" not in metrics  # nothing held out, nothing measured


def test_bootstrapped_targets_carry_the_previous_net_and_keep_one_iteration():
    """advantage_target=bootstrapped: the memory holds the running iteration's samples
    only, and a fit regresses (W_{t-1} / W_t) A_{t-1}(I) + (t / W_t) r_t(I) on legal
    actions (0 elsewhere)."""
    from lostcities.cfr.targets import bootstrapped

    previous = torch.nn.Linear(2, 3)
    with torch.no_grad():
        previous.weight.zero_()
        previous.bias.copy_(torch.tensor([3.0, -6.0, 9.0]))
    transform = bootstrapped(previous, t=2)  # W_1 = 1, W_2 = 3
    regrets = torch.tensor([[0.3, 0.6, 0.0]])
    masks = torch.tensor([[True, True, False]])
    got = transform(torch.zeros(1, 2), masks, regrets)
    torch.testing.assert_close(got, torch.tensor([[3.0 / 3 + 0.2, -6.0 / 3 + 0.4, 0.0]]))

    cfg = TraversalConfig(scheme="external", traversals_per_player=6)
    optim = OptimConfig(advantage_steps=5, advantage_batch_size=16, reinit_advantage=False,
                        advantage_target="bootstrapped")  # fmt: skip
    trainer = kuhn_trainer(cfg, optim)
    for t in (1, 2, 3):
        trainer.run_iteration()
        for memory in trainer.advantage_memories:
            assert memory.size > 0 and set(memory.iterations[: memory.size]) == {t}


def test_moving_magnet_pulls_the_fits_towards_the_average_strategy():
    """optim.magnet: each fitted regret gets magnet * pi(a | I) on legal actions, pi the
    policy net's average strategy so far (sigma_1 before it is trained), before the
    bootstrapped recursion; a strong magnet makes sigma_2 play its reference."""
    from lostcities.cfr.targets import bootstrapped, with_magnet

    reference = torch.tensor([[0.25, 0.75, 0.0]])
    previous = torch.nn.Linear(2, 3)
    with torch.no_grad():
        previous.weight.zero_()
        previous.bias.copy_(torch.tensor([3.0, -6.0, 9.0]))
    masks = torch.tensor([[True, True, False]])
    regrets = torch.tensor([[0.3, 0.6, 0.0]])
    pulled = with_magnet(lambda f, m: reference, 2.0, None)(torch.zeros(1, 2), masks, regrets)
    torch.testing.assert_close(pulled, torch.tensor([[0.8, 2.1, 0.0]]))
    then = bootstrapped(previous, t=2)  # W_1 = 1, W_2 = 3
    both = with_magnet(lambda f, m: reference, 2.0, then)(torch.zeros(1, 2), masks, regrets)
    torch.testing.assert_close(both, then(torch.zeros(1, 2), masks, pulled))

    cfg = TraversalConfig(scheme="external", traversals_per_player=30)
    optim = OptimConfig(advantage_steps=300, advantage_batch_size=32, advantage_lr=0.01,
                        strategy_steps=5, policy_training="continual", magnet=50.0)  # fmt: skip
    network = NetworkConfig(hidden=16, layers=2)
    trainer = kuhn_trainer(cfg, optim, network)
    trainer.run_iteration()  # sigma_1 is uniform: sigma_2 = RM(R_1 + 50 * uniform) ~ uniform
    rows, _ = memory_rows(trainer.advantage_memories[0])
    rows = np.unique(rows, axis=0)  # player 0's information states (both actions legal)
    players, legal = np.zeros(len(rows), dtype=np.int8), np.ones((len(rows), 2), dtype=bool)
    sigma_2 = trainer.regret_matching_probs(players, rows, legal)
    np.testing.assert_allclose(sigma_2, 0.5, atol=0.03)
    unpulled = OptimConfig(advantage_steps=300, advantage_batch_size=32, advantage_lr=0.01)
    plain = kuhn_trainer(cfg, unpulled, network)
    plain.run_iteration()
    assert np.abs(plain.regret_matching_probs(players, rows, legal) - 0.5).max() > 0.2
    # from iteration 2 on the magnet is the trained policy net's average strategy
    features, masks = torch.from_numpy(rows), torch.from_numpy(legal)
    with torch.no_grad():
        logits = trainer.policy_net(features)
    torch.testing.assert_close(trainer._magnet(0)(features, masks), torch.softmax(logits, 1))
    fresh = kuhn_trainer(cfg, optim)
    torch.testing.assert_close(fresh._magnet(0)(features, masks), torch.full(masks.shape, 0.5))
