"""The pure-Python twin of the heuristic playout kernel (``lostcities.eval.search``'s
``heuristic_playouts``, C): the same playouts on ``lost_cities_rules.RulesState`` objects,
for tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lostcities.reference.heuristic import lost_cities_heuristic_reference
from lostcities.rng import Stream


def heuristic_playouts_reference(
    states: Sequence, viewers: Sequence[int], keys: Sequence[int], rollout_play: str = "greedy"
) -> np.ndarray:
    """Play each ``lost_cities_rules.RulesState`` of ``states`` to its end in place, both
    seats on the numpy reference rule (``greedy``: its most probable action; ``sampled``: a draw by
    ``Stream.choice`` from the stream ``keys[i]``); returns float64 (n,): ``viewers[i]``'s
    final score difference."""
    out = np.empty(len(states), dtype=np.float64)
    for i, (state, viewer, key) in enumerate(zip(states, viewers, keys, strict=True)):
        stream = Stream(key)
        while not state.is_terminal:
            player = state.current_player
            sigma = lost_cities_heuristic_reference(
                np.array([player], dtype=np.int8),
                state.encode(player)[None, :],
                state.legal_mask()[None, :],
            )[0]  # (A,)
            if rollout_play == "sampled":
                state.apply(stream.choice(sigma))
            else:
                state.apply(int(sigma.argmax()))
        out[i] = state.returns()[viewer]
    return out
