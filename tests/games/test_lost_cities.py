"""Lost Cities: the Cython engine against the pure-Python reference, plus known answers.

Property tests (hypothesis) play random games from the same deal in both
implementations and require identical legal actions, states, encodings,
terminal status and scores at every step.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities.games import lost_cities_spec as spec
from lostcities.games._state import random_playouts
from lostcities.games.kuhn import KuhnGame
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.reference.lost_cities_rules import RulesState, expedition_score
from lostcities.rng import Stream

SEEDS = st.integers(min_value=0, max_value=2**63 - 1)


def assert_same_state(fast: LostCitiesGame, ref: RulesState) -> None:
    assert fast.current_player == ref.current_player
    assert fast.is_terminal == ref.is_terminal
    assert fast.capped == ref.capped
    assert fast.turns == ref.turns
    assert fast.just_discarded == ref.just_discarded
    assert fast.draw_pile == ref.draw_pile
    for player in (0, 1):
        assert fast.hand(player) == ref.hand(player)
        assert fast.known(player) == ref.known(player)
        assert fast.expedition_scores(player) == ref.expedition_scores(player)
        for color in range(spec.NUM_COLORS):
            assert fast.expedition(player, color) == ref.expedition(player, color)
        np.testing.assert_array_equal(fast.encode(player), ref.encode(player))
    for color in range(spec.NUM_COLORS):
        assert fast.discard_pile(color) == ref.discard_pile(color)
    assert fast.scores() == ref.scores()
    assert fast.returns() == ref.returns()
    if not fast.is_terminal:
        assert fast.phase == ref.phase
        assert fast.legal_actions() == ref.legal_actions()
        np.testing.assert_array_equal(fast.legal_mask(), ref.legal_mask())


def assert_invariants(game: LostCitiesGame) -> None:
    game.check_invariants()  # all 60 cards accounted for exactly once
    for player in (0, 1):
        for color, score in enumerate(game.expedition_scores(player)):
            assert -80 <= score <= 156
            ranks = [spec.card_rank(t) for t in game.expedition(player, color)]
            numbers = [r for r in ranks if r > 0]
            assert ranks.count(0) <= 3
            assert ranks == [0] * ranks.count(0) + numbers, "wager after a number card"
            assert numbers == sorted(set(numbers)), "numbers not strictly ascending"


def play_twins(
    fast: LostCitiesGame,
    ref: RulesState,
    choice_seed: int,
    reshuffle_every: int = 0,
    determinize_every: int = 0,
):
    """Play both to the end with the same random choices, comparing every step."""
    choices = Stream(choice_seed)
    assert_same_state(fast, ref)
    step = 0
    while not fast.is_terminal:
        legal = fast.legal_actions()
        action = legal[choices.below(len(legal))]
        fast.apply(action)
        ref.apply(action)
        step += 1
        if reshuffle_every and step % reshuffle_every == 0:
            key = choices.next64()
            fast.reshuffle(key)
            ref.reshuffle(key)
        if determinize_every and step % determinize_every == 0 and not fast.is_terminal:
            viewer, key = fast.current_player, choices.next64()
            seen = fast.encode(viewer)
            fast.determinize(viewer, key)
            ref.determinize(viewer, key)
            np.testing.assert_array_equal(fast.encode(viewer), seen)
        assert_same_state(fast, ref)
        assert_invariants(fast)
    return step


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, choice_seed=SEEDS)
def test_random_games_match_reference_from_seed(seed, choice_seed):
    play_twins(LostCitiesGame.from_seed(seed), RulesState.from_seed(seed), choice_seed)


@settings(max_examples=30, deadline=None)
@given(cards=st.permutations(spec.sorted_deck()), first=st.integers(0, 1), choice_seed=SEEDS)
def test_random_games_match_reference_from_explicit_deal(cards, first, choice_seed):
    hands, pile = (cards[:8], cards[8:16]), cards[16:]
    fast = LostCitiesGame.from_deal(hands, pile, first_player=first)
    ref = RulesState.from_deal(hands, pile, first_player=first)
    play_twins(fast, ref, choice_seed, reshuffle_every=7)


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, choice_seed=SEEDS, every=st.integers(1, 9))
def test_determinized_games_match_reference_and_keep_what_the_viewer_saw(seed, choice_seed, every):
    """determinize redeals the hidden cards identically in both engines, leaves the
    viewer's encoding as it was and keeps all 60 cards (checked by play_twins)."""
    play_twins(
        LostCitiesGame.from_seed(seed),
        RulesState.from_seed(seed),
        choice_seed,
        determinize_every=every,
    )


def test_determinize_keeps_known_cards_and_changes_the_hidden_ones():
    game = LostCitiesGame.from_seed(3)
    choices = Stream(11)
    while not game.known(1):  # play until player 1 has taken a card from a discard pile
        legal = game.legal_actions()
        pick = [a for a in legal if a >= spec.DRAW_PILE] if game.current_player == 1 else []
        game.apply(pick[0] if pick else legal[choices.below(len(legal))])
        assert not game.is_terminal
    known, hidden = game.known(1), sorted(game.hand(1) + game.draw_pile)
    redealt = []
    for key in range(20):
        copy = game.clone()
        copy.determinize(0, key)
        assert Counter(known) <= Counter(copy.hand(1))
        assert copy.known(1) == known
        assert sorted(copy.hand(1) + copy.draw_pile) == hidden
        assert len(copy.hand(1)) == len(game.hand(1))
        redealt.append(tuple(copy.hand(1)))
    assert len(set(redealt)) > 10  # the hidden cards really are redrawn
    with pytest.raises(ValueError, match="player must be 0 or 1"):
        game.determinize(2, 0)


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, choice_seed=SEEDS, max_turns=st.integers(1, 60))
def test_turn_cap_matches_reference(seed, choice_seed, max_turns):
    fast = LostCitiesGame.from_seed(seed, max_turns=max_turns)
    ref = RulesState.from_seed(seed, max_turns=max_turns)
    play_twins(fast, ref, choice_seed)
    assert fast.turns <= max_turns
    assert fast.capped == (fast.turns == max_turns and len(fast.draw_pile) > 0)


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, choice_seed=SEEDS, stop=st.integers(0, 200))
def test_serialisation_round_trips_mid_game(seed, choice_seed, stop):
    game = LostCitiesGame.from_seed(seed)
    choices = Stream(choice_seed)
    for _ in range(stop):
        if game.is_terminal:
            break
        legal = game.legal_actions()
        game.apply(legal[choices.below(len(legal))])
    copy = LostCitiesGame.from_bytes(game.to_bytes())
    assert copy.to_bytes() == game.to_bytes()
    assert copy.render() == game.render()
    assert copy.legal_actions() == game.legal_actions()


def _deal_with_hand(hand0: list[int]) -> LostCitiesGame:
    """Player 0 holds ``hand0``; player 1 and the pile get the rest (pile top = last)."""
    rest = Counter(spec.sorted_deck()) - Counter(hand0)
    others = sorted(rest.elements(), key=lambda t: (t // 10 == 4, t))  # keep red for player 1
    return LostCitiesGame.from_deal((hand0, others[-8:]), others[:-8])


def _play_hand_in_order(game: LostCitiesGame, plays: list[int]) -> None:
    """Player 0 plays ``plays`` one per turn; player 1 discards; both draw from the deck."""
    for card in plays:
        game.apply(spec.PLAY + card)
        game.apply(spec.DRAW_DECK)
        game.apply(spec.DISCARD + game.hand(1)[0])
        game.apply(spec.DRAW_DECK)


@pytest.mark.parametrize(
    ("cards", "expected"),
    [
        ([0, 0, 0, 5, 6, 7, 8, 9], 100),  # 3 wagers + 6,7,8,9,10
        ([0, 1, 2, 3, 4, 5, 6, 7], 50),  # one wager + 2..8
        ([0], -40),  # a lone wager
        ([], 0),  # empty
        ([9], -10),  # a lone 10
        ([0, 0, 0], -80),  # the worst color
    ],
)
def test_known_expedition_scores(cards, expected):
    assert expedition_score(cards) == expected
    hand = cards + [t for t in (11, 12, 13, 14, 15, 16, 17, 18) if t not in cards][: 8 - len(cards)]
    game = _deal_with_hand(hand)
    _play_hand_in_order(game, cards)
    assert game.expedition_scores(0)[0] == expected
    assert game.expedition(0, 0) == cards


def test_best_possible_color_scores_156():
    assert expedition_score([0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]) == 156


def test_empty_board_scores_zero():
    game = LostCitiesGame.from_seed(3)
    assert game.scores() == (0, 0)
    assert game.returns() == (0.0, 0.0)


def test_cannot_take_back_the_card_just_discarded_but_can_later():
    game = LostCitiesGame.from_seed(11)
    card = game.hand(0)[0]
    color = spec.card_color(card)
    game.apply(spec.DISCARD + card)
    assert spec.DRAW_PILE + color not in game.legal_actions()
    with pytest.raises(ValueError, match="illegal action"):
        game.apply(spec.DRAW_PILE + color)
    game.apply(spec.DRAW_DECK)
    game.apply(spec.DISCARD + game.hand(1)[-1])
    game.apply(spec.DRAW_DECK)
    game.apply(spec.DISCARD + game.hand(0)[-1])
    if spec.card_color(game.hand(0)[-1]) != color:
        assert spec.DRAW_PILE + color in game.legal_actions()


def test_wager_illegal_after_a_number_card():
    game = _deal_with_hand([0, 0, 3, 11, 12, 13, 14, 15])
    game.apply(spec.PLAY + 0)  # a wager first is fine
    game.apply(spec.DRAW_DECK)
    game.apply(spec.DISCARD + game.hand(1)[0])
    game.apply(spec.DRAW_DECK)
    game.apply(spec.PLAY + 3)  # the 4
    game.apply(spec.DRAW_DECK)
    game.apply(spec.DISCARD + game.hand(1)[0])
    game.apply(spec.DRAW_DECK)
    assert spec.PLAY + 0 not in game.legal_actions()
    assert spec.DISCARD + 0 in game.legal_actions()


def test_game_ends_when_last_card_drawn():
    game = LostCitiesGame.from_seed(5)
    while not game.is_terminal:
        if game.phase == 0:
            game.apply(spec.DISCARD + game.hand(game.current_player)[0])
        else:
            game.apply(spec.DRAW_DECK)
    assert game.draw_pile == []
    assert game.turns == spec.INITIAL_DRAW_PILE
    assert not game.capped
    assert game.scores() == (0, 0)


def test_encoding_slices_cover_the_vector():
    edges = sorted((s.start, s.stop) for s in spec.ENCODING_SLICES.values())
    assert edges[0][0] == 0 and edges[-1][1] == spec.ENCODING_SIZE
    assert all(a[1] == b[0] for a, b in zip(edges, edges[1:], strict=False))
    enc = LostCitiesGame.from_seed(0).encode(0)
    assert enc.shape == (spec.ENCODING_SIZE,) and enc.dtype == np.float32
    assert enc[spec.ENCODING_SLICES["own_hand"]].sum() == 8
    assert enc[spec.ENCODING_SLICES["draw_pile"]][0] == 1.0


def test_encoding_hides_the_opponent_hand_and_the_pile_order():
    a = LostCitiesGame.from_seed(0)
    b = a.clone()
    b.reshuffle(12345)
    assert a.draw_pile != b.draw_pile
    np.testing.assert_array_equal(a.encode(0), b.encode(0))


def test_bad_input_gives_clear_errors():
    game = LostCitiesGame.from_seed(0)
    with pytest.raises(ValueError, match="illegal action 100"):
        game.apply(spec.DRAW_DECK)  # phase 0: must play or discard first
    with pytest.raises(ValueError, match="out of range"):
        game.apply(500)
    with pytest.raises(ValueError, match="60 cards"):
        LostCitiesGame.from_deal(([0] * 8, [1] * 8), [2] * 44)
    with pytest.raises(ValueError, match="snapshot"):
        LostCitiesGame.from_bytes(b"XX" + game.to_bytes())
    with pytest.raises(ValueError, match="player must be 0 or 1"):
        game.encode(2)


def test_c_level_playouts_run_and_rarely_cap():
    game = LostCitiesGame.from_seed(0)
    steps, total = random_playouts(game.kernel, 200, 99)
    assert steps > 200 * 2 * spec.INITIAL_DRAW_PILE * 0.9  # at least ~44 turns of 2 steps
    assert np.isfinite(total)


def test_clone_is_independent_and_assign_copies_the_state():
    game = LostCitiesGame.from_seed(2)
    copy = game.clone()
    copy.apply(copy.legal_actions()[0])
    assert game.phase == 0 and copy.phase == 1
    game.kernel.assign(copy.kernel)  # the C copy_from
    assert game.to_bytes() == copy.to_bytes()
    with pytest.raises(TypeError, match="cannot assign a KuhnState"):
        game.kernel.assign(KuhnGame.new().kernel)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), symmetry=st.integers(0, 119))
def test_color_relabelling_is_a_symmetry(seed, symmetry):
    """Renaming colors moves encodings and masks exactly as color_permutations says."""
    feature_index, action_index = spec.color_permutations()
    perm = list(itertools.permutations(range(spec.NUM_COLORS)))[symmetry]
    new_color = {old: new for new, old in enumerate(perm)}  # new block c holds old color pi[c]

    def rename(t):
        return new_color[spec.card_color(t)] * spec.RANKS_PER_COLOR + spec.card_rank(t)

    rename_action = {int(old): new for new, old in enumerate(action_index[symmetry])}
    game = LostCitiesGame.from_seed(seed)
    twin = LostCitiesGame.from_deal(
        ([rename(t) for t in game.hand(0)], [rename(t) for t in game.hand(1)]),
        [rename(t) for t in game.draw_pile],
    )
    stream = Stream(seed)
    while not game.is_terminal:
        for player in (0, 1):
            np.testing.assert_array_equal(
                twin.encode(player), game.encode(player)[feature_index[symmetry]]
            )
        np.testing.assert_array_equal(twin.legal_mask(), game.legal_mask()[action_index[symmetry]])
        action = game.legal_actions()[stream.below(len(game.legal_actions()))]
        game.apply(action)
        twin.apply(rename_action[action])
    assert twin.scores() == game.scores()


def _card(color, rank):
    return color * spec.RANKS_PER_COLOR + rank


def test_derived_features_known_position():
    # Player 0 holds Y3 Y5 Yw B9 B10 W2 G4 R7 and opens yellow with Y3.
    deck = spec.sorted_deck()
    pairs = ((0, 2), (0, 4), (0, 0), (1, 8), (1, 9), (2, 1), (3, 3), (4, 6))
    hand0 = [_card(c, r) for c, r in pairs]
    rest = list(deck)
    for t in hand0:
        rest.remove(t)
    hand1, pile = rest[:8], rest[8:]
    game = LostCitiesGame.from_deal((hand0, hand1), pile)
    game.apply(spec.PLAY + _card(0, 2))  # Y3 opens yellow
    game.apply(spec.DRAW_DECK)
    enc = game.encode(0)
    s = spec.ENCODING_SLICES
    playable = np.flatnonzero(enc[s["playable"]]).tolist()
    y5, yw = _card(0, 4), _card(0, 0)
    assert y5 in playable and yw not in playable  # no wager after a number card
    assert enc[s["opens"]][y5] == 0 and enc[s["opens"]][_card(1, 8)] == 1
    assert enc[s["gap"]][y5] == pytest.approx(1 / 8)  # Y4 is skipped
    yellow = enc[s["color_stats"]][: len(spec.COLOR_STATS)]
    stats = dict(zip(spec.COLOR_STATS, yellow, strict=True))
    assert stats["own_opened"] == 1 and stats["own_top"] == pytest.approx(2 / 9)
    assert stats["own_score"] == pytest.approx(-17 / 100)  # 3 - 20
    assert stats["own_cards"] == pytest.approx(1 / 12) and stats["opp_opened"] == 0
    assert enc[s["score_totals"]].tolist() == pytest.approx([-0.17, 0.0])
