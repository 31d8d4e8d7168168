"""Baseline Lost Cities bots: fixed opponents for evaluating trained agents.

    >>> bot = make_bot("cautious", seed=0)
    >>> game.apply(bot.act(game))   # acts for game.current_player

A bot decides both steps of its turn (phase 0: play or discard; phase 1:
draw). It reads only what its seat may see (own hand, both expeditions, the
discard piles) and draws every random number from the :class:`Stream` it was
built with, so a bot is deterministic given its seed and the games it sees.

Bots, from weakest up:
    random        uniform over the legal actions
    discard_only  never plays, so it scores exactly 0: the floor to beat
    eager         plays any playable card, never takes a discard
    cautious      extends open colors, opens one only with 20+ points in hand
    committer     always plays the card that skips the fewest reachable values
    sigma1        the shipped initial strategy of Lost Cities training (the
                  heuristic CFR starts from, lostcities/cfr/initial.py), sampled
                  (it keeps 10% uniform exploration); sigma1_greedy plays its
                  most probable action. A trained agent must beat what it
                  started from: evaluations pair it with this bot.

No ping-pong: the heuristic bots take a discard only when they will play it
on their very next turn (it is a play their phase-0 rule would make, and
nothing the opponent does can change that). Plays are bounded (60 cards), so
takes are too, and every other draw empties the draw pile: these bots always
end a game well inside the turn cap. ``random`` may take discards, but it
draws from the deck with probability >= 1/6 each turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import numpy as np

from lostcities.games.lost_cities import LostCitiesGame
from lostcities.games.lost_cities_spec import (
    DISCARD,
    DRAW_DECK,
    DRAW_PILE,
    EXPEDITION_COST,
    NUM_COLORS,
    PLAY,
    RANKS_PER_COLOR,
    card_color,
    card_rank,
    card_value,
)
from lostcities.rng import Purpose, Stream, stream_key

# A wager has face value 0 but is worth keeping (or denying) while its color is
# still open to wagers; count it like a middling number card when discarding.
WAGER_WORTH = 5.0


@runtime_checkable
class Bot(Protocol):
    """A fixed policy: ``act`` returns a legal action for ``game.current_player``."""

    name: str

    def act(self, game: LostCitiesGame) -> int: ...


# --- what the player to act sees ------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """The public board plus the acting player's hand, read once per decision.

    ``mine[c]``/``theirs[c]`` are the expeditions of color c (play order) of the
    player to act and of the opponent; ``piles[c]`` is c's discard pile, top last.
    """

    hand: tuple[int, ...]
    mine: tuple[tuple[int, ...], ...]
    theirs: tuple[tuple[int, ...], ...]
    piles: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, game: LostCitiesGame) -> Table:
        me = game.current_player
        colors = range(NUM_COLORS)
        return cls(
            hand=tuple(game.hand(me)),
            mine=tuple(tuple(game.expedition(me, c)) for c in colors),
            theirs=tuple(tuple(game.expedition(1 - me, c)) for c in colors),
            piles=tuple(tuple(game.discard_pile(c)) for c in colors),
        )

    def out_of_reach(self) -> set[int]:
        """Card types the player to act can never get: on the opponent's
        expeditions, or buried (not on top) in a discard pile. Everything else
        is *still available*: in its own hand, unseen (draw pile or the
        opponent's hand, which it cannot tell apart), or on top of a pile.
        Wagers come in threes, so only number cards are meaningful here."""
        gone = {t for exp in self.theirs for t in exp}
        gone.update(t for pile in self.piles for t in pile[:-1])
        return gone

    def with_card(self, card: int) -> Table:
        """The same table with ``card`` added to the hand (a draw being weighed)."""
        return replace(self, hand=(*self.hand, card))


def top_rank(expedition: Sequence[int]) -> int:
    """Highest number rank (1..9) on an expedition; 0 while it holds no number card."""
    return max((card_rank(t) for t in expedition), default=0)


def can_extend(expedition: Sequence[int], card: int) -> bool:
    """Whether ``card`` may go onto ``expedition`` (its color): wagers only
    before the first number card, number cards strictly ascending."""
    top = top_rank(expedition)
    return top == 0 if card_rank(card) == 0 else card_rank(card) > top


def playable(table: Table) -> list[int]:
    """Distinct card types in hand that can be played on the actor's expeditions."""
    return sorted({t for t in table.hand if can_extend(table.mine[card_color(t)], t)})


def skipped(table: Table, card: int, gone: set[int]) -> int:
    """Still-available values (see :meth:`Table.out_of_reach`) that playing
    ``card`` would block forever: number ranks strictly between the actor's
    top of that color and ``card``. A wager raises no top, so it skips 0."""
    color, rank = card_color(card), card_rank(card)
    if rank == 0:
        return 0
    base = color * RANKS_PER_COLOR
    top = top_rank(table.mine[color])
    return sum(1 for r in range(top + 1, rank) if base + r not in gone)


def number_points(table: Table, color: int) -> int:
    """Face value of the distinct playable number cards of ``color`` in hand."""
    exp = table.mine[color]
    cards = {t for t in table.hand if card_color(t) == color and card_rank(t) > 0}
    return sum(card_value(t) for t in cards if can_extend(exp, t))


def worth(expedition: Sequence[int], card: int) -> float:
    """Rough value of ``card`` to the owner of ``expedition``: 0 when it can no
    longer go there; its face value (wagers: WAGER_WORTH) when the color is open;
    half that when it is not (opening costs 20 and may never happen)."""
    if not can_extend(expedition, card):
        return 0.0
    value = WAGER_WORTH if card_rank(card) == 0 else float(card_value(card))
    return value if expedition else value / 2


def discard_cost(table: Table, card: int) -> float:
    """What discarding ``card`` gives away: its worth to the opponent (who may
    take it) plus its worth to the actor (who loses it)."""
    color = card_color(card)
    return worth(table.theirs[color], card) + worth(table.mine[color], card)


def pick_min(stream: Stream, items: Sequence[int], key: Callable[[int], object]) -> int:
    """An item with the smallest key; ties broken by the stream."""
    keys = [key(x) for x in items]
    best = min(keys)
    ties = [x for x, k in zip(items, keys, strict=True) if k == best]
    return ties[stream.below(len(ties))] if len(ties) > 1 else ties[0]


def least_helpful_discard(table: Table, stream: Stream) -> int:
    """DISCARD action for the hand card that gives away the least (ties random)."""
    return DISCARD + pick_min(stream, sorted(set(table.hand)), lambda t: discard_cost(table, t))


def pile_tops(game: LostCitiesGame, table: Table) -> dict[int, int]:
    """Legal pile draws: draw action -> the card type it takes."""
    legal = game.legal_mask()
    return {
        DRAW_PILE + c: pile[-1]
        for c, pile in enumerate(table.piles)
        if pile and legal[DRAW_PILE + c]
    }


# --- bots ------------------------------------------------------------------------------------


class RandomBot:
    """Uniform over the legal actions in both phases (so it also takes
    discards and discards taken cards at random)."""

    name = "random"

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def act(self, game: LostCitiesGame) -> int:
        legal = game.legal_actions()
        return legal[self.stream.below(len(legal))]


class DiscardOnlyBot:
    """Discards a uniformly random hand card, then draws from the deck. Its
    expeditions stay empty, so it scores exactly 0 every game."""

    name = "discard_only"

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def act(self, game: LostCitiesGame) -> int:
        if game.phase == 1:
            return DRAW_DECK
        hand = sorted(set(game.hand(game.current_player)))
        return DISCARD + hand[self.stream.below(len(hand))]


class EagerBot:
    """Plays a uniformly random playable card (any color, opening it if need
    be); with none, discards a uniformly random card. Always draws from the deck."""

    name = "eager"

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def act(self, game: LostCitiesGame) -> int:
        if game.phase == 1:
            return DRAW_DECK
        table = Table.of(game)
        plays = [PLAY + t for t in playable(table)]
        options = plays or [DISCARD + t for t in sorted(set(table.hand))]
        return options[self.stream.below(len(options))]


class CautiousBot:
    """Plays only where it pays, discards what helps the opponent least.

    Play (phase 0): a playable card is *justified* when its color is already
    open (own expedition non-empty) or the playable number cards of that color
    in hand add up to ``open_points`` (20, the expedition cost) or more.
    Wagers count 0 points but are justified on the same 20-point condition,
    and go first (they are dead once a number card is down). Among justified
    plays: wagers, then fewest still-available values skipped, then the lower
    card. With no justified play it discards the card with the least
    :func:`discard_cost` (worth to the opponent plus worth to itself).

    Draw (phase 1): takes a pile's top card only if, once in hand, it would be
    a justified play (then it is played next turn: no ping-pong); the best such
    card by the play order above. Otherwise draws from the deck.
    """

    name = "cautious"
    open_points = EXPEDITION_COST

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def act(self, game: LostCitiesGame) -> int:
        table = Table.of(game)
        gone = table.out_of_reach()

        def order(t: int) -> tuple[bool, int, int]:
            return (card_rank(t) > 0, skipped(table, t, gone), card_rank(t))

        if game.phase == 0:
            plays = [t for t in playable(table) if self.justified(table, t)]
            if plays:
                return PLAY + pick_min(self.stream, plays, order)
            return least_helpful_discard(table, self.stream)
        tops = pile_tops(game, table)
        takes = [a for a, t in tops.items() if self.justified(table.with_card(t), t)]
        if not takes:
            return DRAW_DECK
        return pick_min(self.stream, takes, lambda a: order(tops[a]))

    def justified(self, table: Table, card: int) -> bool:
        """Whether ``card`` (in ``table.hand``) is worth playing now."""
        color = card_color(card)
        if not can_extend(table.mine[color], card):
            return False
        return bool(table.mine[color]) or number_points(table, color) >= self.open_points


class CommitterBot:
    """Always plays when it can; takes a discard that plays better than its hand.

    Play (phase 0): among playable cards, the one skipping the fewest
    still-available values (:func:`skipped`; wagers skip none), then one that
    extends an open color over one that opens a new color, then the lower
    card. With nothing playable it discards the card with the least
    :func:`discard_cost`.

    Draw (phase 1): by now its best phase-0 play is on the table, so the best
    playable card left in hand is its second-best play. It takes a pile's top
    card when that card is playable and skips strictly fewer still-available
    values than every playable card in hand (or the hand has none); the best
    such pile by the same order. Otherwise it draws from the deck. A taken
    card is playable next turn and it always plays, so it never ping-pongs.
    """

    name = "committer"

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def act(self, game: LostCitiesGame) -> int:
        table = Table.of(game)
        gone = table.out_of_reach()

        def order(t: int) -> tuple[int, bool, int]:
            return (skipped(table, t, gone), not table.mine[card_color(t)], card_rank(t))

        in_hand = playable(table)
        if game.phase == 0:
            if in_hand:
                return PLAY + pick_min(self.stream, in_hand, order)
            return least_helpful_discard(table, self.stream)
        bar = min((skipped(table, t, gone) for t in in_hand), default=None)
        tops = pile_tops(game, table)
        takes = [
            a
            for a, t in tops.items()
            if can_extend(table.mine[card_color(t)], t)
            and (bar is None or skipped(table, t, gone) < bar)
        ]
        if not takes:
            return DRAW_DECK
        return pick_min(self.stream, takes, lambda a: order(tops[a]))


class Sigma1Bot:
    """sigma_1 (``lost_cities_heuristic``) on the acting seat's encoded information state,
    sampled from the bot's stream, or its most probable action with ``greedy``."""

    def __init__(self, stream: Stream, greedy: bool = False) -> None:
        self.stream = stream
        self.greedy = greedy
        self.name = "sigma1_greedy" if greedy else "sigma1"

    def act(self, game: LostCitiesGame) -> int:
        from lostcities.cfr.initial import lost_cities_heuristic  # the C kernel, lazily

        player = game.current_player
        mask = game.legal_mask()
        probs = lost_cities_heuristic(
            np.array([player], np.int8), game.encode(player)[None, :], mask[None, :]
        )[0]
        if self.greedy:
            return int(np.where(mask > 0, probs, -1.0).argmax())
        return self.stream.choice(probs * mask)


BOTS: dict[str, Callable[[Stream], Bot]] = {
    **{bot.name: bot for bot in (RandomBot, DiscardOnlyBot, EagerBot, CautiousBot, CommitterBot)},
    "sigma1": Sigma1Bot,
    "sigma1_greedy": lambda stream: Sigma1Bot(stream, greedy=True),
}
BOT_NAMES: tuple[str, ...] = tuple(BOTS)


def make_bot(name: str, seed: int) -> Bot:
    """The bot called ``name``, drawing its randomness from a stream keyed by ``seed``."""
    if name not in BOTS:
        raise ValueError(f"unknown bot {name!r}; known bots: {', '.join(BOT_NAMES)}")
    return BOTS[name](Stream(stream_key(seed, 0, 0, 0, Purpose.BOT)))
