# cython: language_level=3
"""C-level random streams shared by every kernel (header-only: all functions inline).

A stream is a SplitMix64 generator: a 64-bit state advanced by a fixed odd
constant and passed through a bijective mixer. Streams are keyed, never
seeded from a global source: ``stream_key(seed, a, b, c, d)`` hashes a run
seed and four words (iteration, player, traversal index, purpose) so each
traversal and each purpose gets its own independent stream.

``lostcities/rng.py`` is the pure-Python twin; tests require identical draws.
"""

from libc.stdint cimport uint64_t

cdef enum:
    # Purposes: the fourth word of a traversal's stream key.
    PURPOSE_DEAL = 1
    PURPOSE_CHANCE = 2
    PURPOSE_OPPONENT = 3
    PURPOSE_TRAVERSER = 4
    PURPOSE_ROLLOUT = 5
    PURPOSE_BRANCH = 6
    # 7..12 are Python-side purposes (lostcities.rng.Purpose): memory, training, ...
    PURPOSE_VALUE = 13  # a value traversal: the key its own streams derive from

cdef struct Rng:
    uint64_t state

cdef inline uint64_t mix64(uint64_t z) noexcept nogil:
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)

cdef inline uint64_t stream_key(uint64_t seed, uint64_t a, uint64_t b,
                                uint64_t c, uint64_t d) noexcept nogil:
    cdef uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ULL)
    h = mix64(h ^ (a + 0x9E3779B97F4A7C15ULL))
    h = mix64(h ^ (b + 0x9E3779B97F4A7C15ULL))
    h = mix64(h ^ (c + 0x9E3779B97F4A7C15ULL))
    h = mix64(h ^ (d + 0x9E3779B97F4A7C15ULL))
    return h

cdef inline void rng_init(Rng* rng, uint64_t key) noexcept nogil:
    rng.state = key

cdef inline uint64_t rng_next(Rng* rng) noexcept nogil:
    rng.state += 0x9E3779B97F4A7C15ULL
    return mix64(rng.state)

cdef inline double rng_uniform(Rng* rng) noexcept nogil:
    """Uniform double in [0, 1) with 53 random bits."""
    return <double>(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0)

cdef inline uint64_t rng_below(Rng* rng, uint64_t n) noexcept nogil:
    """Unbiased integer in [0, n): rejection of the short top range, then modulo."""
    cdef uint64_t threshold = (<uint64_t>0 - n) % n
    cdef uint64_t x = rng_next(rng)
    while x < threshold:
        x = rng_next(rng)
    return x % n

cdef inline int rng_choice(Rng* rng, const double* probs, int n) noexcept nogil:
    """Index drawn from probs[0:n] (need not sum exactly to 1; the last
    positive entry absorbs rounding)."""
    cdef double total = 0.0, u, acc = 0.0
    cdef int i, last = -1
    for i in range(n):
        total += probs[i]
        if probs[i] > 0.0:
            last = i
    u = rng_uniform(rng) * total
    for i in range(n):
        if probs[i] > 0.0:
            acc += probs[i]
            if u < acc:
                return i
    return last
