"""Keyed random streams, pure-Python twin of ``lostcities/_rng.pxd``.

Every random number in the project comes from a :class:`Stream` keyed by
``stream_key(seed, a, b, c, d)``, e.g. ``(run seed, iteration, player,
traversal index, purpose)``. Nothing reads a global RNG, so a traversal's
draws do not depend on which worker ran it or in which order.

The generator is SplitMix64: tiny state, fast, and simple to reproduce bit
for bit in Python (tests compare the two implementations draw by draw).

The words that name a stream live here, one enum per place in a key: ``Purpose``
(the fourth word under a run or match seed), ``NetworkOwner`` (the player word of a
network's streams), ``EvaluationRole`` (the seat word of an evaluation match's players)
and ``ValueStream`` (the first word under a value traversal's key). Two uses share
draws only when every word of their keys agrees, so the words of one place must
differ (tests/test_rng.py checks each place against the words it shares).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum, unique

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
TORCH_SEED_MASK = (1 << 63) - 1


@unique
class Purpose(IntEnum):
    """Fourth word of a stream key under a run or match seed: which stream it is.

    Training and evaluation may share one seed, so every stream drawn under a seed has
    its own word here, whatever its first three (iteration, player, traversal index;
    game, seat). Never 0: a key derived with fewer words (``stream_key(seed, slot)``, a
    sub-seed) ends in 0. The kernels mirror DEAL..BRANCH and VALUE as ``PURPOSE_*`` in
    ``lostcities/_rng.pxd``."""

    DEAL = 1  # a traversal's deal; a game's deal from its seed (LostCitiesGame.from_seed)
    CHANCE = 2  # a traversal's chance outcomes after the deal
    OPPONENT = 3  # a traversal's opponent actions, drawn from sigma
    TRAVERSER = 4  # a traversal's own trajectory actions, from its sampling policy
    ROLLOUT = 5  # a traversal's playouts (the key their per-branch streams derive from)
    BRANCH = 6  # which traverser nodes of a trajectory branch on every action
    MEMORY = 7  # a player's reservoir insertions of one iteration
    TRAINING = 8  # a network fit's minibatches (and symmetry relabels)
    NETWORK_INIT = 9  # a network's initial weights
    EVALUATION = 10  # an evaluation match's per-game player keys (seat: EvaluationRole)
    SEARCH = 11  # play-time search: redeals and playouts per game and decision; its seed
    SEARCH_KEEP = 12  # play-time search: the draw of the move it keeps
    VALUE = 13  # a value traversal: the key its own streams derive from (ValueStream)
    VALUE_MEMORY = 14  # the value memory's reservoir insertions of one iteration
    VALUE_TRAINING = 15  # the value network fit's minibatches
    # Streams outside training: large words, apart from the traversal ones above.
    ARENA_DEAL = 0xA4E7A  # a match's game deals (eval.match.arena_deal_seed)
    BOT = 0xB07  # a baseline bot's own draws (eval.opponents.make_bot)
    ARENA_AGENT = 0xA6E  # an agent file's choices per game and slot (cli.arena)
    PLAY_AGENT = 0x91A7  # the agent's choices in a game against a person (cli.play)
    SDCFR_ITERATION = 0x5DCF  # single Deep CFR's per-game draw of an iteration (eval.agents)
    BR_MODEL = 0xB12  # the best response's copy of the agent: its seed (eval.evaluators)
    TEACHER_DEAL = 0x7EAC  # a teacher game's deal (teacher.games)
    TEACHER_SEARCH = 0x7EAD  # a teacher round's search seed (teacher.stage)
    TEACHER_MATCH = 0x7EAE  # a teacher round's matches: deals and choice streams (teacher.stage)
    STUDENT = 0x57D  # a student network's initial weights and fit (teacher.student)


@unique
class NetworkOwner(IntEnum):
    """Player word of the streams of a network that is no player's own (``Purpose``
    NETWORK_INIT, TRAINING): players 0 and 1 key their own advantage networks'."""

    POLICY = 2  # the average-strategy (policy) network: initial weights and fits
    VALUE = 3  # the learned value function's network: initial weights


@unique
class EvaluationRole(IntEnum):
    """Seat word of an evaluation match's per-game player keys,
    ``stream_key(seed, game, role, 0, Purpose.EVALUATION)``: the matches of one
    evaluation share its seed, so each role draws apart from the others."""

    BOT = 1  # the bot the agent plays (eval.evaluators)
    AGENT = 2  # the agent against a bot
    BEST_RESPONSE = 5  # the search best response (eval.br)
    PROGRESS_AGENT = 6  # the agent against the best response and in head to head
    EARLIER_AGENT = 7  # the earlier iteration's agent in head to head


@unique
class ValueStream(IntEnum):
    """First word of a value traversal's own stream keys, ``stream_key(key, word)`` with
    ``key`` its ``Purpose.VALUE`` key. Its deal, chance, opponent, traverser, rollout and
    branch streams reuse those purposes' words; these are its own. The kernel
    (``lostcities/cfr/_traverse.pyx``) holds copies as ``VALUE_EXPLORE``/``VALUE_RECORD``."""

    EXPLORE = 7  # the random action at each of its branching nodes
    RECORD = 8  # which later playout states are recorded


def torch_seed(key: int) -> int:
    """A stream key as a seed of a torch generator: its low 63 bits, a non-negative
    int64, which every torch seeding call accepts."""
    return key & TORCH_SEED_MASK


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
