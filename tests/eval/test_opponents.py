"""Baseline bots: legality, determinism, the 0-score floor, strength, no ping-pong."""

from __future__ import annotations

import itertools

import pytest

from lostcities.eval.match import MatchResult, play_games, play_match
from lostcities.eval.opponents import (
    BOT_NAMES,
    Bot,
    CautiousBot,
    Table,
    can_extend,
    make_bot,
    skipped,
)
from lostcities.eval.players import BotPlayer
from lostcities.games.lost_cities_spec import INITIAL_DRAW_PILE, NUM_CARDS
from lostcities.rng import Stream


def match(bot_a: Bot, bot_b: Bot, games: int, seed: int) -> MatchResult:
    """A match between two bots, each with one stream for the whole match."""
    return play_match(BotPlayer.shared(bot_a), BotPlayer.shared(bot_b), games, seed).result


HEURISTIC = ("eager", "cautious", "committer")

# A heuristic bot takes a discard only when it plays on its next turn, and a
# player makes at most NUM_CARDS plays; every other turn empties the deck by one.
TURN_BOUND = INITIAL_DRAW_PILE + 2 * (NUM_CARDS + 1)


def _card(color: int, value: int) -> int:
    """Card type of a number card (value 2..10) or, with value 0, a wager."""
    return color * 10 + (0 if value == 0 else value - 1)


def _table(hand=(), mine=None, theirs=None, piles=None) -> Table:
    empty = ((),) * 5
    return Table(tuple(hand), mine or empty, theirs or empty, piles or empty)


def test_every_bot_satisfies_the_protocol() -> None:
    for name in BOT_NAMES:
        bot = make_bot(name, 0)
        assert isinstance(bot, Bot)
        assert bot.name == name


def test_unknown_bot_is_a_one_line_error_naming_the_bots() -> None:
    with pytest.raises(ValueError, match="unknown bot 'alphago'") as info:
        make_bot("alphago", 0)
    message = str(info.value)
    assert "\n" not in message
    assert all(name in message for name in BOT_NAMES)


@pytest.mark.parametrize("name", BOT_NAMES)
def test_bot_is_deterministic_given_its_seed(name: str) -> None:
    def run(seed: int) -> tuple[int, ...]:
        return match(make_bot(name, seed), make_bot("random", 9), games=6, seed=3).scores_a

    assert run(4) == run(4)


def test_random_bot_seed_matters() -> None:
    actions = []
    for seed in (1, 2):
        bots = BotPlayer.shared(make_bot("random", seed)), BotPlayer.shared(make_bot("random", 0))
        (game,) = play_games(*bots, [0], 5, 1000)
        actions.append(game.to_bytes())
    assert actions[0] != actions[1]


def test_bots_only_take_legal_actions_and_never_ping_pong() -> None:
    # play_games applies every action through LostCitiesGame.apply, which raises
    # on an illegal one; 25 pairings x 12 games, both seats.
    for (i, a), (j, b) in itertools.product(enumerate(BOT_NAMES), repeat=2):
        bots = BotPlayer.shared(make_bot(a, 10 + i)), BotPlayer.shared(make_bot(b, 20 + j))
        for k, game in enumerate(play_games(*bots, range(12), 7, max_turns=1000)):
            assert game.is_terminal and not game.capped, (a, b, k)
            if "random" not in (a, b):
                assert game.turns <= TURN_BOUND, (a, b, k, game.turns)


@pytest.mark.parametrize("opponent", ["random", "eager", "cautious", "committer"])
def test_discard_only_scores_exactly_zero(opponent: str) -> None:
    result = match(make_bot("discard_only", 1), make_bot(opponent, 2), games=60, seed=5)
    assert set(result.scores_a) == {0}


@pytest.mark.parametrize("name", HEURISTIC)
def test_heuristic_bot_clearly_beats_random(name: str) -> None:
    result = match(make_bot(name, 1), make_bot("random", 2), games=150, seed=11)
    assert result.win_rate_ci()[0] > 0.5
    assert result.capped == 0


def test_no_bot_game_hits_the_turn_cap() -> None:
    result = match(make_bot("random", 3), make_bot("random", 4), games=300, seed=2)
    assert result.capped == 0


# --- helpers, on hand-built tables -------------------------------------------------------------


def test_can_extend_follows_the_play_rules() -> None:
    assert can_extend((), _card(0, 0))
    assert can_extend((_card(0, 0),), _card(0, 0))
    assert not can_extend((_card(0, 3),), _card(0, 0))  # wager after a number
    assert can_extend((_card(0, 3),), _card(0, 4))
    assert not can_extend((_card(0, 5),), _card(0, 4))


def test_skipped_counts_only_still_available_values() -> None:
    red = 4
    mine = ((), (), (), (), (_card(red, 3),))
    theirs = ((), (), (), (), (_card(red, 5),))  # red 5 is out of reach
    piles = ((), (), (), (), (_card(red, 6), _card(red, 9)))  # 6 buried, 9 on top
    table = _table(mine=mine, theirs=theirs, piles=piles)
    gone = table.out_of_reach()
    assert gone == {_card(red, 5), _card(red, 6)}
    # Playing red 10 on red 3 skips 4..9; of those 5 and 6 are out of reach.
    assert skipped(table, _card(red, 10), gone) == 4
    assert skipped(table, _card(red, 4), gone) == 0
    assert skipped(table, _card(red, 0), gone) == 0


def test_cautious_opens_a_color_only_with_20_points() -> None:
    bot = CautiousBot(Stream(0))
    blue = 1
    few = _table(hand=(_card(blue, 0), _card(blue, 9), _card(blue, 10)))  # 19 points
    assert not bot.justified(few, _card(blue, 9))
    assert not bot.justified(few, _card(blue, 0))
    enough = few.with_card(_card(blue, 2))  # 21 points; the wager may go first
    assert bot.justified(enough, _card(blue, 0))
    assert bot.justified(enough, _card(blue, 2))
    opened = _table(hand=(_card(blue, 4),), mine=((), (_card(blue, 2),), (), (), ()))
    assert bot.justified(opened, _card(blue, 4))
