# cython: language_level=3
"""Leduc poker kernel (OpenSpiel ``leduc_poker``, 2 players, default
parameters): the C-level state behind ``lostcities.games.leduc``.

The whole state is one small C struct (``LeducData``), so ``copy_from`` is a
struct copy. Cards 0..5, rank = card // 2 (J J Q Q K K). Chance is explicit:
player 0's card, player 1's card, and (between the rounds) the public card,
each uniform over the cards left; the chance action id is the card id.
Actions: 0 fold, 1 call/check, 2 raise. Layouts are documented in
``leduc.py``; this file only keeps them consistent with its enum below.
"""

cimport cython
from libc.stdint cimport int8_t, uint8_t
from libc.string cimport memset

from lostcities._rng cimport Rng
from lostcities.games._state cimport CHANCE_PLAYER, TERMINAL_PLAYER, GameState

cdef enum:
    N_CARDS = 6
    N_ACTIONS = 3
    FOLD = 0
    CALL = 1
    RAISE = 2
    MAX_RAISES = 2        # per round
    MAX_SEQ = 4           # betting actions per round at most: c r r c
    ANTE = 1
    RAISE_ROUND1 = 2
    RAISE_ROUND2 = 4
    ENC_SIZE = 30
    OFF_PLAYER = 0        # [0, 2)   observing player one-hot
    OFF_PRIVATE = 2       # [2, 8)   private card one-hot
    OFF_PUBLIC = 8        # [8, 14)  public card one-hot
    OFF_BETTING = 14      # [14, 30) 2 rounds x 4 slots x (call, raise)
    # compact: seat, private card + 1, public card + 1 (0: not dealt), the two rounds'
    # sequence lengths, then their 4 + 4 actions (0 where unused)
    COMPACT_SIZE = 13

NUM_ACTIONS = N_ACTIONS
ENCODING_SIZE = ENC_SIZE


cdef struct LeducData:
    int8_t private_card[2]  # -1 until dealt
    int8_t public_card      # -1 until dealt
    int8_t num_dealt        # private cards dealt, 0..2
    int8_t player           # 0/1 to act, CHANCE_PLAYER or TERMINAL_PLAYER
    int8_t round            # 0 or 1
    int8_t num_raises       # raises in the current round
    int8_t num_calls        # calls/checks since the round start or the last raise
    int8_t stakes           # contribution everyone must match
    int8_t contrib[2]       # chips each player has put in, ante included
    int8_t folder           # player who folded, -1 if none
    int8_t seq_len[2]
    int8_t seq[2][MAX_SEQ]  # betting actions of each round, in order


@cython.final
cdef class LeducState(GameState):
    """C-level Leduc poker state. Use ``lostcities.games.leduc.LeducGame``."""

    cdef LeducData d

    def __cinit__(self):
        self.num_actions = N_ACTIONS
        self.encoding_size = ENC_SIZE
        self.compact_size = COMPACT_SIZE
        self.reset(NULL)

    # --- the GameState interface -------------------------------------------
    cdef void reset(self, Rng* rng) noexcept:
        # Chance is explicit, so the stream is not used: back to the root deal.
        memset(&self.d, 0, sizeof(LeducData))
        self.d.private_card[0] = -1
        self.d.private_card[1] = -1
        self.d.public_card = -1
        self.d.player = CHANCE_PLAYER
        self.d.stakes = ANTE
        self.d.contrib[0] = ANTE
        self.d.contrib[1] = ANTE
        self.d.folder = -1

    cdef int current_player(self) noexcept:
        return self.d.player

    cdef int legal_mask(self, uint8_t* mask) noexcept:
        cdef int p = self.d.player
        if p < 0:
            mask[FOLD] = 0
            mask[CALL] = 0
            mask[RAISE] = 0
            return 0
        mask[FOLD] = self.d.stakes > self.d.contrib[p]
        mask[CALL] = 1
        mask[RAISE] = self.d.num_raises < MAX_RAISES
        return mask[FOLD] + 1 + mask[RAISE]

    cdef int chance_outcomes(self, int* actions, double* probs) noexcept:
        cdef int c, n = 0
        if self.d.player != CHANCE_PLAYER:
            return 0
        for c in range(N_CARDS):
            if (c != self.d.private_card[0] and c != self.d.private_card[1]
                    and c != self.d.public_card):
                actions[n] = c
                n += 1
        for c in range(n):
            probs[c] = 1.0 / n
        return n

    cdef void apply(self, int action) noexcept:
        cdef int p = self.d.player
        cdef int r = self.d.round
        if p == CHANCE_PLAYER:
            if self.d.num_dealt < 2:
                self.d.private_card[self.d.num_dealt] = <int8_t>action
                self.d.num_dealt += 1
                if self.d.num_dealt == 2:
                    self.d.player = 0
            else:
                self.d.public_card = <int8_t>action
                self.d.player = 0
            return
        self.d.seq[r][self.d.seq_len[r]] = <int8_t>action
        self.d.seq_len[r] += 1
        if action == FOLD:
            self.d.folder = <int8_t>p
            self.d.player = TERMINAL_PLAYER
        elif action == CALL:
            self.d.contrib[p] = self.d.stakes
            self.d.num_calls += 1
            if ((self.d.num_raises == 0 and self.d.num_calls == 2)
                    or (self.d.num_raises > 0 and self.d.num_calls == 1)):
                if r == 0:  # round 1 over: deal the public card
                    self.d.round = 1
                    self.d.num_raises = 0
                    self.d.num_calls = 0
                    self.d.player = CHANCE_PLAYER
                else:
                    self.d.player = TERMINAL_PLAYER
            else:
                self.d.player = 1 - p
        else:  # RAISE: match the stakes, then raise them
            self.d.stakes += RAISE_ROUND1 if r == 0 else RAISE_ROUND2
            self.d.contrib[p] = self.d.stakes
            self.d.num_raises += 1
            self.d.num_calls = 0
            self.d.player = 1 - p

    cdef void returns(self, double* out) noexcept:
        cdef int pub, r0, r1, winner
        cdef int pot = self.d.contrib[0] + self.d.contrib[1]
        if self.d.player != TERMINAL_PLAYER:
            out[0] = 0.0
            out[1] = 0.0
            return
        if self.d.folder >= 0:
            winner = 1 - self.d.folder
        else:
            # Showdown: pairing the public card wins; else the higher rank;
            # equal ranks split (both cannot pair: a rank has only two cards).
            pub = self.d.public_card // 2
            r0 = self.d.private_card[0] // 2
            r1 = self.d.private_card[1] // 2
            if r0 == pub:
                winner = 0
            elif r1 == pub:
                winner = 1
            elif r0 != r1:
                winner = 0 if r0 > r1 else 1
            else:
                out[0] = 0.5 * pot - self.d.contrib[0]
                out[1] = 0.5 * pot - self.d.contrib[1]
                return
        out[winner] = pot - self.d.contrib[winner]
        out[1 - winner] = -self.d.contrib[1 - winner]

    cdef void encode(self, int player, float* out) noexcept:
        cdef int r, i, a
        memset(out, 0, ENC_SIZE * sizeof(float))
        out[OFF_PLAYER + player] = 1.0
        if self.d.private_card[player] >= 0:
            out[OFF_PRIVATE + self.d.private_card[player]] = 1.0
        if self.d.public_card >= 0:
            out[OFF_PUBLIC + self.d.public_card] = 1.0
        for r in range(2):
            for i in range(self.d.seq_len[r]):
                a = self.d.seq[r][i]
                if a == CALL:
                    out[OFF_BETTING + 2 * (MAX_SEQ * r + i)] = 1.0
                elif a == RAISE:
                    out[OFF_BETTING + 2 * (MAX_SEQ * r + i) + 1] = 1.0
                # a fold is 00 (and ends the game)

    cdef void compact(self, int player, uint8_t* out) noexcept:
        cdef int r, i
        out[0] = <uint8_t>player
        out[1] = <uint8_t>(self.d.private_card[player] + 1)
        out[2] = <uint8_t>(self.d.public_card + 1)
        for r in range(2):
            out[3 + r] = <uint8_t>self.d.seq_len[r]
            for i in range(MAX_SEQ):
                out[5 + MAX_SEQ * r + i] = <uint8_t>self.d.seq[r][i] if i < self.d.seq_len[r] else 0

    cdef void expand(self, const uint8_t* s, float* out) noexcept:
        cdef int r, i, player = s[0]
        self.reset(NULL)
        self.d.private_card[player] = <int8_t>(<int>s[1] - 1)
        self.d.public_card = <int8_t>(<int>s[2] - 1)
        for r in range(2):
            self.d.seq_len[r] = <int8_t>s[3 + r]
            for i in range(self.d.seq_len[r]):
                self.d.seq[r][i] = <int8_t>s[5 + MAX_SEQ * r + i]
        self.encode(player, out)

    cdef void reshuffle(self, Rng* rng) noexcept:
        pass  # chance is explicit: nothing hidden is left to redraw

    cdef GameState clone(self):
        cdef LeducState other = LeducState.__new__(LeducState)
        other.d = self.d
        return other

    cdef void copy_from(self, GameState other) noexcept:
        # Contract: ``other`` is a LeducState (a traversal only mixes states of one game).
        self.d = (<LeducState>other).d

    # --- Python views (unchecked; leduc.py validates) ------------------------
    def private_cards(self):
        """(player 0's card, player 1's card); -1 where not dealt yet."""
        return (self.d.private_card[0], self.d.private_card[1])

    def public_card(self):
        """The public card, -1 before it is dealt."""
        return self.d.public_card

    def round(self):
        """Betting round: 0 (before the public card) or 1."""
        return self.d.round

    def num_raises(self):
        """Raises so far in the current round."""
        return self.d.num_raises

    def contributions(self):
        """Chips each player has put in the pot, ante included."""
        return (self.d.contrib[0], self.d.contrib[1])

    def sequences(self):
        """Betting actions of round 1 and round 2, as two lists."""
        return ([self.d.seq[0][i] for i in range(self.d.seq_len[0])],
                [self.d.seq[1][i] for i in range(self.d.seq_len[1])])
