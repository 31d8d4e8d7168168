# cython: language_level=3
"""Lost Cities kernel: the C-level state behind ``lostcities.games.lost_cities``.

The state is one C struct (``LCData``) so a clone is a struct copy. Card
types, actions and the encoding follow ``lost_cities_spec.py``; rules.py is
the slow reference this kernel is property-tested against.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int16_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

cdef extern from *:
    int ctz64 "__builtin_ctzll"(uint64_t) nogil

from lostcities._rng cimport Rng, rng_below, rng_init
from lostcities.games._state cimport TERMINAL_PLAYER, GameState

cnp.import_array()

cdef enum:
    NUM_TYPES = 50
    NUM_COLORS = 5
    RANKS = 10
    NUM_CARDS = 60
    HAND = 8
    MAX_PILE = 12
    N_ACTIONS = 106
    DISCARD = 50
    DRAW_DECK = 100
    DRAW_PILE = 101
    ENC_SIZE = 1077
    # Encoding offsets (named slices in lost_cities_spec.ENCODING_SLICES).
    OFF_OWN_HAND = 0
    OFF_OWN_EXP = 50
    OFF_OPP_EXP = 100
    OFF_DISCARDS = 150
    OFF_DRAW_PILE = 750
    OFF_OPP_KNOWN = 751
    OFF_PHASE = 801
    OFF_JUST_DISCARDED = 803
    OFF_SEAT = 853
    # derived features (functions of the slices above, spelled out for the networks)
    OFF_PLAYABLE = 855
    OFF_OPENS = 905
    OFF_GAP = 955
    OFF_COLOR_STATS = 1005
    COLOR_STATS = 14
    OFF_TOTALS = 1075
    # Compact information state (lost_cities_spec.COMPACT_*): one location code per card,
    # then four scalars.
    COMPACT_SIZE = 64
    LOC_UNSEEN = 0
    LOC_HAND = 1
    LOC_OWN_EXP = 2
    LOC_OPP_EXP = 3
    LOC_OPP_KNOWN = 4
    LOC_PILE = 5                    # + position from the bottom of its color's pile
    C_DECK = 60
    C_PHASE = 61
    C_JUST_DISCARDED = 62
    C_SEAT = 63


cdef struct LCData:
    uint8_t hand[2][NUM_TYPES]      # count of each card type in each hand
    uint8_t known[2][NUM_TYPES]     # counts the other player knows are in that hand
    uint8_t played[2][NUM_TYPES]    # count of each type on each player's expeditions
    int8_t top_rank[2][NUM_COLORS]  # highest number rank played per color, 0 if none
    uint8_t pile[NUM_COLORS][MAX_PILE]  # discard piles, bottom first
    uint8_t pile_len[NUM_COLORS]
    uint8_t deck[NUM_CARDS]         # draw pile in deck[0:deck_len], top last
    int16_t deck_len
    int8_t player                   # to act
    int8_t phase                    # 0 play/discard, 1 draw
    int8_t just_discarded           # type discarded this turn, -1 if none
    int8_t terminal
    int8_t capped                   # ended by the turn cap
    int16_t turns                   # completed turns
    int16_t max_turns
    # Derived bitsets over the 50 card types (bit t), kept in step with the
    # counts so the legal-move scan is a few bit operations:
    uint64_t in_hand[2]             # bit t set iff hand[p][t] > 0
    uint64_t playable[2]            # bit t set iff p could legally play type t


cdef inline int expedition_score(const uint8_t* played_row, int color) noexcept:
    """Score of one color given a player's played-type counts."""
    cdef int base = color * RANKS
    cdef int wagers = played_row[base]
    cdef int cards = wagers, total = 0, r
    for r in range(1, RANKS):
        if played_row[base + r]:
            cards += 1
            total += r + 1
    if cards == 0:
        return 0
    return (total - 20) * (1 + wagers) + (20 if cards >= 8 else 0)


cdef inline int _repeat(uint8_t* out, int i, int code, int count) noexcept:
    """Write ``code`` into out[i:i + count]; returns i + count."""
    cdef int k
    for k in range(count):
        out[i + k] = code
    return i + count


cdef inline uint64_t _bit(int t) noexcept:
    return (<uint64_t>1) << t


cdef class LostCitiesState(GameState):
    """C-level Lost Cities state. Use ``lostcities.games.lost_cities.LostCitiesGame``."""

    cdef LCData d

    def __cinit__(self, int max_turns=1000):
        self.num_actions = N_ACTIONS
        self.encoding_size = ENC_SIZE
        self.compact_size = COMPACT_SIZE
        memset(&self.d, 0, sizeof(LCData))
        self.d.max_turns = max_turns
        self.d.just_discarded = -1

    # --- setup ---------------------------------------------------------------
    cdef void _rebuild_bits(self) noexcept:
        """Derive the bitsets from the counts (after a deal or a load)."""
        cdef int p, t, c
        for p in range(2):
            self.d.in_hand[p] = 0
            self.d.playable[p] = 0
            for t in range(NUM_TYPES):
                if self.d.hand[p][t]:
                    self.d.in_hand[p] |= _bit(t)
                c = t // RANKS
                if (t % RANKS == 0 and self.d.top_rank[p][c] == 0) or t % RANKS > self.d.top_rank[p][c]:
                    self.d.playable[p] |= _bit(t)

    cdef void _deal_cards(self, const uint8_t* cards, int first_player) noexcept:
        """cards[0:8] -> hand 0, cards[8:16] -> hand 1, cards[16:60] -> draw pile."""
        cdef int max_turns = self.d.max_turns, i
        memset(&self.d, 0, sizeof(LCData))
        self.d.max_turns = max_turns
        self.d.just_discarded = -1
        self.d.player = first_player
        for i in range(HAND):
            self.d.hand[0][cards[i]] += 1
            self.d.hand[1][cards[HAND + i]] += 1
        self.d.deck_len = NUM_CARDS - 2 * HAND
        memcpy(self.d.deck, cards + 2 * HAND, self.d.deck_len)
        self._rebuild_bits()

    cdef void reset(self, Rng* rng) noexcept:
        """Seeded deal: the sorted 60 cards shuffled by Fisher-Yates from the back."""
        cdef uint8_t[NUM_CARDS] cards
        cdef int t, c, n = 0, i, j
        cdef uint8_t tmp
        for t in range(NUM_TYPES):
            for c in range(3 if t % RANKS == 0 else 1):
                cards[n] = t
                n += 1
        for i in range(NUM_CARDS - 1, 0, -1):
            j = <int>rng_below(rng, i + 1)
            tmp = cards[i]
            cards[i] = cards[j]
            cards[j] = tmp
        self._deal_cards(cards, 0)

    def deal(self, cards, int first_player=0):
        """Set up from 60 explicit card types (hands, then draw pile top last).
        Unchecked: the wrapper validates."""
        cdef uint8_t[NUM_CARDS] buf
        cdef int i
        for i in range(NUM_CARDS):
            buf[i] = cards[i]
        self._deal_cards(buf, first_player)

    def deal_seed(self, uint64_t key):
        cdef Rng rng
        rng_init(&rng, key)
        self.reset(&rng)

    # --- the GameState interface ---------------------------------------------
    cdef int current_player(self) noexcept:
        if self.d.terminal:
            return TERMINAL_PLAYER
        return self.d.player

    cdef int legal_mask(self, uint8_t* mask) noexcept:
        cdef int[N_ACTIONS] actions
        cdef int i, n = self.legal_actions(actions)
        memset(mask, 0, N_ACTIONS)
        for i in range(n):
            mask[actions[i]] = 1
        return n

    cdef int legal_actions(self, int* out) noexcept:
        cdef int p = self.d.player, c, n = 0
        cdef uint64_t bits
        if self.d.terminal:
            return 0
        if self.d.phase == 0:
            # plays: types in hand that extend the expedition; then every discard
            bits = self.d.in_hand[p] & self.d.playable[p]
            while bits:
                out[n] = ctz64(bits)
                n += 1
                bits &= bits - 1
            bits = self.d.in_hand[p]
            while bits:
                out[n] = DISCARD + ctz64(bits)
                n += 1
                bits &= bits - 1
            return n
        out[0] = DRAW_DECK
        n = 1
        for c in range(NUM_COLORS):
            if self.d.pile_len[c] and (self.d.just_discarded < 0 or self.d.just_discarded // RANKS != c):
                out[n] = DRAW_PILE + c
                n += 1
        return n

    cdef int chance_outcomes(self, int* actions, double* probs) noexcept:
        return 0

    cdef void apply(self, int action) noexcept:
        cdef int p = self.d.player, t, c, r
        if self.d.phase == 0:
            t = action % DISCARD
            self.d.hand[p][t] -= 1
            if self.d.hand[p][t] == 0:
                self.d.in_hand[p] &= ~_bit(t)
            if self.d.known[p][t]:
                self.d.known[p][t] -= 1
            c = t // RANKS
            if action < DISCARD:
                self.d.played[p][t] += 1
                r = t % RANKS
                if r > 0:
                    self.d.top_rank[p][c] = r
                    # the wager and every rank up to r of this color are now unplayable
                    self.d.playable[p] &= ~((<uint64_t>((1 << (r + 1)) - 1)) << (c * RANKS))
                self.d.just_discarded = -1
            else:
                self.d.pile[c][self.d.pile_len[c]] = t
                self.d.pile_len[c] += 1
                self.d.just_discarded = t
            self.d.phase = 1
            return
        if action == DRAW_DECK:
            self.d.deck_len -= 1
            t = self.d.deck[self.d.deck_len]
            self.d.hand[p][t] += 1
            self.d.in_hand[p] |= _bit(t)
            if self.d.deck_len == 0:
                self.d.terminal = 1
        else:
            c = action - DRAW_PILE
            self.d.pile_len[c] -= 1
            t = self.d.pile[c][self.d.pile_len[c]]
            self.d.hand[p][t] += 1
            self.d.in_hand[p] |= _bit(t)
            self.d.known[p][t] += 1
        self.d.turns += 1
        self.d.phase = 0
        self.d.just_discarded = -1
        self.d.player = 1 - p
        if not self.d.terminal and self.d.turns >= self.d.max_turns:
            self.d.terminal = 1
            self.d.capped = 1

    cdef void returns(self, double* out) noexcept:
        cdef int s0 = 0, s1 = 0, c
        for c in range(NUM_COLORS):
            s0 += expedition_score(self.d.played[0], c)
            s1 += expedition_score(self.d.played[1], c)
        out[0] = s0 - s1
        out[1] = s1 - s0

    cdef void encode(self, int player, float* out) noexcept:
        cdef int opp = 1 - player, t, c, j, n
        memset(out, 0, ENC_SIZE * sizeof(float))
        for t in range(NUM_TYPES):
            out[OFF_OWN_HAND + t] = self.d.hand[player][t]
            out[OFF_OWN_EXP + t] = self.d.played[player][t]
            out[OFF_OPP_EXP + t] = self.d.played[opp][t]
            out[OFF_OPP_KNOWN + t] = self.d.known[opp][t]
        for c in range(NUM_COLORS):
            n = self.d.pile_len[c]
            for j in range(n):  # slot 0 = top card
                out[OFF_DISCARDS + (c * MAX_PILE + j) * RANKS + self.d.pile[c][n - 1 - j] % RANKS] = 1.0
        out[OFF_DRAW_PILE] = self.d.deck_len / 44.0
        out[OFF_PHASE + self.d.phase] = 1.0
        if self.d.just_discarded >= 0:
            out[OFF_JUST_DISCARDED + self.d.just_discarded] = 1.0
        out[OFF_SEAT + player] = 1.0
        self._encode_derived(player, out)

    cdef void _encode_derived(self, int player, float* out) noexcept:
        """The spec's derived slices: per-card playability and per-color summaries."""
        cdef int opp = 1 - player, t, c, r, j, top, base, cards, wagers, n
        cdef int hand_points, unseen_points, color_in_hand
        cdef int p, who
        cdef int total[2]
        cdef uint8_t in_pile[NUM_TYPES]
        cdef float* row
        memset(in_pile, 0, sizeof(in_pile))
        for c in range(NUM_COLORS):
            for j in range(self.d.pile_len[c]):
                in_pile[self.d.pile[c][j]] = 1
        total[0] = total[1] = 0
        for c in range(NUM_COLORS):
            base = c * RANKS
            row = &out[OFF_COLOR_STATS + c * COLOR_STATS]
            for who in range(2):  # 0: own expedition, 1: the opponent's
                p = player if who == 0 else opp
                wagers = self.d.played[p][base]
                cards = wagers
                for r in range(1, RANKS):
                    cards += self.d.played[p][base + r]
                n = expedition_score(self.d.played[p], c)
                total[who] += n
                row[who * 5 + 0] = 1.0 if cards > 0 else 0.0
                row[who * 5 + 1] = self.d.top_rank[p][c] / 9.0
                row[who * 5 + 2] = wagers / 3.0
                row[who * 5 + 3] = cards / 12.0
                row[who * 5 + 4] = n / 100.0
            top = self.d.top_rank[player][c]
            hand_points = unseen_points = color_in_hand = 0
            for r in range(RANKS):
                t = base + r
                color_in_hand += self.d.hand[player][t]
                if r > top:
                    if self.d.hand[player][t]:
                        hand_points += r + 1
                    elif not (self.d.played[0][t] or self.d.played[1][t] or in_pile[t]
                              or self.d.known[opp][t]):
                        unseen_points += r + 1
                if (self.d.in_hand[player] & self.d.playable[player]) & _bit(t):
                    out[OFF_PLAYABLE + t] = 1.0
                    if row[0] == 0.0:
                        out[OFF_OPENS + t] = 1.0
                    if r > 0:
                        out[OFF_GAP + t] = (r - top - 1) / 8.0
            row[10] = hand_points / 54.0
            row[11] = unseen_points / 54.0
            if self.d.pile_len[c] and self.d.playable[player] & _bit(
                    self.d.pile[c][self.d.pile_len[c] - 1]):
                row[12] = 1.0
            row[13] = color_in_hand / 8.0
        out[OFF_TOTALS] = total[0] / 100.0
        out[OFF_TOTALS + 1] = total[1] / 100.0

    cdef void compact(self, int player, uint8_t* out) noexcept:
        """Each card's location as ``player`` sees it, cards in the sorted deck's order
        (the copies of a wager ascending by code), then the draw pile's size, the phase,
        the type just discarded + 1 and the seat (lost_cities_spec: compact layout)."""
        cdef int opp = 1 - player, t, c, j, i = 0, unseen
        for t in range(NUM_TYPES):
            c = t // RANKS
            unseen = (3 if t % RANKS == 0 else 1) - self.d.hand[player][t] \
                - self.d.played[player][t] - self.d.played[opp][t] - self.d.known[opp][t]
            for j in range(self.d.pile_len[c]):
                unseen -= self.d.pile[c][j] == t
            # the copies' codes in ascending order: equal information states, equal bytes
            i = _repeat(out, i, LOC_UNSEEN, unseen)
            i = _repeat(out, i, LOC_HAND, self.d.hand[player][t])
            i = _repeat(out, i, LOC_OWN_EXP, self.d.played[player][t])
            i = _repeat(out, i, LOC_OPP_EXP, self.d.played[opp][t])
            i = _repeat(out, i, LOC_OPP_KNOWN, self.d.known[opp][t])
            for j in range(self.d.pile_len[c]):
                if self.d.pile[c][j] == t:
                    out[i] = LOC_PILE + j
                    i += 1
        out[C_DECK] = <uint8_t>self.d.deck_len
        out[C_PHASE] = <uint8_t>self.d.phase
        out[C_JUST_DISCARDED] = <uint8_t>(self.d.just_discarded + 1)
        out[C_SEAT] = <uint8_t>player

    cdef void expand(self, const uint8_t* s, float* out) noexcept:
        """Rebuild the viewer's side of a state from ``compact``'s bytes in this state (the
        opponent's unknown cards and the draw pile's order stay empty: encode reads
        neither), then encode it."""
        cdef int player = s[C_SEAT], opp = 1 - player, t, c, r, k, i = 0, code, j
        memset(&self.d, 0, sizeof(LCData))
        for t in range(NUM_TYPES):
            c = t // RANKS
            for k in range(3 if t % RANKS == 0 else 1):
                code = s[i]
                i += 1
                if code == LOC_HAND:
                    self.d.hand[player][t] += 1
                elif code == LOC_OWN_EXP:
                    self.d.played[player][t] += 1
                elif code == LOC_OPP_EXP:
                    self.d.played[opp][t] += 1
                elif code == LOC_OPP_KNOWN:
                    self.d.known[opp][t] += 1
                    self.d.hand[opp][t] += 1
                elif code >= LOC_PILE:
                    j = code - LOC_PILE
                    self.d.pile[c][j] = t
                    if j + 1 > self.d.pile_len[c]:
                        self.d.pile_len[c] = j + 1
        for k in range(2):
            for c in range(NUM_COLORS):
                for r in range(1, RANKS):
                    if self.d.played[k][c * RANKS + r]:
                        self.d.top_rank[k][c] = r
        self.d.deck_len = s[C_DECK]
        self.d.phase = s[C_PHASE]
        self.d.just_discarded = <int>s[C_JUST_DISCARDED] - 1
        self.d.player = player
        self.d.max_turns = 1000
        self._rebuild_bits()
        self.encode(player, out)

    cdef void reshuffle(self, Rng* rng) noexcept:
        """Fisher-Yates from the back over the unseen draw pile only."""
        cdef int i, j
        cdef uint8_t tmp
        for i in range(self.d.deck_len - 1, 0, -1):
            j = <int>rng_below(rng, i + 1)
            tmp = self.d.deck[i]
            self.d.deck[i] = self.d.deck[j]
            self.d.deck[j] = tmp

    cdef GameState clone(self):
        cdef LostCitiesState other = LostCitiesState.__new__(LostCitiesState)
        other.d = self.d
        return other

    cdef void copy_from(self, GameState other) noexcept:
        self.d = (<LostCitiesState>other).d

    def determinize(self, int viewer, uint64_t key):
        """Redeal what ``viewer`` cannot see: the opponent's cards that ``viewer`` has not
        seen taken from a discard pile, and the draw pile. Pool = those opponent cards by
        type ascending, then the draw pile bottom..top; Fisher-Yates from the back with the
        stream ``key``; the first cards refill the opponent's hand, the rest are the pile.
        Hand and pile sizes, the known cards and ``viewer``'s encoding are unchanged."""
        cdef int opp = 1 - viewer, t, k, n = 0, unknown, i, j
        cdef uint8_t[NUM_CARDS] pool
        cdef uint8_t tmp
        cdef Rng rng
        for t in range(NUM_TYPES):
            for k in range(self.d.hand[opp][t] - self.d.known[opp][t]):
                pool[n] = t
                n += 1
        unknown = n
        for i in range(self.d.deck_len):
            pool[n] = self.d.deck[i]
            n += 1
        rng_init(&rng, key)
        for i in range(n - 1, 0, -1):
            j = <int>rng_below(&rng, i + 1)
            tmp = pool[i]
            pool[i] = pool[j]
            pool[j] = tmp
        for t in range(NUM_TYPES):
            self.d.hand[opp][t] = self.d.known[opp][t]
        for i in range(unknown):
            self.d.hand[opp][pool[i]] += 1
        for i in range(unknown, n):
            self.d.deck[i - unknown] = pool[i]
        self._rebuild_bits()

    # --- read-only views for the wrapper --------------------------------------
    @property
    def phase(self):
        return self.d.phase

    @property
    def turns(self):
        return self.d.turns

    @property
    def max_turns(self):
        return self.d.max_turns

    @property
    def capped(self):
        return bool(self.d.capped)

    @property
    def terminal(self):
        return bool(self.d.terminal)

    @property
    def just_discarded(self):
        return self.d.just_discarded

    def hand_counts(self, int player):
        return [self.d.hand[player][t] for t in range(NUM_TYPES)]

    def known_counts(self, int player):
        return [self.d.known[player][t] for t in range(NUM_TYPES)]

    def played_counts(self, int player):
        return [self.d.played[player][t] for t in range(NUM_TYPES)]

    def pile_cards(self, int color):
        return [self.d.pile[color][j] for j in range(self.d.pile_len[color])]

    def deck_cards(self):
        return [self.d.deck[j] for j in range(self.d.deck_len)]

    def expedition_scores(self, int player):
        return [expedition_score(self.d.played[player], c) for c in range(NUM_COLORS)]

    def to_bytes(self):
        """The raw struct (a compact, fixed-size snapshot; the wrapper adds a header)."""
        return (<char*>&self.d)[:sizeof(LCData)]

    def from_bytes(self, const uint8_t[:] raw):
        if raw.shape[0] != sizeof(LCData):
            raise ValueError(f"expected {sizeof(LCData)} state bytes, got {raw.shape[0]}")
        memcpy(&self.d, &raw[0], sizeof(LCData))
        self._rebuild_bits()

