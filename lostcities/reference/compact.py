"""Pure-Python twins of the kernels' compact information states (``compact``/``expand`` in
``games/_lost_cities.pyx``, ``_kuhn.pyx`` and ``_leduc.pyx``).

The reservoir memories store what a player knows as a few bytes (64 for Lost Cities, 6 for
Kuhn, 13 for Leduc) instead of its float32 encoding (1077, 11 and 30 values), and expand a
drawn batch to features just before a fit. That only works if expanding gives bit for bit
the encoding of the state the bytes were taken from, and if two states the player cannot
tell apart give the same bytes. The functions here compute both directions the slow, plain
way, from the reference rules (Lost Cities) or the kernels' Python views (Kuhn, Leduc), so
the property tests (tests/games/test_compact.py) can hold the kernels to them.

Byte layouts:

- Lost Cities: see the compact layout in :mod:`lostcities.games.lost_cities_spec`.
- Kuhn (6 bytes): seat, own card + 1 (0: not dealt), bets so far, the 3 betting actions
  (0 where unused).
- Leduc (13 bytes): seat, private card + 1, public card + 1 (0: not dealt), the lengths of
  round 1's and round 2's betting sequences, then their 4 + 4 actions (0 where unused).
"""

from __future__ import annotations

import numpy as np

from lostcities.games import kuhn, leduc
from lostcities.games.lost_cities_spec import (
    COMPACT_SIZE,
    LOC_HAND,
    LOC_OPP_EXPEDITION,
    LOC_OPP_KNOWN,
    LOC_OWN_EXPEDITION,
    LOC_PILE,
    LOC_UNSEEN,
    NUM_CARD_TYPES,
    NUM_CARDS,
    NUM_COLORS,
    card_color,
    copies,
    sorted_deck,
)
from lostcities.reference.lost_cities_rules import NO_CARD, RulesState

# byte offsets of the four scalars after the 60 location codes
DRAW_PILE_BYTE, PHASE_BYTE, JUST_DISCARDED_BYTE, SEAT_BYTE = range(NUM_CARDS, COMPACT_SIZE)

KUHN_COMPACT_SIZE = 6
KUHN_MAX_BETS = 3  # the longest betting history: pass, bet, pass/bet

LEDUC_COMPACT_SIZE = 13
LEDUC_ROUNDS = 2
LEDUC_MAX_SEQ = 4  # the longest round: call/raise, raise, raise, call/fold (2 raises at most)
_LEDUC_SEQ_LEN, _LEDUC_SEQ = 3, 5  # offsets of the sequence lengths and of the actions


# --------------------------------------------------------------------- Lost Cities


def lost_cities_compact(state: RulesState, player: int) -> np.ndarray:
    """What ``player`` knows of ``state``, as the 64 compact bytes (uint8)."""
    opponent = 1 - player
    # Where player knows each card to be; a card player cannot place is not listed.
    seen: dict[int, list[int]] = {}

    def place(card: int, code: int) -> None:
        seen.setdefault(card, []).append(code)

    for card in state.hand(player):
        place(card, LOC_HAND)
    for color in range(NUM_COLORS):
        for card in state.expedition(player, color):
            place(card, LOC_OWN_EXPEDITION)
        for card in state.expedition(opponent, color):
            place(card, LOC_OPP_EXPEDITION)
        for position, card in enumerate(state.discard_pile(color)):
            place(card, LOC_PILE + position)
    for card in state.known(opponent):
        place(card, LOC_OPP_KNOWN)

    codes: list[int] = []
    for card in range(NUM_CARD_TYPES):  # type by type: the order of sorted_deck()
        placed = seen.get(card, [])
        # The copies of a wager are identical, so listing their codes in ascending order
        # is what makes equal information states give equal bytes; the copies player
        # cannot place (draw pile or the opponent's hidden hand) are the unseen ones.
        codes += sorted(placed + [LOC_UNSEEN] * (copies(card) - len(placed)))
    out = np.zeros(COMPACT_SIZE, dtype=np.uint8)
    out[:NUM_CARDS] = codes
    out[DRAW_PILE_BYTE] = len(state.draw_pile)
    out[PHASE_BYTE] = state.phase
    out[JUST_DISCARDED_BYTE] = state.just_discarded + 1
    out[SEAT_BYTE] = player
    return out


def lost_cities_view(compact: np.ndarray) -> tuple[RulesState, int]:
    """The viewer's side of the game, rebuilt from compact bytes: ``(state, viewer)``.

    ``state`` holds everything the viewer knows: their hand, both expeditions, the
    opponent's known cards, the discard piles in order, the phase and the card just
    discarded. What the viewer cannot see is left out: the opponent's hand holds only its
    known cards, and the draw pile holds ``NO_CARD`` stand-ins, as many as it has cards.
    ``RulesState.encode(viewer)`` reads nothing else, so its features are the viewer's
    encoding of any state the bytes were taken from. A scratch state for encoding only:
    it is no legal position to play on.
    """
    compact = np.asarray(compact, dtype=np.uint8)
    if compact.shape != (COMPACT_SIZE,):
        raise ValueError(f"expected {COMPACT_SIZE} compact bytes, got shape {compact.shape}")
    viewer = int(compact[SEAT_BYTE])
    opponent = 1 - viewer
    state = RulesState()  # the empty shell; filled in below
    piles: list[dict[int, int]] = [{} for _ in range(NUM_COLORS)]  # position -> card
    # The sorted deck lists card types in ascending order, so each expedition is rebuilt
    # wagers first, then numbers ascending: the only order the rules let cards be played.
    for card, code in zip(sorted_deck(), compact[:NUM_CARDS].tolist(), strict=True):
        color = card_color(card)
        if code == LOC_HAND:
            state._hands[viewer].append(card)
        elif code == LOC_OWN_EXPEDITION:
            state._expeditions[viewer][color].append(card)
        elif code == LOC_OPP_EXPEDITION:
            state._expeditions[opponent][color].append(card)
        elif code == LOC_OPP_KNOWN:
            state._hands[opponent].append(card)
            state._known[opponent][card] += 1
        elif code >= LOC_PILE:
            piles[color][code - LOC_PILE] = card
    # A real pile fills positions 0 .. n-1; the dicts give them back bottom .. top.
    state._discards = [[pile[j] for j in range(len(pile))] for pile in piles]
    state._draw_pile = [NO_CARD] * int(compact[DRAW_PILE_BYTE])
    state._player = viewer
    state._phase = int(compact[PHASE_BYTE])
    state._just_discarded = int(compact[JUST_DISCARDED_BYTE]) - 1
    return state, viewer


def lost_cities_expand(compact: np.ndarray) -> np.ndarray:
    """Features of compact bytes: the viewer's ``encode``, float32 (1077,)."""
    state, viewer = lost_cities_view(compact)
    return state.encode(viewer)


# --------------------------------------------------------------------- Kuhn


def kuhn_compact(state: kuhn.KuhnState, player: int) -> np.ndarray:
    """What ``player`` knows of a Kuhn kernel state, as 6 compact bytes (uint8)."""
    card = state.cards()[player]
    history = state.history()
    out = np.zeros(KUHN_COMPACT_SIZE, dtype=np.uint8)
    out[0] = player
    out[1] = card + 1  # -1 (not dealt) becomes 0
    out[2] = len(history)
    out[3 : 3 + len(history)] = history
    return out


def kuhn_expand(compact: np.ndarray) -> np.ndarray:
    """Features of Kuhn compact bytes: the layout of kuhn.ENCODING_SLICES, float32 (11,)."""
    player, card, num_bets = int(compact[0]), int(compact[1]) - 1, int(compact[2])
    out = np.zeros(kuhn.ENCODING_SIZE, dtype=np.float32)
    out[kuhn.ENCODING_SLICES["player"].start + player] = 1.0
    if card >= 0:
        out[kuhn.ENCODING_SLICES["card"].start + card] = 1.0
    betting = kuhn.ENCODING_SLICES["betting"].start
    for step in range(num_bets):
        out[betting + 2 * step + int(compact[3 + step])] = 1.0  # bit 0 pass, bit 1 bet
    return out


# --------------------------------------------------------------------- Leduc


def leduc_compact(state: leduc.LeducState, player: int) -> np.ndarray:
    """What ``player`` knows of a Leduc kernel state, as 13 compact bytes (uint8)."""
    out = np.zeros(LEDUC_COMPACT_SIZE, dtype=np.uint8)
    out[0] = player
    out[1] = state.private_cards()[player] + 1  # -1 (not dealt) becomes 0
    out[2] = state.public_card() + 1
    for r, sequence in enumerate(state.sequences()):
        out[_LEDUC_SEQ_LEN + r] = len(sequence)
        start = _LEDUC_SEQ + LEDUC_MAX_SEQ * r
        out[start : start + len(sequence)] = sequence
    return out


def leduc_expand(compact: np.ndarray) -> np.ndarray:
    """Features of Leduc compact bytes: the layout of leduc.ENCODING_SLICES, float32 (30,)."""
    player, private, public = int(compact[0]), int(compact[1]) - 1, int(compact[2]) - 1
    out = np.zeros(leduc.ENCODING_SIZE, dtype=np.float32)
    out[leduc.ENCODING_SLICES["player"].start + player] = 1.0
    if private >= 0:
        out[leduc.ENCODING_SLICES["private"].start + private] = 1.0
    if public >= 0:
        out[leduc.ENCODING_SLICES["public"].start + public] = 1.0
    betting = leduc.ENCODING_SLICES["betting"].start
    for r in range(LEDUC_ROUNDS):
        for k in range(int(compact[_LEDUC_SEQ_LEN + r])):
            action = int(compact[_LEDUC_SEQ + LEDUC_MAX_SEQ * r + k])
            slot = betting + 2 * (LEDUC_MAX_SEQ * r + k)
            if action == leduc.CALL:
                out[slot] = 1.0
            elif action == leduc.RAISE:
                out[slot + 1] = 1.0
            # a fold sets neither bit (and ends the game)
    return out
