"""Arena: seat alternation, result bookkeeping, intervals."""

from __future__ import annotations

import math

import pytest

from lostcities.eval.arena import (
    MatchResult,
    arena_deal_seed,
    normal_interval,
    play_game,
    play_match,
    wilson_interval,
)
from lostcities.eval.opponents import make_bot

# Reference values computed by hand with 40-digit decimals and
# z = 1.959963984540054 (the 97.5% normal quantile): 0 of n gives
# [0, z^2 / (n + z^2)], n of n gives [n / (n + z^2), 1].
WILSON_0_OF_10 = (0.0, 0.2775327998628892)
WILSON_10_OF_10 = (0.7224672001371108, 1.0)
WILSON_50_OF_100 = (0.4038315303659956, 0.5961684696340044)


@pytest.mark.parametrize(
    ("successes", "n", "expected"),
    [(0, 10, WILSON_0_OF_10), (10, 10, WILSON_10_OF_10), (50, 100, WILSON_50_OF_100)],
)
def test_wilson_known_answers(successes: int, n: int, expected: tuple[float, float]) -> None:
    lo, hi = wilson_interval(successes, n)
    assert lo == pytest.approx(expected[0], abs=1e-9)
    assert hi == pytest.approx(expected[1], abs=1e-9)


def test_wilson_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        wilson_interval(0, 0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
    with pytest.raises(ValueError):
        wilson_interval(5, 10, confidence=1.0)


def test_normal_interval() -> None:
    lo, hi = normal_interval([1.0, 2.0, 3.0, 4.0])
    half = 1.959963984540054 * math.sqrt(5 / 3) / 2  # sample sd sqrt(5/3), sqrt(n) = 2
    assert (lo, hi) == pytest.approx((2.5 - half, 2.5 + half), abs=1e-12)
    assert normal_interval([3.0]) == (-math.inf, math.inf)


def test_result_counts_draws_as_half_wins() -> None:
    result = MatchResult("a", "b", scores_a=(10, 0, 5, -3), scores_b=(0, 0, 9, -3), capped=0)
    assert result.diffs == [10, 0, -4, 0]
    assert (result.wins, result.draws, result.losses) == (1, 2, 1)
    assert result.win_rate() == 0.5
    assert result.win_rate_ci() == wilson_interval(2.0, 4)
    assert result.mean_diff() == 1.5


def test_match_alternates_seats_and_deals_from_seed() -> None:
    games, seed = 6, 8
    result = play_match(make_bot("cautious", 1), make_bot("eager", 2), games, seed)
    assert result.games == games
    # Replay each game with fresh, identically seeded bots in the same order.
    a, b = make_bot("cautious", 1), make_bot("eager", 2)
    for i in range(games):
        bots = (a, b) if i % 2 == 0 else (b, a)
        scores = play_game(bots, arena_deal_seed(seed, i), 1000).scores()
        assert result.scores_a[i] == scores[i % 2]
        assert result.scores_b[i] == scores[1 - i % 2]


def test_match_is_reproducible() -> None:
    def run() -> MatchResult:
        return play_match(make_bot("random", 1), make_bot("committer", 2), games=10, seed=4)

    assert run() == run()


def test_turn_cap_is_counted() -> None:
    result = play_match(make_bot("random", 1), make_bot("random", 2), games=4, seed=0, max_turns=5)
    assert result.capped == 4
