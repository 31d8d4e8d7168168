"""Strategies from networks: regret matching on predicted advantages.

``AdvantagePolicy`` is the callback the traversal kernel queries at every
decision node: it holds each player's current advantage network and turns
predicted advantages into sigma by regret matching.
"""

from __future__ import annotations

import numpy as np
import torch

from lostcities.cfr.initial import InitialStrategy
from lostcities.cfr.initial import uniform as uniform_initial


def regret_matching(advantages: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """sigma from advantages, both (n, A); masks (n, A) uint8/bool.

    Positive advantages, normalised over legal actions. A row with no positive
    legal advantage plays its argmax legal action (Brown et al. 2019 found the
    argmax measurably better than uniform there).
    """
    legal = masks.astype(bool)
    positive = np.where(legal, np.maximum(advantages, 0.0), 0.0).astype(np.float64)
    totals = positive.sum(axis=1, keepdims=True)
    sigma = np.divide(positive, totals, out=np.zeros_like(positive), where=totals > 0)
    flat = totals[:, 0] <= 0
    if flat.any():
        masked = np.where(legal[flat], advantages[flat], -np.inf)
        sigma[np.flatnonzero(flat), masked.argmax(axis=1)] = 1.0
    return sigma


class AdvantagePolicy:
    """sigma_t for both players: regret matching on each player's advantage net.

    A player without a trained network yet plays ``initial`` (uniform by default;
    see :mod:`lostcities.cfr.initial`). With ``warm_start`` c > 0 the initial
    strategy also seeds the regrets (Brown & Sandholm 2016, strategy-based warm
    starting): sigma_{t+1} = RM(c * sigma_1 + R_t), where R_t = sum_i i * r_i is the
    linear-CFR cumulative regret. The network predicts the weighted mean
    R_t / W_t (W_t = sum_i i, passed to ``set_network``), so sigma is
    RM(prediction + c / W_t * sigma_1): the seed counts fully at first and fades
    as regrets accumulate. RM(c * sigma_1) = sigma_1, so iteration 1 is unchanged,
    and a constant initial regret leaves regret matching's average-regret
    bound going to zero.
    With ``cache=True`` sigma is memoised per (player, features) until the
    networks change: exact, and on Kuhn/Leduc nearly every query is a hit.
    Rows are evaluated one player group at a time; a row's result depends
    only on its own features.
    """

    def __init__(
        self,
        device: str = "cpu",
        cache: bool = False,
        initial: InitialStrategy = uniform_initial,
        warm_start: float = 0.0,
    ) -> None:
        if warm_start < 0:
            raise ValueError(f"traversal.warm_start must be >= 0, got {warm_start}")
        self.nets: list[torch.nn.Module | None] = [None, None]
        self.regret_weights = [1.0, 1.0]  # W_t of each player's network
        self.initial = initial
        self.warm_start = warm_start
        self.device = torch.device(device)
        self.cache: dict[tuple[int, bytes], np.ndarray] | None = {} if cache else None

    def set_network(
        self, player: int, net: torch.nn.Module | None, regret_weight: float = 1.0
    ) -> None:
        """``regret_weight``: W_t, the total linear-CFR weight of the regrets the
        network's mean prediction stands for (scales the warm start)."""
        self.nets[player] = net
        self.regret_weights[player] = regret_weight
        if self.cache is not None:
            self.cache.clear()

    def advantages(self, player: int, features: np.ndarray) -> np.ndarray:
        """Predicted advantages (n, A) of ``player``'s network for features (n, d)."""
        net = self.nets[player]
        with torch.inference_mode():
            # np.require copies only read-only input (e.g. GameTree encodings), not the hot path
            out = net(torch.from_numpy(np.require(features, requirements="W")).to(self.device))
        return out.float().cpu().numpy()

    def strategy(self, player: int, features: np.ndarray, masks: np.ndarray) -> np.ndarray:
        if self.nets[player] is None:
            return self.initial(np.full(len(masks), player, dtype=np.int8), features, masks)
        advantages = self.advantages(player, features)
        if self.warm_start > 0:
            seed = self.initial(np.full(len(masks), player, dtype=np.int8), features, masks)
            advantages = advantages + (self.warm_start / self.regret_weights[player]) * seed
        return regret_matching(advantages, masks)

    def __call__(
        self, players: np.ndarray, features: np.ndarray, masks: np.ndarray, out: np.ndarray
    ) -> None:
        """The traversal kernel's callback: write sigma rows (n, A) into ``out``."""
        if self.cache is not None:
            self._cached(players, features, masks, out)
            return
        first = int(players[0])
        if len(players) == 1 or (players == first).all():
            out[:] = self.strategy(first, features, masks)
            return
        for player in (0, 1):
            rows = np.flatnonzero(players == player)
            if len(rows):
                out[rows] = self.strategy(player, features[rows], masks[rows])

    def _cached(self, players, features, masks, out) -> None:
        for i in range(len(players)):
            key = (int(players[i]), features[i].tobytes())
            row = self.cache.get(key)
            if row is None:
                row = self.strategy(key[0], features[i : i + 1], masks[i : i + 1])[0]
                self.cache[key] = row
            out[i] = row
