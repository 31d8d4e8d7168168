# cython: language_level=3
"""The C-level state interface every game kernel implements.

A traversal kernel written once against ``GameState`` steps Kuhn, Leduc and
Lost Cities through C vtable calls, with no Python call per node. Concrete
games subclass it in their own ``_<game>.pyx`` and keep their state in a C
struct so ``copy_from`` is a plain struct copy (cheap clones for rollouts).

Conventions
- ``current_player()`` is 0 or 1, ``CHANCE_PLAYER`` at an explicit chance
  node (Kuhn, Leduc deals) or ``TERMINAL_PLAYER`` when the game is over.
  Lost Cities has no explicit chance nodes: the deck order is fixed by the
  deal, and ``reshuffle`` redraws the order of the unseen draw pile.
- ``legal_mask`` writes ``num_actions`` bytes (1 = legal) and returns the
  count; ``legal_actions`` writes the legal action ids ascending (at most
  ``num_actions``) and returns the count (the base class derives it from the
  mask; games override it when they can do better); ``chance_outcomes`` writes at most ``MAX_CHANCE_OUTCOMES`` pairs.
- ``encode(player, out)`` writes exactly ``encoding_size`` float32 values of
  what ``player`` knows, and nothing else.
- ``returns(out)`` writes 2 doubles, zero-sum, valid at terminal states.
- ``compact(player, out)`` writes exactly ``compact_size`` bytes: what ``player``
  knows, as few bytes as the game allows (Lost Cities: where each card is as
  that player sees it). Equal information states give equal bytes.
- ``expand(compact, out)`` writes the ``encoding_size`` features of a compact
  information state: bit for bit ``encode(player, ...)`` of any state it was
  taken from. It rebuilds that view in ``self``, which serves as scratch: the
  state's own content is lost.
"""

from libc.stdint cimport uint8_t

from lostcities._rng cimport Rng

cdef enum:
    CHANCE_PLAYER = -1
    TERMINAL_PLAYER = -2
    MAX_CHANCE_OUTCOMES = 64
    MAX_ACTIONS = 512  # bound of on-stack action lists and masks; num_actions must not exceed it


cdef class GameState:
    cdef readonly int num_actions
    cdef readonly int encoding_size
    cdef readonly int compact_size

    cdef void reset(self, Rng* rng) noexcept
    cdef int current_player(self) noexcept
    cdef int legal_mask(self, uint8_t* mask) noexcept
    cdef int legal_actions(self, int* out) noexcept
    cdef int chance_outcomes(self, int* actions, double* probs) noexcept
    cdef void apply(self, int action) noexcept
    cdef void returns(self, double* out) noexcept
    cdef void encode(self, int player, float* out) noexcept
    cdef void compact(self, int player, uint8_t* out) noexcept
    cdef void expand(self, const uint8_t* compact, float* out) noexcept
    cdef void reshuffle(self, Rng* rng) noexcept
    cdef GameState clone(self)
    cdef void copy_from(self, GameState other) noexcept
