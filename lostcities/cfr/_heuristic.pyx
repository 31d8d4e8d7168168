# cython: language_level=3
"""Lost Cities heuristic kernel: the C twin of ``initial.lost_cities_heuristic_reference``.

Private: ``lostcities.cfr.initial.lost_cities_heuristic`` is the documented
wrapper (it validates and normalises the arrays, and owns the rule's
parameters). Per row the kernel finds the reference's argmax by scoring only
the legal actions, each with the reference's float64 expression, and writes
sigma with the reference's operations in its order, so the two agree bit for
bit; the property tests in ``tests/cfr/test_heuristic_kernel.py`` hold them
to it.
"""

import numpy as np

from libc.math cimport INFINITY
from libc.stdint cimport int8_t, uint8_t, uint64_t

from lostcities._rng cimport Rng, rng_choice, rng_init
from lostcities.games._state cimport MAX_ACTIONS, GameState

from lostcities.games import lost_cities_spec as spec

# Layout, read once from the spec so no index is written down twice.
cdef int NUM_COLORS = spec.NUM_COLORS
cdef int RANKS = spec.RANKS_PER_COLOR
cdef int MAX_PILE = spec.MAX_PILE
cdef int PLAY = spec.PLAY
cdef int DISCARD = spec.DISCARD
cdef int DRAW_DECK = spec.DRAW_DECK
cdef int DRAW_PILE = spec.DRAW_PILE
cdef int NUM_ACTIONS = spec.NUM_ACTIONS
cdef int OFF_OWN_HAND = spec.ENCODING_SLICES["own_hand"].start
cdef int OFF_OWN_EXPEDITION = spec.ENCODING_SLICES["own_expedition"].start
cdef int OFF_OPP_EXPEDITION = spec.ENCODING_SLICES["opp_expedition"].start
cdef int OFF_DISCARDS = spec.ENCODING_SLICES["discards"].start
# the rule reads nothing past these slices, so a row must be at least this wide
cdef int MIN_WIDTH = max(
    spec.ENCODING_SLICES[name].stop
    for name in ("own_hand", "own_expedition", "opp_expedition", "discards")
)


cdef struct Best:
    double score  # highest score of a legal action so far, -inf before any
    int action    # its index; 0 while no legal action scored above -inf


cdef inline void _consider(Best* best, int action, double score) noexcept nogil:
    # numpy's argmax is the first maximum, so a tie goes to the lower action index
    # (actions are visited color by color, not in index order)
    if score > best.score or (score == best.score and action < best.action):
        best.score = score
        best.action = action


cdef int _best_action(const float* row, const uint8_t* mask, const double* rank_values,
                      double open_points) noexcept nogil:
    """The reference's ``argmax`` over the masked scores of one information state.

    Only legal actions are scored: an illegal one scores -inf there, which can
    only win when every legal score is -inf too, and then numpy's argmax is
    action 0, ``Best``'s start. Each score depends on its own color only, so the
    colors are visited one at a time.

    The reference sums counts; on count-valued features (every encoding) its
    ``sum > 0`` is ``any > 0`` (a float32 sum of non-negative values is 0 only
    when all are), and its float64 sum of playable points is a sum of small
    integers, exact in any order; so the results agree bit for bit.
    """
    cdef Best best
    cdef int c, r, action, top, lowest, top_rank
    cdef bint opened, helps_them, rich, dead, pile_filled
    cdef float peak
    cdef double points, score
    cdef const float* hand
    cdef const float* mine
    cdef const float* theirs
    cdef const float* pile_top
    best.score = -INFINITY
    best.action = 0
    for c in range(NUM_COLORS):
        hand = row + OFF_OWN_HAND + c * RANKS  # (RANKS,) counts
        mine = row + OFF_OWN_EXPEDITION + c * RANKS
        theirs = row + OFF_OPP_EXPEDITION + c * RANKS

        # highest number rank on my expedition (0 when none); opened / helps_them:
        # any card of c on my / the opponent's expedition (bitwise ors: no branches)
        top = 0
        opened = False
        helps_them = False
        for r in range(RANKS):
            opened = opened | (mine[r] > 0)
            helps_them = helps_them | (theirs[r] > 0)
            top = r if r > 0 and mine[r] > 0 else top

        # number points I could still play (ranks above top), and the lowest such
        # card; numpy's argmax over an all-False row gives rank 1, hence the default
        points = 0.0
        lowest = 0
        for r in range(RANKS - 1, top, -1):  # downwards, so the last card seen is the lowest
            points = points + <double>hand[r] * rank_values[r]
            lowest = r if hand[r] > 0 else lowest
        if lowest == 0:
            lowest = 1
        rich = points >= open_points

        for r in range(RANKS):
            # plays: extend an open color (fewer skipped ranks score higher), or open a
            # rich color with a wager or its lowest playable card
            action = PLAY + c * RANKS + r
            if mask[action]:
                if opened:
                    score = 3.0 - 0.5 * <double>(r - top - 1) if r > 0 else -INFINITY
                elif rich and (r == 0 or r == lowest):
                    score = 2.0
                else:
                    score = -INFINITY
                _consider(&best, action, score)
            # discards, in the reference's order: 0.5 + dead - value - 0.5 * helps_them - 1.0
            action = DISCARD + c * RANKS + r
            if mask[action]:
                dead = r <= top and opened
                score = (
                    ((0.5 + <double>dead) - rank_values[r] / 10.0) - 0.5 * <double>helps_them
                ) - 1.0
                _consider(&best, action, score)

        # draws: c's pile only when its top card extends my open color with no gap;
        # top_rank is numpy's argmax (first maximum) of the one-hot slot 0, -1 if empty
        action = DRAW_PILE + c
        if mask[action]:
            pile_top = row + OFF_DISCARDS + c * MAX_PILE * RANKS  # (RANKS,)
            pile_filled = False
            for r in range(RANKS):
                pile_filled = pile_filled | (pile_top[r] > 0)
            top_rank = -1
            if pile_filled:
                top_rank = 0
                peak = pile_top[0]
                for r in range(1, RANKS):
                    if pile_top[r] > peak:
                        peak = pile_top[r]
                        top_rank = r
            _consider(&best, action, 1.0 if opened and top_rank == top + 1 else -INFINITY)
    if mask[DRAW_DECK]:
        _consider(&best, DRAW_DECK, 0.0)
    return best.action


cdef void _sigma(const uint8_t* mask, int best, double explore, double* out) noexcept nogil:
    """Sigma (NUM_ACTIONS,) into ``out``: ``explore`` spread uniformly over the legal
    actions, computed as the reference does (legal / legal.sum(), then times explore),
    plus ``1 - explore`` on ``best``."""
    cdef int a, legal_count = 0, widest = 0
    for a in range(NUM_ACTIONS):
        legal_count = legal_count + mask[a]  # an int: exact, like numpy's float64 sum
        widest = mask[a] if mask[a] > widest else widest
    # 0/1 masks take one of two shares, each computed once (0 / 0 is numpy's NaN when
    # nothing is legal); other counts are divided out action by action
    cdef double illegal_share = explore * (0.0 / legal_count)
    cdef double legal_share = explore * (1.0 / legal_count)
    if widest <= 1:
        for a in range(NUM_ACTIONS):
            out[a] = legal_share if mask[a] else illegal_share
    else:
        for a in range(NUM_ACTIONS):
            out[a] = explore * (<double>mask[a] / legal_count)
    out[best] = out[best] + (1.0 - explore)


def lost_cities_heuristic_into(
    const float[:, ::1] features,
    const uint8_t[:, ::1] masks,
    double[:, ::1] out,
    const double[::1] rank_values,
    double explore,
    double open_points,
):
    """Write sigma (n, NUM_ACTIONS) float64 into ``out`` for features (n, d) float32
    and masks (n, NUM_ACTIONS) uint8. ``rank_values`` (RANKS_PER_COLOR,) is the face
    value per rank, ``explore`` the uniform share, ``open_points`` the opening threshold."""
    cdef Py_ssize_t n = features.shape[0], i
    cdef int best
    if masks.shape[0] != n or out.shape[0] != n:
        raise ValueError(
            f"row counts differ: features {n}, masks {masks.shape[0]}, out {out.shape[0]}"
        )
    if masks.shape[1] != NUM_ACTIONS or out.shape[1] != NUM_ACTIONS:
        raise ValueError(
            f"masks and out need {NUM_ACTIONS} columns, got {masks.shape[1]} and {out.shape[1]}"
        )
    if features.shape[1] < MIN_WIDTH:
        raise ValueError(f"features need at least {MIN_WIDTH} columns, got {features.shape[1]}")
    if rank_values.shape[0] != RANKS:
        raise ValueError(f"rank_values needs {RANKS} entries, got {rank_values.shape[0]}")
    if n == 0:
        return
    with nogil:
        for i in range(n):
            best = _best_action(&features[i, 0], &masks[i, 0], &rank_values[0], open_points)
            _sigma(&masks[i, 0], best, explore, &out[i, 0])


def heuristic_playouts(
    list states,
    const int8_t[::1] viewers,
    const uint64_t[::1] keys,
    double[::1] out,
    const double[::1] rank_values,
    double explore,
    double open_points,
):
    """Play each Lost Cities state of ``states`` (GameState kernels, changed in place) to
    its end with both seats on the heuristic, and write ``viewers[i]``'s return into
    ``out[i]``. Each decision encodes the acting player's view, takes the rule's best
    action, and with ``explore`` > 0 draws from sigma (``_sigma``) with the stream
    ``keys[i]`` instead; ``explore`` = 0 plays the best action. The pure-Python twin is
    ``lostcities.eval.search.heuristic_playouts_reference``."""
    cdef Py_ssize_t n = len(states), i
    cdef GameState state
    cdef int player, best, action
    cdef Rng rng
    cdef double[2] returns
    cdef double[MAX_ACTIONS] sigma
    cdef uint8_t[MAX_ACTIONS] mask
    cdef float[::1] row
    if viewers.shape[0] != n or keys.shape[0] != n or out.shape[0] != n:
        raise ValueError(
            f"states ({n}), viewers ({viewers.shape[0]}), keys ({keys.shape[0]}) and out "
            f"({out.shape[0]}) must have the same length"
        )
    if rank_values.shape[0] != RANKS:
        raise ValueError(f"rank_values needs {RANKS} entries, got {rank_values.shape[0]}")
    for i in range(n):
        state = <GameState?>states[i]
        if state.num_actions != NUM_ACTIONS or state.encoding_size < MIN_WIDTH:
            raise ValueError(f"states[{i}] is not a Lost Cities state")
        if i == 0:
            row = np.empty(state.encoding_size, dtype=np.float32)
        elif row.shape[0] != state.encoding_size:
            raise ValueError(f"states[{i}] has another encoding size than states[0]")
        rng_init(&rng, keys[i])
        player = state.current_player()
        while player >= 0:
            state.encode(player, &row[0])
            state.legal_mask(mask)
            best = _best_action(&row[0], mask, &rank_values[0], open_points)
            if explore > 0.0:
                _sigma(mask, best, explore, sigma)
                action = rng_choice(&rng, sigma, NUM_ACTIONS)
            else:
                action = best
            state.apply(action)
            player = state.current_player()
        state.returns(returns)
        out[i] = returns[viewers[i]]
