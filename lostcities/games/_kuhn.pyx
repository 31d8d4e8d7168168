# cython: language_level=3
"""Kuhn poker kernel (OpenSpiel ``kuhn_poker``, 2 players): the C-level state
behind ``lostcities.games.kuhn``.

The whole state is one small C struct (``KuhnData``), so ``copy_from`` is a
struct copy. Chance is explicit: two chance nodes deal player 0's card, then
player 1's; the chance action id is the card id (0 J, 1 Q, 2 K). Actions:
0 pass (check or fold), 1 bet (bet or call). Layouts are documented in
``kuhn.py``; this file only keeps them consistent with its enum below.
"""

cimport cython
from libc.stdint cimport int8_t, uint8_t
from libc.string cimport memset

from lostcities._rng cimport Rng
from lostcities.games._state cimport CHANCE_PLAYER, TERMINAL_PLAYER, GameState

cdef enum:
    N_CARDS = 3
    N_ACTIONS = 2
    PASS = 0
    BET = 1
    MAX_BETS = 3          # betting steps: p p | b p | b b | p b p | p b b
    ENC_SIZE = 11
    OFF_PLAYER = 0        # [0, 2)  observing player one-hot
    OFF_CARD = 2          # [2, 5)  private card one-hot
    OFF_BETTING = 5       # [5, 11) 3 steps x (pass, bet) one-hot
    COMPACT_SIZE = 6      # seat, own card + 1 (0: not dealt), bets so far, the 3 bets (0 unused)

NUM_ACTIONS = N_ACTIONS
ENCODING_SIZE = ENC_SIZE


cdef struct KuhnData:
    int8_t card[2]          # private cards, -1 until dealt
    int8_t num_dealt        # 0..2
    int8_t history[MAX_BETS]  # betting actions in order
    int8_t num_bets         # len(history)
    int8_t player           # 0/1 to act, CHANCE_PLAYER or TERMINAL_PLAYER
    int8_t folder           # player who passed facing a bet, -1 if none


@cython.final
cdef class KuhnState(GameState):
    """C-level Kuhn poker state. Use ``lostcities.games.kuhn.KuhnGame``."""

    cdef KuhnData d

    def __cinit__(self):
        self.num_actions = N_ACTIONS
        self.encoding_size = ENC_SIZE
        self.compact_size = COMPACT_SIZE
        self.reset(NULL)

    # --- the GameState interface -------------------------------------------
    cdef void reset(self, Rng* rng) noexcept:
        # Chance is explicit, so the stream is not used: back to the root deal.
        self.d.card[0] = -1
        self.d.card[1] = -1
        self.d.num_dealt = 0
        self.d.history[0] = -1
        self.d.history[1] = -1
        self.d.history[2] = -1
        self.d.num_bets = 0
        self.d.player = CHANCE_PLAYER
        self.d.folder = -1

    cdef int current_player(self) noexcept:
        return self.d.player

    cdef int legal_mask(self, uint8_t* mask) noexcept:
        if self.d.player < 0:
            mask[0] = 0
            mask[1] = 0
            return 0
        mask[0] = 1
        mask[1] = 1
        return 2

    cdef int chance_outcomes(self, int* actions, double* probs) noexcept:
        cdef int c, n = 0
        if self.d.player != CHANCE_PLAYER:
            return 0
        for c in range(N_CARDS):
            if c != self.d.card[0]:  # card[0] is -1 at the first deal
                actions[n] = c
                n += 1
        for c in range(n):
            probs[c] = 1.0 / n
        return n

    cdef void apply(self, int action) noexcept:
        cdef int n
        if self.d.player == CHANCE_PLAYER:
            self.d.card[self.d.num_dealt] = <int8_t>action
            self.d.num_dealt += 1
            if self.d.num_dealt == 2:
                self.d.player = 0
            return
        n = self.d.num_bets
        self.d.history[n] = <int8_t>action
        self.d.num_bets = n + 1
        if n == 0:
            self.d.player = 1
        elif n == 1:
            if self.d.history[0] == PASS and action == BET:
                self.d.player = 0            # p b: player 0 must respond
            else:
                if self.d.history[0] == BET and action == PASS:
                    self.d.folder = 1        # b p
                self.d.player = TERMINAL_PLAYER  # p p, b p, b b
        else:
            if action == PASS:
                self.d.folder = 0            # p b p
            self.d.player = TERMINAL_PLAYER  # p b p, p b b

    cdef void returns(self, double* out) noexcept:
        cdef int winner, loser, lost, n
        if self.d.player != TERMINAL_PLAYER:
            out[0] = 0.0
            out[1] = 0.0
            return
        if self.d.folder >= 0:
            loser = self.d.folder
        elif self.d.card[0] > self.d.card[1]:
            loser = 1
        else:
            loser = 0
        winner = 1 - loser
        # The loser's contribution: the ante plus each of their bets/calls.
        lost = 1
        for n in range(loser, self.d.num_bets, 2):
            lost += self.d.history[n]
        out[winner] = lost
        out[loser] = -lost

    cdef void encode(self, int player, float* out) noexcept:
        cdef int i
        memset(out, 0, ENC_SIZE * sizeof(float))
        out[OFF_PLAYER + player] = 1.0
        if self.d.card[player] >= 0:
            out[OFF_CARD + self.d.card[player]] = 1.0
        for i in range(self.d.num_bets):
            out[OFF_BETTING + 2 * i + self.d.history[i]] = 1.0

    cdef void compact(self, int player, uint8_t* out) noexcept:
        cdef int i
        out[0] = <uint8_t>player
        out[1] = <uint8_t>(self.d.card[player] + 1)
        out[2] = <uint8_t>self.d.num_bets
        for i in range(MAX_BETS):
            out[3 + i] = <uint8_t>self.d.history[i] if i < self.d.num_bets else 0

    cdef void expand(self, const uint8_t* s, float* out) noexcept:
        cdef int i, player = s[0]
        self.reset(NULL)
        self.d.card[player] = <int8_t>(<int>s[1] - 1)
        self.d.num_bets = <int8_t>s[2]
        for i in range(self.d.num_bets):
            self.d.history[i] = <int8_t>s[3 + i]
        self.encode(player, out)

    cdef void reshuffle(self, Rng* rng) noexcept:
        pass  # chance is explicit: nothing hidden is left to redraw

    cdef GameState clone(self):
        cdef KuhnState other = KuhnState.__new__(KuhnState)
        other.d = self.d
        return other

    cdef void copy_from(self, GameState other) noexcept:
        # Contract: ``other`` is a KuhnState (a traversal only mixes states of one game).
        self.d = (<KuhnState>other).d

    # --- Python views (unchecked; kuhn.py validates) -------------------------
    def cards(self):
        """Private cards (card 0, card 1); -1 where not dealt yet."""
        return (self.d.card[0], self.d.card[1])

    def history(self):
        """Betting actions so far, in order."""
        return [self.d.history[i] for i in range(self.d.num_bets)]
