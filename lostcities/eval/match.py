"""Matches between two Lost Cities players, with confidence intervals: the one match loop.

    >>> a = BotPlayer.shared(make_bot("cautious", 1))      # lostcities/eval/players.py
    >>> b = BotPlayer.shared(make_bot("random", 2))
    >>> result = play_match(a, b, games=200, seed=0).result
    >>> result.win_rate_ci()      # 95% Wilson interval, a draw counts as half a win
    >>> result.mean_diff_ci()     # 95% normal-approximation interval of A's score lead

Game i is dealt from ``arena_deal_seed(seed, i)`` and player A sits in seat ``i % 2``, so
the first-move advantage cancels over an even number of games and a match is reproducible
from its seed (given players whose streams are keyed). A player answers a batch of
decisions (:class:`Player`): a bot one at a time, a trained agent with one batched forward
over every game in flight. :func:`wilson_interval` is also meant for evaluating trained
networks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev
from typing import Protocol

from lostcities.games.lost_cities import LostCitiesGame
from lostcities.games.lost_cities_spec import DEFAULT_MAX_TURNS
from lostcities.rng import Purpose, stream_key


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
    return stream_key(seed, game_index, 0, 0, Purpose.ARENA_DEAL)


@dataclass(frozen=True)
class MatchResult:
    """Final scores of every game of a match, from player A's side.

    ``scores_a[i]``/``scores_b[i]`` are the two players' scores in game i;
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


# --- the match loop ---------------------------------------------------------------------


class Player(Protocol):
    """A match player: ``act`` returns one action per row, for the player to act in
    ``states[r]``, the state of game ``game_indices[r]`` (its index in the match: a player
    may key per-game state and streams by it). ``batched`` False: the loop asks for one
    decision at a time, in line, as soon as it is due (a bot); True: it collects the
    decisions due in every game in flight and asks for them in one call (a trained agent:
    one batched forward)."""

    name: str
    batched: bool

    def act(self, game_indices: Sequence[int], states: Sequence[LostCitiesGame]) -> list[int]: ...


@dataclass(frozen=True)
class PlayStats:
    """How player A played its expeditions over a match."""

    colors_opened: float  # mean expeditions started per game
    cards_per_color: float  # mean cards on an opened expedition
    score_per_color: float  # mean score of an opened expedition


@dataclass(frozen=True)
class PlayedMatch:
    """A match's scores, and how player A played."""

    result: MatchResult
    stats: PlayStats


def play_games(
    player_a: Player, player_b: Player, indices: Sequence[int], seed: int, max_turns: int
) -> list[LostCitiesGame]:
    """Play the match's games ``indices`` (ascending) together to their ends, A in seat
    ``i % 2`` of game i; returns their final states. Each round: in every game in turn,
    players answering in line (``batched`` False) move until a batched player is to act
    or the game ends; then each batched player answers all the decisions it has due, in
    one call, rows in game order. Two players answering in line so play the games one
    after another."""
    states = [LostCitiesGame.from_seed(arena_deal_seed(seed, i), max_turns) for i in indices]
    seats = [(player_a, player_b) if i % 2 == 0 else (player_b, player_a) for i in indices]
    live = list(range(len(indices)))  # positions in indices
    while live:
        for k in live:
            game, players = states[k], seats[k]
            while not game.is_terminal and not players[game.current_player].batched:
                # apply() rejects an illegal action with a ValueError naming it.
                game.apply(players[game.current_player].act([indices[k]], [game])[0])
        live = [k for k in live if not states[k].is_terminal]
        # seats are told apart by position, not identity: one object may play both
        due_a = [k for k in live if states[k].current_player == indices[k] % 2]
        due_b = [k for k in live if states[k].current_player != indices[k] % 2]
        for player, due in ((player_a, due_a), (player_b, due_b)):
            if due and player.batched:
                actions = player.act([indices[k] for k in due], [states[k] for k in due])
                for k, action in zip(due, actions, strict=True):
                    states[k].apply(action)
    return states


def play_match(
    player_a: Player,
    player_b: Player,
    games: int,
    seed: int,
    max_turns: int = DEFAULT_MAX_TURNS,
    batch_size: int = 1,
) -> PlayedMatch:
    """Play ``games`` games, A in seat ``i % 2`` of game i, deals from (seed, i), at most
    ``batch_size`` games in flight (:func:`play_games`; 1: one game after another)."""
    if games <= 0:
        raise ValueError(f"a match needs games > 0, got {games}")
    if batch_size <= 0:
        raise ValueError(f"a match needs batch_size > 0, got {batch_size}")
    finals: list[LostCitiesGame] = []
    for first in range(0, games, batch_size):
        batch = range(first, min(games, first + batch_size))
        finals += play_games(player_a, player_b, batch, seed, max_turns)
    seats_a = [i % 2 for i in range(games)]
    scores = [game.scores() for game in finals]
    result = MatchResult(
        player_a.name,
        player_b.name,
        tuple(s[seat] for s, seat in zip(scores, seats_a, strict=True)),
        tuple(s[1 - seat] for s, seat in zip(scores, seats_a, strict=True)),
        sum(game.capped for game in finals),
    )
    return PlayedMatch(result, play_stats(finals, seats_a))


def play_stats(finals: Sequence[LostCitiesGame], seats: Sequence[int]) -> PlayStats:
    """The expeditions of the player in seat ``seats[g]`` of final state ``finals[g]``."""
    opened = cards = points = 0
    for game, seat in zip(finals, seats, strict=True):
        for color, score in enumerate(game.expedition_scores(seat)):
            played = len(game.expedition(seat, color))
            if played:
                opened += 1
                cards += played
                points += score
    return PlayStats(opened / len(finals), cards / max(opened, 1), points / max(opened, 1))
