# cython: language_level=3
"""Base class of the game kernels, plus the Python-visible views and the
C-level random playout loop shared by every game (see ``_state.pxd``)."""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport uint8_t, uint64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from lostcities._rng cimport Rng, rng_below, rng_choice, rng_init

cnp.import_array()


cdef class GameState:
    # --- the C interface: concrete games override all of these -------------
    cdef void reset(self, Rng* rng) noexcept:
        pass

    cdef int current_player(self) noexcept:
        return TERMINAL_PLAYER

    cdef int legal_mask(self, uint8_t* mask) noexcept:
        return 0

    cdef int legal_actions(self, int* out) noexcept:
        cdef uint8_t[MAX_ACTIONS] mask
        cdef int a, n = 0
        self.legal_mask(mask)
        for a in range(self.num_actions):
            if mask[a]:
                out[n] = a
                n += 1
        return n

    cdef int chance_outcomes(self, int* actions, double* probs) noexcept:
        return 0

    cdef void apply(self, int action) noexcept:
        pass

    cdef void returns(self, double* out) noexcept:
        out[0] = 0.0
        out[1] = 0.0

    cdef void encode(self, int player, float* out) noexcept:
        pass

    cdef void compact(self, int player, uint8_t* out) noexcept:
        pass

    cdef void expand(self, const uint8_t* compact, float* out) noexcept:
        pass

    cdef void reshuffle(self, Rng* rng) noexcept:
        pass

    cdef GameState clone(self):
        raise NotImplementedError

    cdef void copy_from(self, GameState other) noexcept:
        pass

    # --- Python views (unchecked; the wrappers in lostcities.games validate) --
    def player(self) -> int:
        """0 or 1 to act, -1 at a chance node, -2 when terminal."""
        return self.current_player()

    def legal(self):
        """Legal action ids, ascending, int32 array."""
        cdef int[MAX_ACTIONS] out
        cdef int n = self.legal_actions(out)
        return np.array([out[i] for i in range(n)], dtype=np.int32)

    def mask(self):
        """Legal-action mask, uint8 array of shape (num_actions,)."""
        cdef cnp.ndarray[cnp.uint8_t, ndim=1] out = np.zeros(self.num_actions, dtype=np.uint8)
        self.legal_mask(<uint8_t*>out.data)
        return out

    def chance(self):
        """(actions int32 array, probabilities float64 array) at a chance node."""
        cdef int[MAX_CHANCE_OUTCOMES] actions
        cdef double[MAX_CHANCE_OUTCOMES] probs
        cdef int n = self.chance_outcomes(actions, probs)
        return (np.array([actions[i] for i in range(n)], dtype=np.int32),
                np.array([probs[i] for i in range(n)], dtype=np.float64))

    def step(self, int action):
        """Apply ``action`` without checking it (the wrappers check)."""
        self.apply(action)

    def encoding(self, int player):
        """Information-state features of ``player``, float32 (encoding_size,)."""
        cdef cnp.ndarray[cnp.float32_t, ndim=1] out = np.zeros(self.encoding_size,
                                                                dtype=np.float32)
        self.encode(player, <float*>out.data)
        return out

    def compact_view(self, int player):
        """What ``player`` knows in compact form, uint8 (compact_size,)."""
        cdef cnp.ndarray[cnp.uint8_t, ndim=1] out = np.zeros(self.compact_size, dtype=np.uint8)
        self.compact(player, <uint8_t*>out.data)
        return out

    def payoffs(self):
        """Terminal returns of both players, float64 (2,)."""
        cdef double[2] out
        self.returns(out)
        return np.array([out[0], out[1]], dtype=np.float64)

    def copy(self):
        return self.clone()

    def assign(self, GameState other):
        """Overwrite this state with ``other`` through the C ``copy_from`` (a struct copy)."""
        if type(other) is not type(self):
            raise TypeError(f"cannot assign a {type(other).__name__} to a {type(self).__name__}")
        self.copy_from(other)

    def reset_from_state(self, uint64_t state):
        """``reset`` with an Rng whose state is ``state``; returns the advanced
        state (lets a Python twin share one stream with this call)."""
        cdef Rng rng
        rng.state = state
        self.reset(&rng)
        return rng.state

    def reshuffle_from_state(self, uint64_t state):
        """``reshuffle`` with an Rng whose state is ``state``; returns the advanced state."""
        cdef Rng rng
        rng.state = state
        self.reshuffle(&rng)
        return rng.state

    def shuffle_hidden(self, uint64_t key):
        """Redraw the hidden chance order (the Lost Cities draw pile) from a
        stream keyed by ``key``."""
        cdef Rng rng
        rng_init(&rng, key)
        self.reshuffle(&rng)


def expand_rows(GameState scratch, const uint8_t[:, ::1] states, float[:, ::1] out):
    """Features of compact rows: ``states`` uint8 (n, k * compact_size), each row k
    information states side by side -> ``out`` float32 (n, k * encoding_size), the k
    encodings side by side. ``scratch`` is overwritten (see ``GameState.expand``); shapes
    are checked by the caller (lostcities.games.expand_states)."""
    cdef Py_ssize_t i, n = states.shape[0]
    cdef int k, views = states.shape[1] // scratch.compact_size
    cdef int c = scratch.compact_size, d = scratch.encoding_size
    for i in range(n):
        for k in range(views):
            scratch.expand(&states[i, k * c], &out[i, k * d])


def random_playouts(GameState prototype, long games, uint64_t key):
    """Play ``games`` uniformly random games entirely at C level.

    Each game starts from ``prototype.reset`` with one stream (so Lost Cities
    gets a fresh deal per game); chance nodes are sampled with their true
    probabilities. Returns (total actions applied, sum of player 0 returns).
    This is the loop the engine benchmark measures.
    """
    cdef GameState state = prototype.clone()
    cdef Rng rng
    cdef int[MAX_ACTIONS] legal
    cdef int[MAX_CHANCE_OUTCOMES] actions
    cdef double[MAX_CHANCE_OUTCOMES] probs
    cdef double[2] ret
    cdef long g, steps = 0
    cdef int n, player
    cdef double total = 0.0
    if prototype.num_actions > 512:
        raise ValueError("random_playouts supports at most 512 actions")
    rng_init(&rng, key)
    for g in range(games):
        state.reset(&rng)
        while True:
            player = state.current_player()
            if player == TERMINAL_PLAYER:
                break
            if player == CHANCE_PLAYER:
                n = state.chance_outcomes(actions, probs)
                state.apply(actions[rng_choice(&rng, probs, n)])
            else:
                n = state.legal_actions(legal)
                state.apply(legal[rng_below(&rng, n)])
            steps += 1
        state.returns(ret)
        total += ret[0]
    return steps, total


cdef inline double _now() noexcept:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


def op_costs(GameState prototype, int states, uint64_t key):
    """Nanoseconds per game operation, timed in C over ``states`` decision
    states sampled from random playouts: legal_mask, legal_actions, encode,
    copy_from + apply, and reshuffle. The traversal benchmark multiplies these
    by the kernel's operation counts to split time into game logic and the
    kernel's own work."""
    cdef list pool = []
    cdef GameState state = prototype.clone(), scratch = prototype.clone()
    cdef Rng rng
    cdef int[MAX_ACTIONS] legal
    cdef uint8_t[MAX_ACTIONS] mask
    cdef int[MAX_CHANCE_OUTCOMES] actions
    cdef double[MAX_CHANCE_OUTCOMES] probs
    cdef int i, n, player
    cdef double start
    rng_init(&rng, key)
    state.reset(&rng)
    while len(pool) < states:
        player = state.current_player()
        if player == TERMINAL_PLAYER:
            state.reset(&rng)
            continue
        if player == CHANCE_PLAYER:
            n = state.chance_outcomes(actions, probs)
            state.apply(actions[rng_choice(&rng, probs, n)])
            continue
        pool.append(state.clone())
        n = state.legal_actions(legal)
        state.apply(legal[rng_below(&rng, n)])
    buf = np.zeros(prototype.encoding_size, dtype=np.float32)
    cdef float[::1] features = buf
    cdef GameState s
    costs = {}
    start = _now()
    for s in pool:
        s.legal_mask(mask)
    costs["legal_mask"] = (_now() - start) / states * 1e9
    start = _now()
    for s in pool:
        s.legal_actions(legal)
    costs["legal_actions"] = (_now() - start) / states * 1e9
    start = _now()
    for s in pool:
        s.encode(s.current_player(), &features[0])
    costs["encode"] = (_now() - start) / states * 1e9
    start = _now()
    for s in pool:
        n = s.legal_actions(legal)
        scratch.copy_from(s)
        scratch.apply(legal[0])
    costs["copy_apply"] = (_now() - start) / states * 1e9 - costs["legal_actions"]
    start = _now()
    for s in pool:
        scratch.copy_from(s)
        scratch.reshuffle(&rng)
    costs["copy_reshuffle"] = (_now() - start) / states * 1e9
    return costs
