"""Slow, readable reference implementation of classic 2-player Lost Cities.

This is the pure-Python twin of the Cython engine (``_lost_cities.pyx`` behind
``lost_cities.py``). Both follow :mod:`lostcities.games.lost_cities_spec` for
what a card type, an action index and an encoding slot mean, and property
tests compare them state by state. Clarity beats speed here: cards are plain
lists of card types, and every rule is spelled out once.

Rules
    A turn is two steps by the same player:

    1. (phase 0) play a card from hand onto your own expedition of its color,
       or discard it face up onto that color's shared discard pile;
    2. (phase 1) draw the top card of the draw pile, or the top card of any
       non-empty discard pile except the pile you discarded onto in step 1.

    On an expedition, wagers may only be played before its first number card;
    number cards go in strictly ascending order (gaps allowed). The game ends
    as soon as the last card of the draw pile is drawn, or, as a guard against
    endless discard ping-pong, once ``max_turns`` turns have been completed
    (then ``capped`` is True and the board is scored as it stands).

Scoring (per color with at least one card on the expedition)
    (sum of number values - 20) * (1 + wagers), plus 20 (not multiplied) when
    the expedition holds 8 or more cards, wagers included. Returns are the
    zero-sum score difference.
"""

from __future__ import annotations

import numpy as np

from lostcities.games.lost_cities_spec import (
    BONUS,
    BONUS_MIN_CARDS,
    COLOR_LETTERS,
    COLOR_NAMES,
    COLOR_STATS,
    DEFAULT_MAX_TURNS,
    DISCARD,
    DRAW_DECK,
    DRAW_PILE,
    ENCODING_SIZE,
    ENCODING_SLICES,
    EXPEDITION_COST,
    HAND_SIZE,
    INITIAL_DRAW_PILE,
    MAX_PILE,
    NUM_ACTIONS,
    NUM_CARD_TYPES,
    NUM_CARDS,
    NUM_COLORS,
    NUM_PLAYERS,
    PLAY,
    RANKS_PER_COLOR,
    action_name,
    card_color,
    card_name,
    card_rank,
    card_value,
    copies,
    sorted_deck,
)
from lostcities.rng import Purpose, Stream, stream_key

TERMINAL_PLAYER = -2  # current_player once the game is over
PHASE_PLAY = 0  # step 1: play or discard a card
PHASE_DRAW = 1  # step 2: draw a card
NO_CARD = -1  # just_discarded when nothing was discarded this turn


def expedition_score(cards: list[int]) -> int:
    """Score of one color's expedition, given its played card types.

    An empty expedition scores 0. Otherwise (numbers - 20) * (1 + wagers), and
    a bonus of 20 (added after the multiplier) for 8 or more cards.
    """
    if not cards:
        return 0
    wagers = sum(1 for t in cards if card_rank(t) == 0)
    numbers = sum(card_value(t) for t in cards)  # wagers have value 0
    score = (numbers - EXPEDITION_COST) * (1 + wagers)
    if len(cards) >= BONUS_MIN_CARDS:
        score += BONUS
    return score


def _check_player(player: int) -> None:
    if player not in (0, 1):
        raise ValueError(f"player must be 0 or 1, got {player!r}")


def _check_color(color: int) -> None:
    if not 0 <= color < NUM_COLORS:
        raise ValueError(f"color must be in [0, {NUM_COLORS}), got {color!r}")


def _describe_action(action: int) -> str:
    """``action_name`` that never raises (for error messages)."""
    try:
        return action_name(action)
    except ValueError:
        return f"outside [0, {NUM_ACTIONS})"


class RulesState:
    """One Lost Cities game state. Build it with :meth:`from_seed` or :meth:`from_deal`.

    Internal layout (all plain Python lists of card types):
        _hands[p]               unordered list of the cards player p holds
        _expeditions[p][c]      cards player p played on color c, in play order
        _discards[c]            discard pile of color c, bottom .. top
        _draw_pile              the draw pile, bottom .. top (top = last item)
        _known[p][t]            how many cards of type t the opponent knows p holds
    """

    def __init__(self) -> None:
        # Use from_seed / from_deal; this makes an empty shell they fill in.
        self._hands: list[list[int]] = [[], []]
        self._expeditions: list[list[list[int]]] = [
            [[] for _ in range(NUM_COLORS)] for _ in range(NUM_PLAYERS)
        ]
        self._discards: list[list[int]] = [[] for _ in range(NUM_COLORS)]
        self._draw_pile: list[int] = []
        self._known: list[list[int]] = [[0] * NUM_CARD_TYPES for _ in range(NUM_PLAYERS)]
        self._player = 0  # whose turn it is (kept as is once the game ends)
        self._phase = PHASE_PLAY
        self._just_discarded = NO_CARD
        self._turns = 0
        self._max_turns = DEFAULT_MAX_TURNS
        self._terminal = False
        self._capped = False

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_seed(cls, seed: int, max_turns: int = DEFAULT_MAX_TURNS) -> RulesState:
        """Deal from ``seed``: shuffle the sorted deck with the DEAL stream of (seed, 0, 0, 0)."""
        cards = sorted_deck()
        Stream(stream_key(seed, 0, 0, 0, int(Purpose.DEAL))).shuffle(cards)
        hands = (cards[0:HAND_SIZE], cards[HAND_SIZE : 2 * HAND_SIZE])
        return cls.from_deal(hands, cards[2 * HAND_SIZE :], first_player=0, max_turns=max_turns)

    @classmethod
    def from_deal(
        cls,
        hands: tuple[list[int], list[int]],
        draw_pile: list[int],
        first_player: int = 0,
        max_turns: int = DEFAULT_MAX_TURNS,
    ) -> RulesState:
        """A fresh game from explicit hands (8 card types each) and a draw pile (top last).

        Raises ValueError unless the hands and the pile together are exactly the
        60-card deck.
        """
        if len(hands) != NUM_PLAYERS:
            raise ValueError(f"expected {NUM_PLAYERS} hands, got {len(hands)}")
        if first_player not in (0, 1):
            raise ValueError(f"first_player must be 0 or 1, got {first_player!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns!r}")
        for p, hand in enumerate(hands):
            if len(hand) != HAND_SIZE:
                raise ValueError(f"hand {p} has {len(hand)} cards, expected {HAND_SIZE}")
        all_cards = [*hands[0], *hands[1], *draw_pile]
        for t in all_cards:
            if not 0 <= t < NUM_CARD_TYPES:
                raise ValueError(f"card type {t!r} is outside [0, {NUM_CARD_TYPES})")
        counts = [0] * NUM_CARD_TYPES
        for t in all_cards:
            counts[t] += 1
        wrong = [
            f"{card_name(t)} (type {t}) appears {counts[t]} times, expected {copies(t)}"
            for t in range(NUM_CARD_TYPES)
            if counts[t] != copies(t)
        ]
        if wrong:
            raise ValueError(f"the deal is not the {NUM_CARDS}-card deck: " + "; ".join(wrong))
        # With two hands of 8 and the right multiset, the pile has 44 cards.
        assert len(draw_pile) == INITIAL_DRAW_PILE

        state = cls()
        state._hands = [[int(t) for t in hands[0]], [int(t) for t in hands[1]]]
        state._draw_pile = [int(t) for t in draw_pile]
        state._player = int(first_player)
        state._max_turns = int(max_turns)
        return state

    # ------------------------------------------------------------------ status

    @property
    def current_player(self) -> int:
        """0 or 1 to act; -2 once the game is over."""
        return TERMINAL_PLAYER if self._terminal else self._player

    @property
    def phase(self) -> int:
        """0 = play/discard, 1 = draw (0 again once the game is over)."""
        return self._phase

    @property
    def is_terminal(self) -> bool:
        return self._terminal

    @property
    def capped(self) -> bool:
        """True when the game ended by hitting ``max_turns`` rather than the draw pile."""
        return self._capped

    @property
    def turns(self) -> int:
        """Number of completed turns (a turn completes with its draw)."""
        return self._turns

    @property
    def max_turns(self) -> int:
        return self._max_turns

    @property
    def just_discarded(self) -> int:
        """Card type discarded in this turn's step 1, else -1."""
        return self._just_discarded

    # ------------------------------------------------------------------ legality

    def _can_play(self, player: int, card: int) -> bool:
        """May ``player`` put ``card`` on their expedition of its color?"""
        expedition = self._expeditions[player][card_color(card)]
        if not expedition:
            return True
        top_rank = card_rank(expedition[-1])
        if card_rank(card) == 0:
            # A wager only while the expedition holds nothing but wagers.
            return top_rank == 0
        # A number card must beat the last card (a wager has rank 0).
        return card_rank(card) > top_rank

    def legal_actions(self) -> list[int]:
        """Legal action indices in ascending order; [] when the game is over."""
        if self._terminal:
            return []
        player = self._player
        actions: list[int] = []
        if self._phase == PHASE_PLAY:
            distinct = sorted(set(self._hands[player]))
            for t in distinct:
                if self._can_play(player, t):
                    actions.append(PLAY + t)
            for t in distinct:
                actions.append(DISCARD + t)  # discarding is always allowed
        else:
            if self._draw_pile:
                actions.append(DRAW_DECK)
            blocked = (
                NO_CARD if self._just_discarded == NO_CARD else card_color(self._just_discarded)
            )
            for c in range(NUM_COLORS):
                if self._discards[c] and c != blocked:
                    actions.append(DRAW_PILE + c)
        return actions

    def legal_mask(self) -> np.ndarray:
        """uint8 array of shape (106,): 1 where the action is legal."""
        mask = np.zeros(NUM_ACTIONS, dtype=np.uint8)
        for a in self.legal_actions():
            mask[a] = 1
        return mask

    # ------------------------------------------------------------------ moves

    def apply(self, action: int) -> None:
        """Apply one legal action; ValueError on an illegal one or when the game is over."""
        if not isinstance(action, int | np.integer):
            raise TypeError(f"action must be an int, got {type(action).__name__}")
        action = int(action)
        if self._terminal:
            raise ValueError(
                f"illegal action {action} ({_describe_action(action)}): the game is over"
            )
        legal = self.legal_actions()
        if action not in legal:
            phase = "play/discard" if self._phase == PHASE_PLAY else "draw"
            names = ", ".join(action_name(a) for a in legal)
            raise ValueError(
                f"illegal action {action} ({_describe_action(action)}) for player "
                f"{self._player} in phase {self._phase} ({phase}); legal: {names}"
            )
        player = self._player
        if self._phase == PHASE_PLAY:
            if action < DISCARD:
                card = action - PLAY
                self._take_from_hand(player, card)
                self._expeditions[player][card_color(card)].append(card)
            else:
                card = action - DISCARD
                self._take_from_hand(player, card)
                self._discards[card_color(card)].append(card)
                self._just_discarded = card
            self._phase = PHASE_DRAW
        else:
            if action == DRAW_DECK:
                self._hands[player].append(self._draw_pile.pop())
            else:
                card = self._discards[action - DRAW_PILE].pop()
                self._hands[player].append(card)
                self._known[player][card] += 1  # the opponent saw it taken
            self._end_turn()

    def _take_from_hand(self, player: int, card: int) -> None:
        """Remove ``card`` from the hand; it is no longer a known card of ``player``."""
        self._hands[player].remove(card)
        if self._known[player][card] > 0:
            self._known[player][card] -= 1

    def _end_turn(self) -> None:
        """Close the turn after its draw: count it, maybe end the game, pass the move."""
        self._turns += 1
        self._phase = PHASE_PLAY
        self._just_discarded = NO_CARD
        if not self._draw_pile:
            self._terminal = True  # the last card of the draw pile was drawn
        elif self._turns >= self._max_turns:
            self._terminal = True
            self._capped = True
        else:
            self._player = 1 - self._player

    def reshuffle(self, key: int) -> None:
        """Shuffle the draw pile in place with the stream ``key`` (nothing else changes)."""
        Stream(key).shuffle(self._draw_pile)

    def determinize(self, viewer: int, key: int) -> None:
        """Redeal what ``viewer`` cannot see (the opponent's cards not seen taken from a
        discard pile, and the draw pile) with the stream ``key``, keeping every count
        ``viewer`` knows: a sample of the states ``viewer`` cannot tell apart (uniform,
        ignoring what the opponent's moves may reveal)."""
        _check_player(viewer)
        opponent = 1 - viewer
        known = [t for t in range(NUM_CARD_TYPES) for _ in range(self._known[opponent][t])]
        unseen = sorted(self._hands[opponent])
        for t in known:
            unseen.remove(t)
        pool = unseen + self._draw_pile  # types ascending, then the pile bottom..top
        Stream(key).shuffle(pool)
        self._hands[opponent] = known + pool[: len(unseen)]
        self._draw_pile = pool[len(unseen) :]

    # ------------------------------------------------------------------ views

    def hand(self, player: int) -> list[int]:
        """Sorted card types in ``player``'s hand."""
        _check_player(player)
        return sorted(self._hands[player])

    def expedition(self, player: int, color: int) -> list[int]:
        """Card types on ``player``'s expedition of ``color``, in play order."""
        _check_player(player)
        _check_color(color)
        return list(self._expeditions[player][color])

    def discard_pile(self, color: int) -> list[int]:
        """Discard pile of ``color``, bottom .. top."""
        _check_color(color)
        return list(self._discards[color])

    @property
    def draw_pile(self) -> list[int]:
        """The draw pile, bottom .. top."""
        return list(self._draw_pile)

    def known(self, player: int) -> list[int]:
        """Sorted multiset of card types the opponent knows ``player`` holds."""
        _check_player(player)
        return [t for t in range(NUM_CARD_TYPES) for _ in range(self._known[player][t])]

    # ------------------------------------------------------------------ scores

    def expedition_scores(self, player: int) -> list[int]:
        """Score of each of ``player``'s 5 expeditions."""
        _check_player(player)
        return [expedition_score(self._expeditions[player][c]) for c in range(NUM_COLORS)]

    def scores(self) -> tuple[int, int]:
        """Total board score of each player (valid at any time)."""
        return (sum(self.expedition_scores(0)), sum(self.expedition_scores(1)))

    def returns(self) -> tuple[float, float]:
        """Zero-sum score difference (score0 - score1, score1 - score0), as floats.

        Computed from the board as it stands, so it is the game's value only
        once the game is over.
        """
        s0, s1 = self.scores()
        return (float(s0 - s1), float(s1 - s0))

    # ------------------------------------------------------------------ encoding

    def encode(self, player: int) -> np.ndarray:
        """Information-state features of ``player``: float32 (ENCODING_SIZE,), as in the spec."""
        _check_player(player)
        opponent = 1 - player
        out = np.zeros(ENCODING_SIZE, dtype=np.float32)

        start = ENCODING_SLICES["own_hand"].start
        for t in self._hands[player]:
            out[start + t] += 1.0

        start = ENCODING_SLICES["own_expedition"].start
        for c in range(NUM_COLORS):
            for t in self._expeditions[player][c]:
                out[start + t] += 1.0

        start = ENCODING_SLICES["opp_expedition"].start
        for c in range(NUM_COLORS):
            for t in self._expeditions[opponent][c]:
                out[start + t] += 1.0

        # discards: color c, slot s (0 = top), rank r -> start + (c * 12 + s) * 10 + r
        start = ENCODING_SLICES["discards"].start
        for c in range(NUM_COLORS):
            pile = self._discards[c]
            for slot, t in enumerate(reversed(pile)):
                out[start + (c * MAX_PILE + slot) * RANKS_PER_COLOR + card_rank(t)] = 1.0

        out[ENCODING_SLICES["draw_pile"].start] = len(self._draw_pile) / INITIAL_DRAW_PILE

        start = ENCODING_SLICES["opp_known"].start
        for t in range(NUM_CARD_TYPES):
            out[start + t] = self._known[opponent][t]

        out[ENCODING_SLICES["phase"].start + self._phase] = 1.0

        if self._just_discarded != NO_CARD:
            out[ENCODING_SLICES["just_discarded"].start + self._just_discarded] = 1.0

        out[ENCODING_SLICES["seat"].start + player] = 1.0
        self._encode_derived(player, out)
        return out

    def _encode_derived(self, player: int, out: np.ndarray) -> None:
        opponent = 1 - player
        visible = set()  # number cards whose place i knows (one copy each)
        for p in (0, 1):
            for c in range(NUM_COLORS):
                visible.update(self._expeditions[p][c])
        for pile in self._discards:
            visible.update(pile)
        visible.update(t for t in range(NUM_CARD_TYPES) if self._known[opponent][t])
        hand = self._hands[player]
        stats = ENCODING_SLICES["color_stats"].start
        totals = [0, 0]
        for c in range(NUM_COLORS):
            row = stats + c * len(COLOR_STATS)
            for who, p in enumerate((player, opponent)):
                cards = self._expeditions[p][c]
                score = expedition_score(cards)
                totals[who] += score
                numbers = [card_rank(t) for t in cards if card_rank(t) > 0]
                out[row + 5 * who : row + 5 * who + 5] = (
                    1.0 if cards else 0.0,
                    max(numbers, default=0) / 9.0,
                    sum(card_rank(t) == 0 for t in cards) / 3.0,
                    len(cards) / 12.0,
                    score / 100.0,
                )
            mine = [card_rank(t) for t in self._expeditions[player][c] if card_rank(t) > 0]
            top = max(mine, default=0)
            opened = bool(self._expeditions[player][c])
            for t in set(hand):
                if card_color(t) == c and self._can_play(player, t):
                    out[ENCODING_SLICES["playable"].start + t] = 1.0
                    if not opened:
                        out[ENCODING_SLICES["opens"].start + t] = 1.0
                    if card_rank(t) > 0:
                        out[ENCODING_SLICES["gap"].start + t] = (card_rank(t) - top - 1) / 8.0
            above = [c * RANKS_PER_COLOR + r for r in range(top + 1, RANKS_PER_COLOR)]
            out[row + 10] = sum(card_value(t) for t in above if t in hand) / 54.0
            unseen = [t for t in above if t not in hand and t not in visible]
            out[row + 11] = sum(card_value(t) for t in unseen) / 54.0
            pile = self._discards[c]
            out[row + 12] = 1.0 if pile and self._can_play(player, pile[-1]) else 0.0
            out[row + 13] = sum(card_color(t) == c for t in hand) / 8.0
        start = ENCODING_SLICES["score_totals"].start
        out[start : start + 2] = (totals[0] / 100.0, totals[1] / 100.0)

    # ------------------------------------------------------------------ misc

    def clone(self) -> RulesState:
        """A deep copy."""
        other = RulesState()
        other._hands = [list(h) for h in self._hands]
        other._expeditions = [[list(e) for e in exps] for exps in self._expeditions]
        other._discards = [list(d) for d in self._discards]
        other._draw_pile = list(self._draw_pile)
        other._known = [list(k) for k in self._known]
        other._player = self._player
        other._phase = self._phase
        other._just_discarded = self._just_discarded
        other._turns = self._turns
        other._max_turns = self._max_turns
        other._terminal = self._terminal
        other._capped = self._capped
        return other

    def render(self) -> str:
        """Human-readable multi-line view of the whole board."""

        def names(cards: list[int]) -> str:
            return " ".join(card_name(t) for t in cards) if cards else "-"

        lines: list[str] = []
        if self._terminal:
            how = "turn cap reached" if self._capped else "draw pile empty"
            status = f"game over ({how})"
        else:
            step = "play/discard" if self._phase == PHASE_PLAY else "draw"
            status = f"player {self._player} to {step}"
        lines.append(f"Lost Cities  turn {self._turns}/{self._max_turns}  {status}")
        lines.append(f"draw pile: {len(self._draw_pile)} cards")
        if self._just_discarded != NO_CARD:
            lines.append(f"just discarded: {card_name(self._just_discarded)}")
        lines.append("discard piles (bottom .. top):")
        for c in range(NUM_COLORS):
            lines.append(f"  {COLOR_LETTERS[c]} {COLOR_NAMES[c]:<6}  {names(self._discards[c])}")
        scores = self.scores()
        for p in range(NUM_PLAYERS):
            lines.append(f"player {p}: score {scores[p]}")
            lines.append(f"  hand:  {names(sorted(self._hands[p]))}")
            lines.append(f"  known: {names(self.known(p))}")
            for c in range(NUM_COLORS):
                exp = self._expeditions[p][c]
                lines.append(
                    f"  {COLOR_LETTERS[c]} {COLOR_NAMES[c]:<6}  {names(exp)}"
                    f"  ({expedition_score(exp)})"
                )
        if not self._terminal:
            lines.append("legal: " + ", ".join(action_name(a) for a in self.legal_actions()))
        else:
            r = self.returns()
            lines.append(f"returns: {r[0]:+.0f} / {r[1]:+.0f}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"RulesState(player={self.current_player}, phase={self._phase}, "
            f"turns={self._turns}, draw_pile={len(self._draw_pile)})"
        )
