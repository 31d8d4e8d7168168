"""What each fit regresses, and how long: the advantage nets' regret targets (bootstrapped
across iterations, pulled by the moving magnet), the masked losses of both kinds of fit,
and a fit's step count. The trainer composes them (lostcities/cfr/trainer.py).
"""

from __future__ import annotations

import math

import torch

from lostcities.cfr.policy import regret_weight


def bootstrapped(previous: torch.nn.Module, t: int):
    """The bootstrapped target of iteration t: (W_{t-1} / W_t) A_{t-1}(I) + (t / W_t) r_t(I)
    on the legal actions, from the frozen network A_{t-1} and the sampled regrets r_t
    (features (b, d), masks (b, A) bool, regrets (b, A) -> (b, A))."""
    keep, new = regret_weight(t - 1) / regret_weight(t), t / regret_weight(t)

    def transform(features, masks, regrets):
        with torch.no_grad():
            carried = previous(features).float()
        return torch.where(masks, keep * carried + new * regrets, torch.zeros_like(regrets))

    return transform


def with_magnet(magnet, weight: float, then):
    """Targets pulled by the moving magnet: the sampled regrets plus ``weight`` *
    magnet(I) on the legal actions, then ``then`` (the bootstrapped recursion) if given;
    (features (b, d), masks (b, A) bool, regrets (b, A)) -> (b, A)."""

    def transform(features, masks, regrets):
        pulled = torch.where(masks, regrets + weight * magnet(features, masks), regrets)
        return pulled if then is None else then(features, masks, pulled)

    return transform


def fit_steps(steps: int, passes: float, batch_size: int, rows: int) -> int:
    """A fit's steps: ``steps``, or enough for ``passes`` over ``rows`` samples if more."""
    return max(steps, math.ceil(passes * rows / batch_size))


def regret_loss(pred, masks, targets, weights):
    # pred, targets: (b, A); masks: (b, A) bool; weights: (b,). MSE over legal actions only,
    # in fp32 whatever the forward's precision (an fp16 square overflows past ~256).
    pred = pred.float()  # a no-op on fp32
    squared = torch.where(masks, (pred - targets) ** 2, torch.zeros_like(pred))
    return (weights[:, None] * squared).sum() / masks.sum().clamp(min=1)


def policy_loss(logits, masks, targets, weights):
    # Cross-entropy of the masked softmax against sigma, weighted by iteration; fp32
    # whatever the forward's precision (the -inf fill and log-softmax stay exact).
    logits = logits.float()  # a no-op on fp32
    logits = logits.masked_fill(~masks, float("-inf"))
    log_probs = torch.log_softmax(logits, dim=1).masked_fill(~masks, 0.0)
    return -(weights[:, None] * targets * log_probs).sum() / len(targets)
