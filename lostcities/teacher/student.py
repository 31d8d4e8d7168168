"""The student: a policy network trained on the teacher's decisions.

What a decision teaches (``teacher.target``):

- ``move``: the move the searched agent played, one-hot (the teacher's own choice);
- ``search``: a distribution over the searched candidates, softmax((mean_a + w log
  pi(a)) / T): each candidate's mean playout return in points, plus w times the log of
  the blueprint's probability (the prior that made the strongest public Lost Cities
  bot's teacher good: ``mean + 2 log pi``), at temperature T points. Candidates the
  search did not try get nothing. A decision with one candidate teaches that move.

The student is fitted by the policy net's loss (cross-entropy of the masked softmax,
lostcities/cfr/targets.py) through the one fit loop (lostcities/cfr/fitting.py), rows
relabelled by a random color permutation, in ``teacher.passes`` passes over the data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from lostcities.cfr.fitting import Fit, action_relabel, fit
from lostcities.cfr.memory import ReservoirMemory
from lostcities.cfr.networks import build_network
from lostcities.cfr.targets import policy_loss
from lostcities.config import NetworkConfig, TeacherConfig
from lostcities.games import GameSpec
from lostcities.perf.step import TrainingStep
from lostcities.rng import Purpose, Stream, stream_key
from lostcities.teacher.games import TeacherGame


def teacher_targets(
    games: Sequence[TeacherGame], target: str, temperature: float, prior_weight: float
) -> np.ndarray:
    """float32 (n, A): each recorded decision's target distribution (module docstring),
    rows in game order."""
    masks = np.concatenate([g.masks for g in games])
    candidates = np.concatenate([g.candidates for g in games]).astype(np.int64)  # (n, k)
    out = np.zeros(masks.shape, dtype=np.float32)
    rows = np.arange(len(masks))
    if target == "move":
        played = np.concatenate([g.played for g in games]).astype(np.int64)
        out[rows, candidates[rows, played]] = 1.0
        return out
    if target != "search":
        raise ValueError(f"teacher.target must be move or search, got {target!r}")
    means = np.concatenate([g.means for g in games]).astype(np.float64)
    prior = np.concatenate([g.prior for g in games]).astype(np.float64)
    tried = candidates >= 0
    # a candidate the blueprint gives 0 still ranks (the search tried it): floor the log
    logits = (means + prior_weight * np.log(np.maximum(prior, 1e-6))) / temperature
    logits = np.where(tried, logits, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.where(tried, np.exp(logits), 0.0)
    weights /= weights.sum(axis=1, keepdims=True)
    for slot in range(candidates.shape[1]):
        live = tried[:, slot]
        out[rows[live], candidates[live, slot]] = weights[live, slot]
    return out


def decision_memory(game: GameSpec, games: Sequence[TeacherGame], targets: np.ndarray):
    """The decisions as a memory the fit loop draws from (every row kept, float32)."""
    states = np.concatenate([g.states for g in games])
    masks = np.concatenate([g.masks for g in games])
    memory = ReservoirMemory(
        max(1, len(states)),
        game.compact_size,
        game.num_actions,
        game.expand,
        game.max_legal_actions,
        precision="float32",
    )
    memory.add(states, masks, targets, 1, Stream(0))  # fits: the stream is never drawn
    return memory


def train_student(
    game: GameSpec,
    network: NetworkConfig,
    seed: int,
    round_: int,
    current: dict,
    games: Sequence[TeacherGame],
    cfg: TeacherConfig,
    step: TrainingStep,
    device: torch.device,
    augment_symmetries: bool = True,
    progress=None,
) -> tuple[dict, float, int]:
    """Round ``round_``'s student of the run seeded ``seed``: a ``network`` fresh (its
    weights keyed by seed and round) or continued from ``current`` (the current agent's
    policy weights), per ``cfg.student``, fitted on ``games``' decisions for
    ``cfg.passes`` passes; returns (its weights on the CPU, the fit's final loss, steps)."""
    net = build_network(
        network,
        game.encoding_size,
        game.num_actions,
        seed=stream_key(seed, round_, 0, 0, Purpose.STUDENT),
    ).to(device)
    if cfg.student == "continued":
        net.load_state_dict(current)
    key = stream_key(seed, round_, 1, 0, Purpose.STUDENT)  # the fit's minibatches
    generator = np.random.Generator(np.random.PCG64(key))
    targets = teacher_targets(games, cfg.target, cfg.temperature, cfg.prior_weight)
    memory = decision_memory(game, games, targets)
    steps = max(1, math.ceil(cfg.passes * memory.size / cfg.batch_size))
    relabel = None
    if augment_symmetries and game.symmetries is not None:
        relabel = action_relabel(tuple(torch.from_numpy(i).to(device) for i in game.symmetries))
    how = Fit(
        steps,
        cfg.batch_size,
        policy_loss,
        weigh=lambda iterations: torch.ones_like(iterations, dtype=torch.float32),
        relabel=relabel,
        lr_schedule="cosine",
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    loss = fit(net, optimizer, memory, how, generator, step, device, progress)
    weights = {k: v.detach().cpu().clone() for k, v in step.weights(net).items()}
    return weights, loss, steps
