"""Lost Cities (classic, 2 players, 5 colors): card, action and encoding layout.

Shared by the Cython kernel (``_lost_cities.pyx``), its wrapper (``lost_cities.py``),
the pure-Python reference (``lostcities/reference/lost_cities_rules.py``) and the bots,
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
  derived (functions of the slices above, spelled out so a network needs
  few samples to see them; t = card type, c = color, r = rank):
    playable        [855, 905)  1 if t is in i's hand and i may play it now
    opens           [905, 955)  1 if t is playable and i has no card of its color yet
    gap             [955, 1005) playable number card: ranks it skips if played, / 8
    color_stats     [1005, 1075) 5 colors x 14 values (COLOR_STATS order):
                                own expedition: opened, top rank / 9, wagers / 3,
                                cards / 12, score now / 100; the same five for the
                                opponent; own hand points above own top / 54; unseen
                                points above own top (not in i's hand, on an
                                expedition, in a pile or known in the opponent's
                                hand) / 54; top of c's discard pile playable by i;
                                cards of c in i's hand / 8
    score_totals    [1075, 1077) own and opponent's total score now / 100

Compact information state (uint8, ``COMPACT_SIZE`` bytes, for player i): what the
encoding is computed from, stored by the reservoir memories and expanded to the
encoding when a fit draws a batch (bit for bit the same floats)
    [0, 60)   one location code per card, the cards in ``sorted_deck()`` order (the
              three copies of a wager ascending by code): 0 unseen by i (the draw
              pile or the opponent's hand), 1 i's hand, 2 i's expedition, 3 the
              opponent's expedition, 4 the opponent's hand and known to i, 5 + j the
              card's color's discard pile at position j from the bottom
    60        cards left in the draw pile
    61        phase
    62        type just discarded + 1 (0: none)
    63        i
"""

from __future__ import annotations

import itertools

import numpy as np

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
    "playable": slice(855, 905),
    "opens": slice(905, 955),
    "gap": slice(955, 1005),
    "color_stats": slice(1005, 1075),
    "score_totals": slice(1075, 1077),
}
ENCODING_SIZE = 1077
COMPACT_SIZE = 64
# location codes of the compact information state (see the module docstring)
LOC_UNSEEN, LOC_HAND, LOC_OWN_EXPEDITION, LOC_OPP_EXPEDITION, LOC_OPP_KNOWN, LOC_PILE = range(6)
COLOR_STATS = (
    "own_opened", "own_top", "own_wagers", "own_cards", "own_score",
    "opp_opened", "opp_top", "opp_wagers", "opp_cards", "opp_score",
    "hand_points", "unseen_points", "pile_top_playable", "hand_cards",
)  # fmt: skip


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


def color_permutations() -> tuple[np.ndarray, np.ndarray]:
    """The game's symmetries: relabelling the 5 colors changes no rule.

    Returns ``(feature_index (120, ENCODING_SIZE), action_index (120, NUM_ACTIONS))``,
    int64, one row per permutation ``pi`` of the colors (identity first), such that
    ``features[..., feature_index[s]]`` is the encoding of the same information
    state with color ``c`` renamed ``pi^-1(c)`` and ``values[..., action_index[s]]``
    permutes any per-action vector (mask, regrets, sigma) the same way. Every
    per-color block moves as a whole: hand, expeditions, known cards, the
    just-discarded one-hot and the per-card derived slices (10 ranks per color),
    the discard piles (12 slots x 10 ranks per color), the color statistics
    (14 per color), plays, discards and pile draws.
    """
    blocks = {  # encoding offset -> values per color
        _offset("own_hand"): RANKS_PER_COLOR,
        _offset("own_expedition"): RANKS_PER_COLOR,
        _offset("opp_expedition"): RANKS_PER_COLOR,
        _offset("discards"): MAX_PILE * RANKS_PER_COLOR,
        _offset("opp_known"): RANKS_PER_COLOR,
        _offset("just_discarded"): RANKS_PER_COLOR,
        _offset("playable"): RANKS_PER_COLOR,
        _offset("opens"): RANKS_PER_COLOR,
        _offset("gap"): RANKS_PER_COLOR,
        _offset("color_stats"): len(COLOR_STATS),
    }
    action_blocks = {PLAY: RANKS_PER_COLOR, DISCARD: RANKS_PER_COLOR, DRAW_PILE: 1}
    perms = list(itertools.permutations(range(NUM_COLORS)))
    feature_index = np.tile(np.arange(ENCODING_SIZE, dtype=np.int64), (len(perms), 1))
    action_index = np.tile(np.arange(NUM_ACTIONS, dtype=np.int64), (len(perms), 1))
    for s, pi in enumerate(perms):
        for index, layout in ((feature_index[s], blocks), (action_index[s], action_blocks)):
            for base, width in layout.items():
                for color in range(NUM_COLORS):
                    new = base + color * width
                    old = base + pi[color] * width
                    index[new : new + width] = np.arange(old, old + width)
    return feature_index, action_index


def _offset(name: str) -> int:
    return ENCODING_SLICES[name].start
