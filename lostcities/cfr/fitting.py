"""The one training loop of every network Deep CFR fits: advantage, policy and value.

:func:`fit` takes ``steps`` minibatch steps of a network on samples of a reservoir
memory; each step goes through :class:`lostcities.perf.step.TrainingStep` (compile,
autocast, scaler, clipping). What differs between the networks is passed in: the loss,
how a sample is weighted (linear CFR's iteration weights, or uniform), and how a row
is relabelled by a random symmetry of the game (an action-indexed row, a history row,
or not at all).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from lostcities.cfr.memory import ReservoirMemory
from lostcities.perf.step import TrainingStep

Relabel = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, np.random.Generator],
    tuple[torch.Tensor, torch.Tensor, torch.Tensor],
]


@dataclass
class Fit:
    """One fit's settings: ``loss_fn(out, masks, targets, weights)`` -> fp32 loss;
    ``weigh(iterations (b,) float) -> (b,)`` sample weights; ``relabel`` (or None);
    ``lr_schedule``: ``constant`` or ``cosine`` (from the optimiser's rate to 0 over the
    fit; the rate is restored after)."""

    steps: int
    batch_size: int
    loss_fn: Callable[..., torch.Tensor]
    weigh: Callable[[torch.Tensor], torch.Tensor]
    relabel: Relabel | None = None
    lr_schedule: str = "constant"
    holdout_stride: int = 0  # k >= 2: every k-th slot is never trained on (held_out_r2)
    # targets the net regresses, from a (relabelled) minibatch's features (b, d), masks
    # (b, A) and stored targets (b, A); None: the stored targets
    transform: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None


def fit(
    net: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    memory: ReservoirMemory,
    how: Fit,
    generator: np.random.Generator,
    step: TrainingStep,
    device: torch.device,
    progress: Callable[[int, int], None] | None = None,
) -> float:
    """``how.steps`` minibatch steps of ``net`` (the plain module) on ``memory``; returns
    the mean loss of the last 10% of steps (losses an active AMP skipped as non-finite left
    out). ``progress(done, total)`` is told every ~1% of the steps."""
    with step.fitting():
        return _fit(net, optimizer, memory, how, generator, step, device, progress)


def _fit(net, optimizer, memory, how, generator, step, device, progress) -> float:
    forward = step.forward_of(net)
    net.train()
    tail = []
    steps = how.steps
    every = max(1, math.ceil(steps / 100))
    if progress is not None:
        progress(0, steps)
    base_lrs = [group["lr"] for group in optimizer.param_groups]
    for i in range(steps):
        if how.lr_schedule == "cosine":
            # Anneal to 0 within this fit: the last steps average out the sampled targets'
            # noise instead of chasing it at a constant step size.
            scale = 0.5 * (1.0 + math.cos(math.pi * i / steps))
            for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
                group["lr"] = base * scale
        features, masks, targets, iterations = memory.sample(
            how.batch_size, generator, device, holdout_stride=how.holdout_stride
        )
        if how.relabel is not None:
            features, masks, targets = how.relabel(features, masks, targets, generator)
        if how.transform is not None:
            targets = how.transform(features, masks, targets)
        weights = how.weigh(iterations)
        loss = step(net, forward, optimizer, features, how.loss_fn, masks, targets, weights)
        if i >= steps - max(1, steps // 10):
            tail.append(loss.item())
        if progress is not None and ((i + 1) % every == 0 or i + 1 == steps):
            progress(i + 1, steps)
    for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
        group["lr"] = base  # a continued optimiser starts from its base rate again
    step.check()
    if step.skips_nonfinite:
        tail = [x for x in tail if math.isfinite(x)] or [float("nan")]
    return float(np.mean(tail))


def held_out_r2(
    net: torch.nn.Module, memory: ReservoirMemory, how: Fit, device: torch.device
) -> float:
    """R^2 of ``net`` on the memory's held-out rows (every ``how.holdout_stride``-th slot),
    over their legal actions, each entry weighted as the fit weighs its row: 1 - weighted
    squared error / weighted variance of the targets around their weighted mean. NaN
    without held-out rows."""
    if how.holdout_stride < 2:
        return float("nan")
    held_out = memory.held_out(how.holdout_stride)
    error = total = squares = weight = 0.0
    net.eval()
    with torch.no_grad():
        for lo in range(0, len(held_out), 4096):
            features, masks, targets, iterations = memory.rows(held_out[lo : lo + 4096], device)
            if how.transform is not None:
                targets = how.transform(features, masks, targets)
            w = how.weigh(iterations)[:, None].expand_as(targets)[masks].double()
            y = targets[masks].double()
            pred = net(features).float()[masks].double()
            error += float((w * (pred - y) ** 2).sum())
            total += float((w * y).sum())
            squares += float((w * y * y).sum())
            weight += float(w.sum())
    variance = squares - total * total / weight
    return 1.0 - error / variance if variance > 0 else float("nan")


def action_relabel(symmetries: tuple[torch.Tensor, torch.Tensor]) -> Relabel:
    """Each row under its own random symmetry: features (b, d), masks and targets (b, A)
    (``symmetries``: feature_index (S, d), action_index (S, A)). Regrets and sigma are
    equivariant, so the relabelled row is a valid sample."""
    feature_index, action_index = symmetries

    def relabel(features, masks, targets, generator):
        pick = torch.from_numpy(generator.integers(0, len(feature_index), size=len(features)))
        pick = pick.to(feature_index.device)
        actions = action_index[pick]  # (b, A)
        return (
            features.gather(1, feature_index[pick]),
            masks.gather(1, actions),
            targets.gather(1, actions),
        )

    return relabel


def history_relabel(symmetries: tuple[torch.Tensor, torch.Tensor]) -> Relabel:
    """Each history row (both seats' encodings: features (b, 2d)) under its own random
    symmetry, the same one for both halves; a value does not change under a relabelling
    of the game, so masks and targets (b, 1) stay."""
    feature_index, _ = symmetries
    d = feature_index.shape[1]
    both = torch.cat([feature_index, feature_index + d], dim=1)  # (S, 2d)

    def relabel(features, masks, targets, generator):
        pick = torch.from_numpy(generator.integers(0, len(both), size=len(features)))
        return features.gather(1, both[pick.to(both.device)]), masks, targets

    return relabel
