"""Shared Python face of the small explicit-chance games (Kuhn, Leduc).

A :class:`SmallGame` wraps one Cython kernel state (a ``GameState`` subclass,
see ``_state.pxd``) and adds what the kernel leaves out on purpose: input
validation with readable errors, Python lists instead of C buffers, and
information-state keys for tabular algorithms. Every method here is generic;
:mod:`lostcities.games.kuhn` and :mod:`lostcities.games.leduc` add the game's
documentation, its information-state string and its rendering.

The walk every exact algorithm does with it::

    game = KuhnGame.new()
    if game.is_terminal:     game.returns()                 # (r0, r1), zero-sum
    elif game.is_chance:     game.chance_outcomes()         # [(action, prob), ...]
    else:                    game.legal_actions()           # [action, ...]
    child = game.child(action)                              # clone + apply
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from lostcities.games._state import GameState

CHANCE = -1  # current_player at a chance node (CHANCE_PLAYER in _state.pxd)
TERMINAL = -2  # current_player once the game is over (TERMINAL_PLAYER)


class SmallGame:
    """A state of a small game with explicit chance nodes. Subclasses set the
    class attributes and implement :meth:`information_state` and :meth:`render`."""

    KERNEL: ClassVar[type[GameState]]
    NUM_ACTIONS: ClassVar[int]
    ENCODING_SIZE: ClassVar[int]
    ACTION_NAMES: ClassVar[tuple[str, ...]]

    __slots__ = ("kernel",)

    def __init__(self, kernel: GameState | None = None) -> None:
        if kernel is None:
            kernel = self.KERNEL()
        elif not isinstance(kernel, self.KERNEL):
            raise TypeError(
                f"{type(self).__name__} wraps a {self.KERNEL.__name__}, got {type(kernel).__name__}"
            )
        self.kernel = kernel

    @classmethod
    def new(cls):
        """The initial state: the chance node that deals player 0's card."""
        return cls()

    # --- whose turn ------------------------------------------------------------
    @property
    def current_player(self) -> int:
        """0 or 1 to act, ``CHANCE`` (-1) at a chance node, ``TERMINAL`` (-2) at the end."""
        return self.kernel.player()

    @property
    def is_chance(self) -> bool:
        return self.kernel.player() == CHANCE

    @property
    def is_terminal(self) -> bool:
        return self.kernel.player() == TERMINAL

    # --- moves -----------------------------------------------------------------
    def legal_mask(self) -> np.ndarray:
        """uint8 (NUM_ACTIONS,): 1 where legal; all zero at chance and terminal nodes."""
        return self.kernel.mask()

    def legal_actions(self) -> list[int]:
        """Legal player actions in increasing id order; [] at chance and terminal nodes."""
        return [int(a) for a in np.flatnonzero(self.kernel.mask())]

    def chance_outcomes(self) -> list[tuple[int, float]]:
        """[(action, probability), ...] at a chance node (the action is the card id)."""
        if not self.is_chance:
            raise ValueError(f"not a chance node (current player {self.current_player})")
        actions, probs = self.kernel.chance()
        return [(int(a), float(p)) for a, p in zip(actions, probs, strict=True)]

    def apply(self, action: int) -> None:
        """Apply a chance outcome or a legal action in place.

        Raises ValueError for an illegal action or a finished game."""
        player = self.current_player
        if player == TERMINAL:
            raise ValueError("the game is over: no action can be applied")
        if player == CHANCE:
            legal = [a for a, _ in self.chance_outcomes()]
            if action not in legal:
                raise ValueError(f"illegal chance outcome {action!r}: the cards left are {legal}")
        else:
            legal = self.legal_actions()
            if action not in legal:
                names = ", ".join(f"{a} ({self.ACTION_NAMES[a]})" for a in legal)
                raise ValueError(
                    f"illegal action {action!r} for player {player}: legal are {names}"
                )
        self.kernel.step(int(action))

    def child(self, action: int):
        """A new state: this one after ``action`` (this one is unchanged)."""
        child = self.clone()
        child.apply(action)
        return child

    def clone(self):
        """An independent copy (a C struct copy)."""
        return type(self)(self.kernel.copy())

    # --- outcomes and features -------------------------------------------------
    def returns(self) -> tuple[float, float]:
        """Chips won minus chips put in, per player (zero-sum). Terminal states only."""
        if not self.is_terminal:
            raise ValueError("returns() is defined at terminal states only")
        r = self.kernel.payoffs()
        return float(r[0]), float(r[1])

    def encode(self, player: int) -> np.ndarray:
        """Information-state features of ``player``: float32 (ENCODING_SIZE,)."""
        return self.kernel.encoding(check_player(player))

    def information_state(self, player: int) -> str:
        """A string that identifies ``player``'s information set (a tabular key)."""
        raise NotImplementedError

    def render(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.render()!r})"


def check_player(player: int) -> int:
    """``player`` as an int if it is 0 or 1, else ValueError."""
    if player not in (0, 1):
        raise ValueError(f"player must be 0 or 1, got {player!r}")
    return int(player)
