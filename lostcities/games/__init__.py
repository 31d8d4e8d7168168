"""Games on one C-level interface: Lost Cities, Kuhn poker, Leduc poker.

``make_game(cfg)`` is the one place that maps a game name to its kernel;
everything downstream (traversal, networks, evaluation) works from the
returned ``GameSpec``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lostcities.config import GameConfig
from lostcities.games._state import GameState, expand_rows

if TYPE_CHECKING:
    from lostcities.games.small_game import SmallGame


@dataclass(frozen=True)
class GameSpec:
    name: str
    prototype: GameState  # a kernel state; traversals reset copies of it
    num_actions: int
    encoding_size: int
    compact_size: int  # bytes of one compact information state (GameState.compact)
    max_legal_actions: int  # the most legal actions a decision can have
    # a fresh game of the Python wrapper whose whole tree exact exploitability walks
    # (Kuhn, Leduc); None where the tree is too large (Lost Cities)
    exact_root: Callable[[], SmallGame] | None
    # (feature_index (S, encoding_size), action_index (S, num_actions)): relabellings that
    # change no rule (see lost_cities_spec.color_permutations); None when not used.
    symmetries: tuple[np.ndarray, np.ndarray] | None = None

    def expand(self, states: np.ndarray) -> np.ndarray:
        """Features of compact states (see :func:`expand_states`)."""
        return expand_states(self.prototype, states)


def expand_states(prototype: GameState, states: np.ndarray) -> np.ndarray:
    """Features of compact information states, in the kernel: ``states`` uint8 (n, k *
    compact_size), k states per row (a history row holds both seats') -> float32 (n, k *
    encoding_size), bit for bit ``encode`` of the states they were taken from."""
    size = prototype.compact_size
    if states.ndim != 2 or states.dtype != np.uint8 or states.shape[1] % size:
        raise ValueError(
            f"compact states must be uint8 (n, k * {size}), got {states.dtype} {states.shape}"
        )
    out = np.empty((len(states), states.shape[1] // size * prototype.encoding_size), np.float32)
    expand_rows(prototype.copy(), np.ascontiguousarray(states), out)
    return out


def make_game(cfg: GameConfig) -> GameSpec:
    symmetries = None
    max_legal = None  # Kuhn, Leduc: every action can be legal at once
    exact_root = None
    if cfg.name == "lost_cities":
        from lostcities.games.lost_cities import LostCitiesGame
        from lostcities.games.lost_cities_spec import HAND_SIZE, color_permutations

        prototype = LostCitiesGame.from_seed(0, max_turns=cfg.max_turns).kernel
        symmetries = color_permutations()
        max_legal = 2 * HAND_SIZE  # play or discard each card in hand; a draw has <= 6
    elif cfg.name == "kuhn":
        from lostcities.games.kuhn import KuhnGame

        prototype = KuhnGame.new().kernel
        exact_root = KuhnGame.new
    elif cfg.name == "leduc":
        from lostcities.games.leduc import LeducGame

        prototype = LeducGame.new().kernel
        exact_root = LeducGame.new
    else:  # game.name is one of config.GAMES: checked at start-up (lostcities/config_checks.py)
        raise ValueError(f"unknown game {cfg.name!r}")
    return GameSpec(
        cfg.name,
        prototype,
        prototype.num_actions,
        prototype.encoding_size,
        prototype.compact_size,
        max_legal or prototype.num_actions,
        exact_root,
        symmetries=symmetries,
    )
