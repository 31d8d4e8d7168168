"""Kuhn poker, 2 players, with exactly the rules of OpenSpiel's ``kuhn_poker``.

    >>> game = KuhnGame.new()
    >>> game.apply(2); game.apply(0)   # chance: player 0 gets K, player 1 gets J
    >>> game.apply(BET); game.apply(PASS)
    >>> game.returns()
    (1.0, -1.0)

Rules
    Cards 0, 1, 2 (J, Q, K); each player antes 1. Chance deals player 0's
    card (1/3 each), then player 1's (1/2 each of the two left). Player 0
    acts first. Betting histories and their ends:
    ``pp`` showdown for 1, ``bp`` player 1 folds (player 0 wins 1),
    ``bb`` showdown for 2, ``pbp`` player 0 folds (player 1 wins 1),
    ``pbb`` showdown for 2. At a showdown the higher card wins.

Actions (``NUM_ACTIONS`` = 2)
    0 ``PASS``: check, or fold when facing a bet
    1 ``BET``:  bet, or call when facing a bet
    At a chance node the action id is the card dealt (0 J, 1 Q, 2 K).

Information-state encoding (float32, ``ENCODING_SIZE`` = 11, for player i;
the layout of OpenSpiel's information-state tensor)
    player   [0, 2)   one-hot i
    card     [2, 5)   one-hot of i's card (zero before it is dealt)
    betting  [5, 11)  3 steps x 2 bits: step s at 5 + 2s, bit 0 pass, bit 1 bet

Information-state string: OpenSpiel's, i.e. the card id then one letter per
betting action (``p`` or ``b``), e.g. ``"0pb"`` (J, facing a bet after a check).

The kernel (``_kuhn.pyx``, ``KuhnState``) implements the C interface of
``_state.pxd``; this wrapper validates and documents (see :mod:`small_game`).
"""

from __future__ import annotations

from lostcities.games._kuhn import KuhnState
from lostcities.games.small_game import CHANCE, TERMINAL, SmallGame, check_player

__all__ = [
    "BET",
    "CARD_NAMES",
    "CHANCE",
    "ENCODING_SIZE",
    "ENCODING_SLICES",
    "NUM_ACTIONS",
    "NUM_CARDS",
    "PASS",
    "TERMINAL",
    "KuhnGame",
    "KuhnState",
]

NUM_CARDS = 3
CARD_NAMES = ("J", "Q", "K")
PASS = 0
BET = 1
NUM_ACTIONS = 2
ACTION_NAMES = ("pass", "bet")
ENCODING_SIZE = 11
ENCODING_SLICES = {
    "player": slice(0, 2),
    "card": slice(2, 5),
    "betting": slice(5, 11),  # reshape (3, 2): step x (pass, bet)
}


class KuhnGame(SmallGame):
    """One Kuhn poker state. ``KuhnGame.new()`` is the root chance node."""

    KERNEL = KuhnState
    NUM_ACTIONS = NUM_ACTIONS
    ENCODING_SIZE = ENCODING_SIZE
    ACTION_NAMES = ACTION_NAMES

    __slots__ = ()

    @property
    def cards(self) -> tuple[int, int]:
        """Both private cards; -1 where not dealt yet."""
        return self.kernel.cards()

    @property
    def history(self) -> list[int]:
        """Betting actions so far (PASS/BET), in order."""
        return self.kernel.history()

    def information_state(self, player: int) -> str:
        """OpenSpiel's information-state string, e.g. ``"2pb"``."""
        card = self.kernel.cards()[check_player(player)]
        prefix = str(card) if card >= 0 else ""
        return prefix + "".join("pb"[a] for a in self.kernel.history())

    def render(self) -> str:
        c0, c1 = self.kernel.cards()
        cards = " ".join(CARD_NAMES[c] if c >= 0 else "?" for c in (c0, c1))
        betting = "".join("pb"[a] for a in self.kernel.history()) or "-"
        player = self.current_player
        if player == TERMINAL:
            r0, r1 = self.returns()
            turn = f"over, returns {r0:+g} {r1:+g}"
        elif player == CHANCE:
            turn = "chance deals"
        else:
            turn = f"player {player} to act"
        return f"cards {cards} | betting {betting} | {turn}"
