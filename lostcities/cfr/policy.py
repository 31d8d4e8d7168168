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
    see :mod:`lostcities.cfr.initial`).
    With ``cache=True`` sigma is memoised per (player, features) until the
    networks change: exact, and on Kuhn/Leduc nearly every query is a hit.
    Rows are evaluated one player group at a time; a row's result depends
    only on its own features.
    """

    def __init__(
        self, device: str = "cpu", cache: bool = False, initial: InitialStrategy = uniform_initial
    ) -> None:
        self.nets: list[torch.nn.Module | None] = [None, None]
        self.initial = initial
        self.device = torch.device(device)
        self.cache: dict[tuple[int, bytes], np.ndarray] | None = {} if cache else None

    def set_network(self, player: int, net: torch.nn.Module | None) -> None:
        self.nets[player] = net
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
        return regret_matching(self.advantages(player, features), masks)

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
