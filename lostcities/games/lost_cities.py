"""Lost Cities, classic rules: the documented Python face of the Cython kernel.

    >>> game = LostCitiesGame.from_seed(7)
    >>> game.apply(game.legal_actions()[0])

Card types, the 106-action layout and the 1077-float information-state
encoding are documented in :mod:`lostcities.games.lost_cities_spec`. The
kernel (``_lost_cities.pyx``) holds the state in C memory; this wrapper
validates input, gives readable errors, and offers views (hands,
expeditions, piles), scores, rendering and a compact serialisation.
:mod:`lostcities.reference.lost_cities_rules` is the slow reference with the same API.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from lostcities.games import lost_cities_spec as spec
from lostcities.games._lost_cities import LostCitiesState
from lostcities.rng import Purpose, stream_key

SERIAL_MAGIC = b"LC1"
TERMINAL = -2


def deal_key(seed: int) -> int:
    """Stream key of the seeded deal (shared with the reference rules)."""
    return stream_key(seed, 0, 0, 0, Purpose.DEAL)


class LostCitiesGame:
    """One game of Lost Cities. Build with :meth:`from_seed` or :meth:`from_deal`."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: LostCitiesState) -> None:
        self.kernel = kernel

    # --- construction ----------------------------------------------------------
    @classmethod
    def from_seed(cls, seed: int, max_turns: int = spec.DEFAULT_MAX_TURNS) -> LostCitiesGame:
        """A game dealt from ``seed`` (same deal as ``lost_cities_rules.RulesState.from_seed``)."""
        kernel = LostCitiesState(_check_max_turns(max_turns))
        kernel.deal_seed(deal_key(seed))
        return cls(kernel)

    @classmethod
    def from_deal(
        cls,
        hands: tuple[list[int], list[int]],
        draw_pile: list[int],
        first_player: int = 0,
        max_turns: int = spec.DEFAULT_MAX_TURNS,
    ) -> LostCitiesGame:
        """A game from an explicit deal: two hands of 8 card types and the
        44-card draw pile (top last). All 60 cards must be accounted for."""
        _check_deal(hands, draw_pile, first_player)
        kernel = LostCitiesState(_check_max_turns(max_turns))
        kernel.deal([*hands[0], *hands[1], *draw_pile], first_player)
        return cls(kernel)

    # --- state -----------------------------------------------------------------
    @property
    def current_player(self) -> int:
        """0 or 1 to act; -2 when the game is over."""
        return self.kernel.player()

    @property
    def phase(self) -> int:
        """0: play or discard a card; 1: draw."""
        return self.kernel.phase

    @property
    def is_terminal(self) -> bool:
        return self.kernel.terminal

    @property
    def capped(self) -> bool:
        """True when the game ended by the turn cap rather than an empty draw pile."""
        return self.kernel.capped

    @property
    def turns(self) -> int:
        return self.kernel.turns

    @property
    def max_turns(self) -> int:
        return self.kernel.max_turns

    @property
    def just_discarded(self) -> int:
        """Card type discarded in this turn's first step, or -1."""
        return self.kernel.just_discarded

    @property
    def draw_pile(self) -> list[int]:
        """Card types of the draw pile, bottom first, top last."""
        return self.kernel.deck_cards()

    def hand(self, player: int) -> list[int]:
        """Sorted card types in ``player``'s hand (wagers may repeat)."""
        return _expand(self.kernel.hand_counts(_check_player(player)))

    def known(self, player: int) -> list[int]:
        """Card types the opponent knows ``player`` holds (taken from discards)."""
        return _expand(self.kernel.known_counts(_check_player(player)))

    def expedition(self, player: int, color: int) -> list[int]:
        """Card types on ``player``'s expedition of ``color``, in play order."""
        counts = self.kernel.played_counts(_check_player(player))
        base = _check_color(color) * spec.RANKS_PER_COLOR
        return _expand(counts[base : base + spec.RANKS_PER_COLOR], offset=base)

    def discard_pile(self, color: int) -> list[int]:
        """Card types of ``color``'s discard pile, bottom first, top last."""
        return self.kernel.pile_cards(_check_color(color))

    # --- actions -----------------------------------------------------------------
    def legal_mask(self) -> np.ndarray:
        """uint8 array of shape (106,), 1 where the action is legal."""
        return self.kernel.mask()

    def legal_actions(self) -> list[int]:
        return self.kernel.legal().tolist()

    def apply(self, action: int) -> None:
        """Apply ``action``; ValueError if it is not legal here."""
        if self.is_terminal:
            raise ValueError(f"illegal action {action}: the game is over")
        if not 0 <= action < spec.NUM_ACTIONS or not self.kernel.mask()[action]:
            name = spec.action_name(action) if 0 <= action < spec.NUM_ACTIONS else "out of range"
            raise ValueError(
                f"illegal action {action} ({name}) for player {self.current_player} "
                f"in phase {self.phase}; legal: {self.legal_actions()}"
            )
        self.kernel.step(action)

    # --- observations and scores -------------------------------------------------------
    def encode(self, player: int) -> np.ndarray:
        """Information state of ``player``: float32 (1077,), slices in the spec module."""
        return self.kernel.encoding(_check_player(player))

    def expedition_scores(self, player: int) -> list[int]:
        return self.kernel.expedition_scores(_check_player(player))

    def scores(self) -> tuple[int, int]:
        return (sum(self.expedition_scores(0)), sum(self.expedition_scores(1)))

    def returns(self) -> tuple[float, float]:
        """Zero-sum score difference (valid at any time, final when terminal)."""
        s0, s1 = self.scores()
        return (float(s0 - s1), float(s1 - s0))

    def reshuffle(self, key: int) -> None:
        """Redraw the unseen draw pile's order from the stream ``key``."""
        self.kernel.shuffle_hidden(key)

    def determinize(self, viewer: int, key: int) -> None:
        """Redeal, from the stream ``key``, the cards ``viewer`` has not seen: the
        opponent's hand except the cards seen taken from discard piles, and the draw pile
        (sizes kept). ``viewer``'s encoding does not change; twin: ``RulesState.determinize``."""
        self.kernel.determinize(_check_player(viewer), key)

    def clone(self) -> LostCitiesGame:
        return LostCitiesGame(self.kernel.copy())

    # --- serialisation ---------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Compact fixed-size snapshot (a few hundred bytes) that round-trips."""
        return SERIAL_MAGIC + self.kernel.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> LostCitiesGame:
        if not data.startswith(SERIAL_MAGIC):
            raise ValueError(
                f"not a Lost Cities snapshot: header {data[:3]!r}, expected {SERIAL_MAGIC!r}"
            )
        kernel = LostCitiesState()
        kernel.from_bytes(np.frombuffer(data[len(SERIAL_MAGIC) :], dtype=np.uint8))
        game = cls(kernel)
        game.check_invariants()
        return game

    def check_invariants(self) -> None:
        """Raise ValueError unless all 60 cards are accounted for exactly once."""
        seen: Counter[int] = Counter(self.draw_pile)
        for player in (0, 1):
            seen.update(self.hand(player))
            for color in range(spec.NUM_COLORS):
                seen.update(self.expedition(player, color))
        for color in range(spec.NUM_COLORS):
            seen.update(self.discard_pile(color))
        if seen != Counter(spec.sorted_deck()):
            raise ValueError(
                f"cards not accounted for: {seen - Counter(spec.sorted_deck())} extra, "
                f"{Counter(spec.sorted_deck()) - seen} missing"
            )

    # --- display -----------------------------------------------------------------------
    def render(self) -> str:
        return render(self)

    def __repr__(self) -> str:
        return (
            f"LostCitiesGame(turn={self.turns}, player={self.current_player}, "
            f"phase={self.phase}, draw_pile={len(self.draw_pile)}, scores={self.scores()})"
        )


def render(game) -> str:
    """Multi-line text board of any object with the Lost Cities state API."""

    def cards(types: list[int]) -> str:
        return " ".join(spec.card_name(t) for t in types) or "-"

    lines = [
        f"turn {game.turns}  draw pile {len(game.draw_pile)}  "
        + (
            "game over" + (" (turn cap)" if game.capped else "")
            if game.is_terminal
            else f"player {game.current_player} to {'draw' if game.phase else 'play'}"
        )
    ]
    for player in (0, 1):
        lines.append(f"P{player} hand: {cards(game.hand(player))}   score {game.scores()[player]}")
        for color in range(spec.NUM_COLORS):
            exp = game.expedition(player, color)
            if exp:
                lines.append(f"   {spec.COLOR_NAMES[color]:>6}: {cards(exp)}")
    piles = [
        f"{spec.COLOR_LETTERS[c]}[{cards(game.discard_pile(c))}]" for c in range(spec.NUM_COLORS)
    ]
    lines.append("discards: " + " ".join(piles))
    return "\n".join(lines)


def _expand(counts, offset: int = 0) -> list[int]:
    return [offset + t for t, n in enumerate(counts) for _ in range(n)]


def _check_player(player: int) -> int:
    if player not in (0, 1):
        raise ValueError(f"player must be 0 or 1, got {player!r}")
    return player


def _check_color(color: int) -> int:
    if not 0 <= color < spec.NUM_COLORS:
        raise ValueError(f"color must be in [0, {spec.NUM_COLORS}), got {color!r}")
    return color


def _check_max_turns(max_turns: int) -> int:
    if not 1 <= max_turns <= 30000:
        raise ValueError(f"max_turns must be in [1, 30000], got {max_turns!r}")
    return max_turns


def _check_deal(hands, draw_pile, first_player: int) -> None:
    if len(hands) != 2 or any(len(h) != spec.HAND_SIZE for h in hands):
        raise ValueError(
            f"a deal needs two hands of {spec.HAND_SIZE} cards, got sizes {[len(h) for h in hands]}"
        )
    _check_player(first_player)
    dealt = Counter([*hands[0], *hands[1], *draw_pile])
    expected = Counter(spec.sorted_deck())
    if dealt != expected:
        raise ValueError(
            f"a deal must hold the 60 cards exactly once: extra {dict(dealt - expected)}, "
            f"missing {dict(expected - dealt)}"
        )
