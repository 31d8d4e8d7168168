"""Games on one C-level interface: Lost Cities, Kuhn poker, Leduc poker.

``make_game(cfg)`` is the one place that maps a game name to its kernel;
everything downstream (traversal, networks, evaluation) works from the
returned ``GameSpec``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lostcities.config import GameConfig
from lostcities.games._state import GameState


@dataclass(frozen=True)
class GameSpec:
    name: str
    prototype: GameState  # a kernel state; traversals reset copies of it
    num_actions: int
    encoding_size: int
    small: bool  # exact exploitability is computable (Kuhn, Leduc)
    # (feature_index (S, encoding_size), action_index (S, num_actions)): relabellings that
    # change no rule (see lost_cities_spec.color_permutations); None when not used.
    symmetries: tuple[np.ndarray, np.ndarray] | None = None


def make_game(cfg: GameConfig) -> GameSpec:
    symmetries = None
    if cfg.name == "lost_cities":
        from lostcities.games.lost_cities import LostCitiesGame
        from lostcities.games.lost_cities_spec import color_permutations

        prototype = LostCitiesGame.from_seed(0, max_turns=cfg.max_turns).kernel
        symmetries = color_permutations()
    elif cfg.name == "kuhn":
        from lostcities.games.kuhn import KuhnGame

        prototype = KuhnGame.new().kernel
    elif cfg.name == "leduc":
        from lostcities.games.leduc import LeducGame

        prototype = LeducGame.new().kernel
    else:  # game.name is one of config.GAMES: checked at start-up (lostcities/config_checks.py)
        raise ValueError(f"unknown game {cfg.name!r}")
    return GameSpec(
        cfg.name,
        prototype,
        prototype.num_actions,
        prototype.encoding_size,
        small=cfg.name != "lost_cities",
        symmetries=symmetries,
    )
