"""Matches between two Lost Cities bots, with confidence intervals.

    >>> result = play_match(make_bot("cautious", 1), make_bot("random", 2), games=200, seed=0)
    >>> result.win_rate_ci()      # 95% Wilson interval, a draw counts as half a win
    >>> result.mean_diff_ci()     # 95% normal-approximation interval of A's score lead

Game i is dealt from ``arena_deal_seed(seed, i)`` and bot A sits in seat
``i % 2``, so the first-move advantage cancels over an even number of games
and a match is reproducible from its seed (given deterministic bots).
:func:`wilson_interval` is also meant for evaluating trained networks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev

from lostcities.eval.opponents import Bot
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.games.lost_cities_spec import DEFAULT_MAX_TURNS
from lostcities.rng import stream_key

# Fourth word of arena deal keys: keeps evaluation deals apart from training
# deals of the same seed (those use the small traversal Purpose values).
ARENA_STREAM = 0xA4E7A


def _z(confidence: float) -> float:
    """Two-sided standard-normal quantile, e.g. 1.959963984540054 for 0.95."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion successes / n.

    ``successes`` may be fractional (a draw counted as half a win); the
    formula is used as is. Unlike the normal approximation it stays inside
    [0, 1] and is sensible at 0 or n successes.
    """
    if n <= 0:
        raise ValueError(f"a Wilson interval needs n > 0 trials, got {n}")
    if not 0.0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes!r}")
    z = _z(confidence)
    p = successes / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    # Clamp: at p = 0 or 1 the bound equals the edge up to rounding.
    return (max(0.0, center - half), min(1.0, center + half))


def normal_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """mean +- z * s / sqrt(n), s the sample standard deviation; (-inf, inf) if n < 2."""
    if not values:
        raise ValueError("a mean interval needs at least one value")
    mean = fmean(values)
    if len(values) < 2:
        return (-math.inf, math.inf)
    half = _z(confidence) * stdev(values) / math.sqrt(len(values))
    return (mean - half, mean + half)


def arena_deal_seed(seed: int, game_index: int) -> int:
    """Seed of game ``game_index``'s deal in a match seeded by ``seed``."""
    return stream_key(seed, game_index, 0, 0, ARENA_STREAM)


@dataclass(frozen=True)
class MatchResult:
    """Final scores of every game of a match, from bot A's side.

    ``scores_a[i]``/``scores_b[i]`` are the two bots' scores in game i;
    ``capped`` counts games that ended by the turn cap instead of an empty deck.
    """

    name_a: str
    name_b: str
    scores_a: tuple[int, ...]
    scores_b: tuple[int, ...]
    capped: int

    @property
    def games(self) -> int:
        return len(self.scores_a)

    @property
    def diffs(self) -> list[int]:
        """Per-game score difference, A minus B."""
        return [a - b for a, b in zip(self.scores_a, self.scores_b, strict=True)]

    @property
    def wins(self) -> int:
        return sum(d > 0 for d in self.diffs)

    @property
    def draws(self) -> int:
        return sum(d == 0 for d in self.diffs)

    @property
    def losses(self) -> int:
        return sum(d < 0 for d in self.diffs)

    def win_rate(self) -> float:
        """A's share of the points, a draw counting as half a win."""
        return (self.wins + 0.5 * self.draws) / self.games

    def win_rate_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson interval of :meth:`win_rate` (draws as half wins)."""
        return wilson_interval(self.wins + 0.5 * self.draws, self.games, confidence)

    def mean_diff(self) -> float:
        return fmean(self.diffs)

    def mean_diff_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Normal-approximation interval of the mean score difference."""
        return normal_interval([float(d) for d in self.diffs], confidence)


@dataclass(frozen=True)
class PairedGain:
    """Agent A minus agent B, both having played the same games (same deals, seats and bot
    seeds): per-game differences of the win indicator (win 1, draw 1/2, loss 0) and of the
    score difference, with 95% normal intervals of their means."""

    games: int
    win_rate: float
    win_rate_ci: tuple[float, float]
    score_diff: float
    score_diff_ci: tuple[float, float]


def paired_gain(a: MatchResult, b: MatchResult, confidence: float = 0.95) -> PairedGain:
    """How much better A did than B on the same games (see :class:`PairedGain`)."""
    return pooled_paired_gain([(a, b)], confidence)


def pooled_paired_gain(
    pairs: Sequence[tuple[MatchResult, MatchResult]], confidence: float = 0.95
) -> PairedGain:
    """:func:`paired_gain` over several pairs of matches played on the same games (e.g. one
    pair per training seed, all with the same match seed).

    The games are the sampled unit, not the pairs of games: every pair shares game i's
    deal and seat (and, in ``lostcities.cli.evaluate``, sigma_1's very result), so the
    differences of game i are averaged over the pairs first and the interval is over the
    games. Treating the len(pairs) x games differences as independent would make the
    interval up to sqrt(len(pairs)) too narrow. ``games`` is the number of games."""
    if not pairs:
        raise ValueError("a pooled gain needs at least one pair of matches")
    games = pairs[0][0].games
    win = [0.0] * games
    score = [0.0] * games
    for a, b in pairs:
        if not a.games == b.games == games:
            raise ValueError(
                f"paired results need the same games, got {a.games} and {b.games}"
                + (f" (the first pair has {games})" if len(pairs) > 1 else "")
            )
        for i, (x, y) in enumerate(zip(a.diffs, b.diffs, strict=True)):
            win[i] += (_points(x) - _points(y)) / len(pairs)
            score[i] += (x - y) / len(pairs)
    return PairedGain(
        games,
        fmean(win),
        normal_interval(win, confidence),
        fmean(score),
        normal_interval(score, confidence),
    )


def _points(diff: int) -> float:
    return 1.0 if diff > 0 else 0.5 if diff == 0 else 0.0


def play_game(bots: tuple[Bot, Bot], deal_seed: int, max_turns: int) -> LostCitiesGame:
    """Play one game to the end; ``bots[p]`` sits in seat p. Returns the final state."""
    game = LostCitiesGame.from_seed(deal_seed, max_turns)
    while not game.is_terminal:
        # apply() rejects an illegal action with a ValueError naming it.
        game.apply(bots[game.current_player].act(game))
    return game


def play_match(
    bot_a: Bot, bot_b: Bot, games: int, seed: int, max_turns: int = DEFAULT_MAX_TURNS
) -> MatchResult:
    """Play ``games`` games, bot A in seat ``i % 2`` of game i, deals from (seed, i)."""
    if games <= 0:
        raise ValueError(f"a match needs games > 0, got {games}")
    scores_a: list[int] = []
    scores_b: list[int] = []
    capped = 0
    for i in range(games):
        seat_a = i % 2
        bots = (bot_a, bot_b) if seat_a == 0 else (bot_b, bot_a)
        game = play_game(bots, arena_deal_seed(seed, i), max_turns)
        scores = game.scores()
        scores_a.append(scores[seat_a])
        scores_b.append(scores[1 - seat_a])
        capped += game.capped
    return MatchResult(bot_a.name, bot_b.name, tuple(scores_a), tuple(scores_b), capped)
