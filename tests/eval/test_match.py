"""The match loop (seat alternation, in-line and batched players, play statistics), result
bookkeeping, intervals and paired gains."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lostcities.cfr.initial import lost_cities_heuristic
from lostcities.eval.agents import StrategyAgent
from lostcities.eval.match import (
    MatchResult,
    arena_deal_seed,
    normal_interval,
    paired_gain,
    play_games,
    play_match,
    pooled_paired_gain,
    wilson_interval,
)
from lostcities.eval.opponents import make_bot
from lostcities.eval.players import AgentPlayer, BotPlayer
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.games.lost_cities_spec import NUM_COLORS

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


def bots(a: str, b: str) -> tuple[BotPlayer, BotPlayer]:
    """Bots a (seed 1) and b (seed 2), one bot each for the whole match."""
    return BotPlayer.shared(make_bot(a, 1)), BotPlayer.shared(make_bot(b, 2))


def sigma1_player(seed: int = 0) -> AgentPlayer:
    """sigma_1 as a batched player, sampled, game i's choices keyed (seed, i)."""
    return AgentPlayer(
        StrategyAgent("sigma1", lost_cities_heuristic), "sampled", lambda i: seed + i
    )


def replay(player_a, player_b, seed: int, i: int) -> LostCitiesGame:
    """Game i of a match, A in seat i % 2, played decision by decision with no batching at
    all: the reference for the loop."""
    seats = (player_a, player_b) if i % 2 == 0 else (player_b, player_a)
    game = LostCitiesGame.from_seed(arena_deal_seed(seed, i), 1000)
    while not game.is_terminal:
        game.apply(seats[game.current_player].act([i], [game])[0])
    return game


def scores_of(result: MatchResult, i: int) -> tuple[int, int]:
    """Game i's scores by seat."""
    a, b = result.scores_a[i], result.scores_b[i]
    return (a, b) if i % 2 == 0 else (b, a)


def test_match_alternates_seats_and_deals_from_seed() -> None:
    games, seed = 6, 8
    result = play_match(*bots("cautious", "eager"), games, seed).result
    assert result.games == games and (result.name_a, result.name_b) == ("cautious", "eager")
    # Replay each game with fresh, identically seeded bots in the same order.
    a, b = make_bot("cautious", 1), make_bot("eager", 2)
    for i in range(games):
        seats = (a, b) if i % 2 == 0 else (b, a)
        game = LostCitiesGame.from_seed(arena_deal_seed(seed, i), 1000)
        while not game.is_terminal:
            game.apply(seats[game.current_player].act(game))
        assert result.scores_a[i] == game.scores()[i % 2]
        assert result.scores_b[i] == game.scores()[1 - i % 2]


def test_one_game_at_a_time_is_a_plain_game_loop() -> None:
    """batch_size 1: every call is one decision of one game, games in order, so a bot with
    one stream for the match sees the same positions as in a plain loop."""
    games, seed = 4, 3
    result = play_match(sigma1_player(), BotPlayer.shared(make_bot("committer", 5)), games, seed)
    agent, bot = sigma1_player(), BotPlayer.shared(make_bot("committer", 5))
    for i in range(games):
        assert scores_of(result.result, i) == tuple(replay(agent, bot, seed, i).scores())


class Recording(AgentPlayer):
    """sigma_1 (sampled, game i's choices keyed i), recording the games of every call."""

    def __init__(self) -> None:
        super().__init__(StrategyAgent("sigma1", lost_cities_heuristic), "sampled", lambda i: i)
        self.calls: list[list[int]] = []

    def act(self, games, states):
        self.calls.append(list(games))
        return super().act(games, states)


def test_a_batched_player_answers_every_game_in_flight_in_one_call() -> None:
    """Against a bot (in line), the first call of a batch holds all its games and each next
    call every game not yet over, in game order; a game is in as many calls as the agent
    has decisions in it."""
    agent, seed = Recording(), 2
    play_match(agent, BotPlayer.per_game("cautious", lambda i: i), 10, seed, batch_size=4)
    for batch in (range(0, 4), range(4, 8), range(8, 10)):
        calls = [call for call in agent.calls if call[0] in batch]
        assert all(set(call) <= set(batch) for call in calls)
        assert calls[0] == list(batch)
        for before, after in zip(calls, calls[1:], strict=False):
            assert after == [g for g in before if g in after]  # games only leave, in order
        for i in batch:
            reference = Recording()
            replay(reference, BotPlayer.per_game("cautious", lambda i: i), seed, i)
            assert sum(i in call for call in calls) == len(reference.calls)


def test_batching_does_not_change_a_match() -> None:
    """Per-game bots and choice streams: a game's moves do not depend on its batch."""

    def run(batch_size: int) -> MatchResult:
        bot = BotPlayer.per_game("random", lambda i: 100 + i)
        return play_match(sigma1_player(7), bot, 9, 4, batch_size=batch_size).result

    assert run(1) == run(4) == run(9)


def test_one_player_may_take_both_seats() -> None:
    """Seats are told apart by position: the same object in both seats of batched games
    plays each game as a plain loop would."""
    player, seed = sigma1_player(), 6
    result = play_match(player, player, 4, seed, batch_size=4).result
    for i in range(4):
        reference = sigma1_player()
        assert scores_of(result, i) == tuple(replay(reference, reference, seed, i).scores())


def test_play_stats_describe_player_a_s_expeditions() -> None:
    a, b = bots("committer", "discard_only")
    played = play_match(a, b, 6, 9)
    a, b = bots("committer", "discard_only")
    finals = play_games(a, b, range(6), 9, 1000)
    colors = range(NUM_COLORS)
    opened = [[c for c in colors if g.expedition(i % 2, c)] for i, g in enumerate(finals)]
    cards = [len(g.expedition(i % 2, c)) for i, g in enumerate(finals) for c in opened[i]]
    points = [g.expedition_scores(i % 2)[c] for i, g in enumerate(finals) for c in opened[i]]
    assert played.stats.colors_opened == sum(map(len, opened)) / 6 > 0
    assert played.stats.cards_per_color == np.mean(cards)
    assert played.stats.score_per_color == pytest.approx(np.mean(points), abs=1e-12)
    # discard_only never opens an expedition
    b_side = play_match(b, a, 2, 9).stats
    assert (b_side.colors_opened, b_side.cards_per_color, b_side.score_per_color) == (0, 0, 0)


def test_match_is_reproducible() -> None:
    def run() -> MatchResult:
        return play_match(*bots("random", "committer"), games=10, seed=4).result

    assert run() == run()


def test_turn_cap_is_counted() -> None:
    result = play_match(*bots("random", "random"), games=4, seed=0, max_turns=5).result
    assert result.capped == 4


@pytest.mark.parametrize(("games", "batch_size"), [(0, 1), (4, 0)])
def test_match_rejects_an_empty_match_or_batch(games: int, batch_size: int) -> None:
    with pytest.raises(ValueError, match="a match needs"):
        play_match(*bots("random", "random"), games, seed=0, batch_size=batch_size)


def result(diffs: list[int]) -> MatchResult:
    return MatchResult("a", "b", tuple(diffs), tuple(0 for _ in diffs), 0)


def test_paired_gain_counts_wins_draws_and_scores_game_by_game():
    agent, base = result([10, 0, -5, 3]), result([5, -2, -5, -1])
    gain = paired_gain(agent, base)
    # win points: agent 1, .5, 0, 1 ; base 1, 0, 0, 0 -> differences 0, .5, 0, 1
    assert gain.win_rate == pytest.approx(0.375)
    assert gain.score_diff == pytest.approx((5 + 2 + 0 + 4) / 4)
    assert gain.win_rate_ci[0] < gain.win_rate < gain.win_rate_ci[1]
    same = paired_gain(agent, agent)
    assert same.win_rate == 0 and same.win_rate_ci == (0.0, 0.0)
    pooled = pooled_paired_gain([(agent, base), (agent, agent)])
    assert pooled.games == 4 and pooled.win_rate == pytest.approx(0.375 / 2)
    with pytest.raises(ValueError, match="same games"):
        paired_gain(agent, result([1, 2]))
    with pytest.raises(ValueError, match="same games"):
        pooled_paired_gain([(agent, base), (result([1, 2]), result([1, 2]))])


def test_pooled_gain_takes_the_games_not_the_pairs_as_the_sampled_unit():
    # Three seeds that played the same 4 games identically carry no more information than
    # one: the pooled interval must not shrink by sqrt(3) (it did when pairs were pooled).
    agent, base = result([10, 0, -5, 3]), result([5, -2, -5, -1])
    one = paired_gain(agent, base)
    three = pooled_paired_gain([(agent, base)] * 3)
    assert three.games == 4
    assert three.win_rate_ci == pytest.approx(one.win_rate_ci)
    assert three.score_diff_ci == pytest.approx(one.score_diff_ci)
