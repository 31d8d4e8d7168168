"""Regret matching and the strategies it plays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lostcities.cfr.policy import AdvantagePolicy, IterationStrategy, regret_matching


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


def test_anchor_decay_anneals_the_pull_with_the_networks_iteration():
    """a_t = anchor * t^-decay: the network of iteration t is pulled by a_t * sigma_1; the
    warm start still fades as c / W_t beside it. Decay 0 is the constant anchor."""
    features, masks, net = _one_state_net()
    seed = _fixed_strategy(None, features, masks)
    annealed = AdvantagePolicy(initial=_fixed_strategy, warm_start=0.5, anchor=0.6,
                               anchor_decay=0.5)  # fmt: skip
    constant = AdvantagePolicy(initial=_fixed_strategy, anchor=0.6)
    for t in (1, 4, 100):
        annealed.set_network(0, net, regret_weight=t * (t + 1) / 2, iteration=t)
        constant.set_network(0, net, iteration=t)
        pull = 0.6 / t**0.5 + 0.5 / (t * (t + 1) / 2)
        assert annealed.anchor_pull(0) == pytest.approx(0.6 / t**0.5)
        assert constant.anchor_pull(0) == 0.6
        np.testing.assert_allclose(
            annealed.regret_scores(0, features, masks), [[-0.1, 0.3, -0.2]] + pull * seed, rtol=1e-6
        )
    # by iteration 100 the pull (0.06) no longer outweighs the learned regrets
    assert annealed.strategy(0, features, masks)[0].argmax() == 1
    assert constant.strategy(0, features, masks)[0].argmax() == 0


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
