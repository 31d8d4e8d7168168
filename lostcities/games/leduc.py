"""Leduc poker, 2 players, with exactly the rules of OpenSpiel's ``leduc_poker``
(default parameters).

    >>> game = LeducGame.new()
    >>> for a in (0, 2, CALL, CALL, 1, CALL, CALL):  # deal J, Q; check-check; public J
    ...     game.apply(a)
    >>> game.returns()                                # player 0 pairs the public J
    (1.0, -1.0)

Rules
    Six cards 0..5, rank = card // 2 (0, 1 J; 2, 3 Q; 4, 5 K). Each player
    antes 1. Chance deals player 0's private card, then player 1's, uniformly
    from the cards left. Round 1 of betting (raise amount 2), then chance
    deals the public card, then round 2 (raise amount 4). Player 0 starts
    each round; at most 2 raises per round. A round ends when both players
    have checked with no raise, or when the other player calls the last
    raise. A fold ends the game: the folder loses what they put in. At the
    showdown a private card that pairs the public card wins, otherwise the
    higher private rank wins; equal ranks split the pot. Returns are chips
    won minus chips put in (zero-sum); at most 13 either way.

Actions (``NUM_ACTIONS`` = 3)
    0 ``FOLD``:  legal only when facing a bet (stakes above your contribution)
    1 ``CALL``:  call, or check; always legal
    2 ``RAISE``: match the stakes, then raise them by 2 (round 1) or 4
                 (round 2); legal while the round has fewer than 2 raises
    At a chance node the action id is the card dealt.

Information-state encoding (float32, ``ENCODING_SIZE`` = 30, for player i;
the layout of OpenSpiel's information-state tensor)
    player   [0, 2)    one-hot i
    private  [2, 8)    one-hot of i's card (zero before it is dealt)
    public   [8, 14)   one-hot of the public card (zero before it is dealt)
    betting  [14, 30)  2 rounds x 4 slots x 2 bits: the k-th action of round
                       r sets 14 + 8r + 2k (call) or 14 + 8r + 2k + 1 (raise);
                       a fold sets nothing

Information-state string: OpenSpiel's format, identical to its
``InformationStateString`` at decision nodes, e.g.
``"[Observer: 0][Private: 5][Round 2][Player: 0][Pot: 6][Money: 97 97][Public: 0]
[Round1: 2 1][Round2: ]"`` (one line; wrapped here).

The kernel (``_leduc.pyx``, ``LeducState``) implements the C interface of
``_state.pxd``; this wrapper validates and documents (see :mod:`small_game`).
"""

from __future__ import annotations

from lostcities.games._leduc import LeducState
from lostcities.games.small_game import CHANCE, TERMINAL, SmallGame, check_player

__all__ = [
    "CALL",
    "CARD_NAMES",
    "CHANCE",
    "ENCODING_SIZE",
    "ENCODING_SLICES",
    "FOLD",
    "NUM_ACTIONS",
    "NUM_CARDS",
    "RAISE",
    "TERMINAL",
    "LeducGame",
    "LeducState",
    "rank",
]

NUM_CARDS = 6
CARD_NAMES = ("Js", "Jh", "Qs", "Qh", "Ks", "Kh")  # card id -> name; rank = id // 2
FOLD = 0
CALL = 1
RAISE = 2
NUM_ACTIONS = 3
ACTION_NAMES = ("fold", "call", "raise")
MAX_RAISES_PER_ROUND = 2
RAISE_AMOUNTS = (2, 4)  # round 1, round 2
STARTING_MONEY = 100  # OpenSpiel's stack; never binds (a player puts in at most 13)
ENCODING_SIZE = 30
ENCODING_SLICES = {
    "player": slice(0, 2),
    "private": slice(2, 8),
    "public": slice(8, 14),
    "betting": slice(14, 30),  # reshape (2, 4, 2): round x slot x (call, raise)
}
_INVALID_CARD = -10000  # OpenSpiel's kInvalidCard, printed for an undealt card


def rank(card: int) -> int:
    """Rank of a card id: 0 J, 1 Q, 2 K."""
    return card // 2


class LeducGame(SmallGame):
    """One Leduc poker state. ``LeducGame.new()`` is the root chance node."""

    KERNEL = LeducState
    NUM_ACTIONS = NUM_ACTIONS
    ENCODING_SIZE = ENCODING_SIZE
    ACTION_NAMES = ACTION_NAMES

    __slots__ = ()

    @property
    def private_cards(self) -> tuple[int, int]:
        """Both private cards; -1 where not dealt yet."""
        return self.kernel.private_cards()

    @property
    def public_card(self) -> int:
        """The public card, -1 before it is dealt."""
        return self.kernel.public_card()

    @property
    def round(self) -> int:
        """Betting round, 0 or 1 (OpenSpiel counts them 1 and 2)."""
        return self.kernel.round()

    @property
    def contributions(self) -> tuple[int, int]:
        """Chips each player has put in the pot, ante included."""
        return self.kernel.contributions()

    @property
    def pot(self) -> int:
        return sum(self.kernel.contributions())

    @property
    def sequences(self) -> tuple[list[int], list[int]]:
        """Betting actions of round 1 and of round 2."""
        return self.kernel.sequences()

    def information_state(self, player: int) -> str:
        """OpenSpiel's information-state string (see the module docstring)."""
        k = self.kernel
        card = k.private_cards()[check_player(player)]
        contrib = k.contributions()
        round1, round2 = k.sequences()
        public = k.public_card()
        return "".join(
            (
                f"[Observer: {player}]",
                f"[Private: {card if card >= 0 else _INVALID_CARD}]",
                f"[Round {k.round() + 1}]",
                f"[Player: {k.player()}]",
                f"[Pot: {sum(contrib)}]",
                f"[Money: {STARTING_MONEY - contrib[0]} {STARTING_MONEY - contrib[1]}]",
                f"[Public: {public}]" if public >= 0 else "",
                f"[Round1: {' '.join(map(str, round1))}]",
                f"[Round2: {' '.join(map(str, round2))}]",
            )
        )

    def render(self) -> str:
        k = self.kernel
        cards = " ".join(CARD_NAMES[c] if c >= 0 else "?" for c in k.private_cards())
        public = CARD_NAMES[k.public_card()] if k.public_card() >= 0 else "?"
        bets = " / ".join("".join("fcr"[a] for a in seq) or "-" for seq in k.sequences())
        c0, c1 = k.contributions()
        player = self.current_player
        if player == TERMINAL:
            r0, r1 = self.returns()
            turn = f"over, returns {r0:+g} {r1:+g}"
        elif player == CHANCE:
            turn = "chance deals"
        else:
            turn = f"player {player} to act"
        return f"cards {cards} | public {public} | betting {bets} | in {c0} {c1} | {turn}"
