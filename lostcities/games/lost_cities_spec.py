"""Lost Cities (classic, 2 players, 5 colors): card, action and encoding layout.

Shared by the Cython kernel (``_lost_cities.pyx``), its wrapper
(``lost_cities.py``), the pure-Python reference (``rules.py``) and the bots,
so every implementation agrees on what an index means. Rules live in the
implementations, not here.

Cards
    60 cards: 5 colors x (3 identical wagers + number cards 2..10).
    A *card type* is ``color * 10 + rank``: rank 0 is a wager, rank r in 1..9
    is the number card of value r + 1. There are 50 types; wagers come in
    threes, number cards once.

Deal (from a seed)
    The 60 cards are listed by type (type 0 x3, 1, ..., 9, type 10 x3, ...)
    and shuffled with Fisher-Yates from the back using ``Stream.below``.
    Player 0 gets cards[0:8], player 1 cards[8:16]; the draw pile is
    cards[16:60] with its *top at the end*. Player 0 moves first.

Actions (one fixed space of 106, with a legal mask)
    [0, 50)     PLAY card type t onto your own expedition     (phase 0)
    [50, 100)   DISCARD card type t onto its color's pile       (phase 0)
    100         DRAW the top card of the draw pile              (phase 1)
    [101, 106)  DRAW the top card of color c's discard pile     (phase 1)
    A turn is one phase-0 action then one phase-1 action by the same player.

Information-state encoding (float32, ``ENCODING_SIZE`` values, for player i)
    own_hand        [0, 50)     count of each card type in i's hand
    own_expedition  [50, 100)   count of each type on i's expeditions
    opp_expedition  [100, 150)  the same for the opponent
    discards        [150, 750)  5 colors x 12 slots x 10 ranks, one-hot;
                                slot 0 is the top card, slot 1 below it, ...
    draw_pile       [750, 751)  cards left in the draw pile / 44
    opp_known       [751, 801)  cards the opponent is known to hold (taken
                                from a discard pile and not yet played)
    phase           [801, 803)  one-hot: 0 play/discard, 1 draw
    just_discarded  [803, 853)  one-hot type discarded this turn (phase 1)
    seat            [853, 855)  one-hot: i == 0, i == 1
"""

from __future__ import annotations

NUM_PLAYERS = 2
NUM_COLORS = 5
RANKS_PER_COLOR = 10  # wager + 2..10
NUM_CARD_TYPES = NUM_COLORS * RANKS_PER_COLOR  # 50
WAGER_COPIES = 3
NUM_CARDS = NUM_COLORS * (WAGER_COPIES + 9)  # 60
HAND_SIZE = 8
INITIAL_DRAW_PILE = NUM_CARDS - NUM_PLAYERS * HAND_SIZE  # 44
MAX_PILE = WAGER_COPIES + 9  # 12 cards of one color at most
EXPEDITION_COST = 20
BONUS_MIN_CARDS = 8
BONUS = 20
DEFAULT_MAX_TURNS = 1000  # turn cap against discard ping-pong; never binds in normal play

COLOR_NAMES = ("yellow", "blue", "white", "green", "red")
COLOR_LETTERS = "YBWGR"

PLAY = 0
DISCARD = 50
DRAW_DECK = 100
DRAW_PILE = 101
NUM_ACTIONS = 106

ENCODING_SLICES: dict[str, slice] = {
    "own_hand": slice(0, 50),
    "own_expedition": slice(50, 100),
    "opp_expedition": slice(100, 150),
    "discards": slice(150, 750),
    "draw_pile": slice(750, 751),
    "opp_known": slice(751, 801),
    "phase": slice(801, 803),
    "just_discarded": slice(803, 853),
    "seat": slice(853, 855),
}
ENCODING_SIZE = 855


def card_color(card_type: int) -> int:
    return card_type // RANKS_PER_COLOR


def card_rank(card_type: int) -> int:
    """0 for a wager, 1..9 for the number cards 2..10."""
    return card_type % RANKS_PER_COLOR


def card_value(card_type: int) -> int:
    """Face value of a number card (2..10); 0 for a wager."""
    rank = card_rank(card_type)
    return 0 if rank == 0 else rank + 1


def copies(card_type: int) -> int:
    return WAGER_COPIES if card_rank(card_type) == 0 else 1


def card_name(card_type: int) -> str:
    """Short name: color letter then 'w' for a wager or the value, e.g. 'Rw', 'B7'."""
    rank = card_rank(card_type)
    return COLOR_LETTERS[card_color(card_type)] + ("w" if rank == 0 else str(rank + 1))


def action_name(action: int) -> str:
    if PLAY <= action < DISCARD:
        return f"play {card_name(action - PLAY)}"
    if DISCARD <= action < DRAW_DECK:
        return f"discard {card_name(action - DISCARD)}"
    if action == DRAW_DECK:
        return "draw deck"
    if DRAW_PILE <= action < NUM_ACTIONS:
        return f"draw {COLOR_NAMES[action - DRAW_PILE]} pile"
    raise ValueError(f"action {action} is outside the Lost Cities action space [0, {NUM_ACTIONS})")


def sorted_deck() -> list[int]:
    """The 60 cards as card types, before the shuffle of a seeded deal."""
    return [t for t in range(NUM_CARD_TYPES) for _ in range(copies(t))]
