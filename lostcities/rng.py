"""Keyed random streams, pure-Python twin of ``lostcities/_rng.pxd``.

Every random number in the project comes from a :class:`Stream` keyed by
``stream_key(seed, a, b, c, d)``, e.g. ``(run seed, iteration, player,
traversal index, purpose)``. Nothing reads a global RNG, so a traversal's
draws do not depend on which worker ran it or in which order.

The generator is SplitMix64: tiny state, fast, and simple to reproduce bit
for bit in Python (tests compare the two implementations draw by draw).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


class Purpose(IntEnum):
    """Fourth word of a traversal's stream key: one stream per use."""

    DEAL = 1
    CHANCE = 2
    OPPONENT = 3
    TRAVERSER = 4
    ROLLOUT = 5
    BRANCH = 6
    MEMORY = 7
    TRAINING = 8
    NETWORK_INIT = 9
    EVALUATION = 10
    SEARCH = 11
    SEARCH_KEEP = 12
    VALUE = 13  # value traversals (the kernel derives their streams from this key)
    VALUE_MEMORY = 14
    VALUE_TRAINING = 15


def mix64(z: int) -> int:
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def stream_key(seed: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
    """Hash a seed and four words into a 64-bit stream key."""
    h = mix64(seed + GOLDEN)
    for word in (a, b, c, d):
        h = mix64(h ^ ((word + GOLDEN) & MASK64))
    return h


class Stream:
    """A SplitMix64 stream; same draws as the C ``Rng`` for the same key."""

    __slots__ = ("state",)

    def __init__(self, key: int) -> None:
        self.state = key & MASK64

    def next64(self) -> int:
        self.state = (self.state + GOLDEN) & MASK64
        return mix64(self.state)

    def uniform(self) -> float:
        """Uniform float in [0, 1) with 53 random bits."""
        return (self.next64() >> 11) * (1.0 / 9007199254740992.0)

    def below(self, n: int) -> int:
        """Unbiased integer in [0, n)."""
        if n <= 0:
            raise ValueError(f"below() needs n > 0, got {n}")
        threshold = ((1 << 64) - n) % n
        x = self.next64()
        while x < threshold:
            x = self.next64()
        return x % n

    def choice(self, probs: Sequence[float]) -> int:
        """Index drawn from probs (same rule as the C ``rng_choice``)."""
        total = 0.0
        last = -1
        for i, p in enumerate(probs):
            total += p
            if p > 0.0:
                last = i
        u = self.uniform() * total
        acc = 0.0
        for i, p in enumerate(probs):
            if p > 0.0:
                acc += p
                if u < acc:
                    return i
        return last

    def shuffle(self, items: list) -> None:
        """In-place Fisher-Yates from the back, as the C kernels do it."""
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]
