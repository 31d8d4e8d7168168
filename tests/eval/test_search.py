"""Play-time search: the C playout kernel against its pure-Python twin, and the
search agent's contract (legal one-hot moves, keyed streams, the margin rule)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities.cfr.initial import make_initial_strategy
from lostcities.eval.agents import StrategyAgent
from lostcities.eval.evaluators import evaluation_match
from lostcities.eval.search import (
    RANK_RULES,
    SearchAgent,
    SearchConfig,
    agent_playouts,
    heuristic_playouts,
)
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.reference.lost_cities_rules import RulesState
from lostcities.reference.playouts import heuristic_playouts_reference
from lostcities.rng import Purpose, Stream, stream_key

SEEDS = st.integers(min_value=0, max_value=2**63 - 1)


def twins_mid_game(seed: int, choice_seed: int, moves: int):
    """The same position in both engines after ``moves`` random moves."""
    fast, ref = LostCitiesGame.from_seed(seed), RulesState.from_seed(seed)
    choices = Stream(choice_seed)
    for _ in range(moves):
        if fast.is_terminal:
            break
        legal = fast.legal_actions()
        action = legal[choices.below(len(legal))]
        fast.apply(action)
        ref.apply(action)
    return fast, ref


@settings(max_examples=25, deadline=None)
@given(
    seed=SEEDS,
    choice_seed=SEEDS,
    moves=st.integers(0, 120),
    key=SEEDS,
    play=st.sampled_from(["greedy", "sampled"]),
    redeal=st.booleans(),
)
def test_heuristic_playouts_match_the_reference(seed, choice_seed, moves, key, play, redeal):
    fast, ref = twins_mid_game(seed, choice_seed, moves)
    viewer = (seed + moves) % 2
    if redeal:
        fast.determinize(viewer, key ^ 1)
        ref.determinize(viewer, key ^ 1)
    got = heuristic_playouts([fast], [viewer], [key], play)
    want = heuristic_playouts_reference([ref], [viewer], [key], play)
    np.testing.assert_array_equal(got, want)
    assert fast.is_terminal and ref.is_terminal
    assert fast.scores() == ref.scores()
    assert got[0] == fast.returns()[viewer]


def test_heuristic_playouts_reject_mismatched_lengths():
    with pytest.raises(ValueError, match="same length"):
        heuristic_playouts([LostCitiesGame.from_seed(0)], [0, 1], [5])
    with pytest.raises(ValueError, match="rollout_play must be one of"):
        heuristic_playouts([LostCitiesGame.from_seed(0)], [0], [5], "wild")


def sigma1_agent():
    return StrategyAgent("sigma1", make_initial_strategy("lost_cities_heuristic"))


def decide(agent, game, index=0):
    player = game.current_player
    return agent.probs(
        np.array([index]),
        np.array([player], dtype=np.int8),
        game.encode(player)[None, :],
        game.legal_mask()[None, :],
        [game],
    )[0]


def test_search_plays_one_legal_move_without_changing_the_game():
    game = LostCitiesGame.from_seed(7)
    before = game.to_bytes()
    agent = SearchAgent(sigma1_agent(), SearchConfig(determinizations=6, seed=3))
    probs = decide(agent, game)
    assert game.to_bytes() == before
    assert probs.sum() == 1.0 and probs.max() == 1.0
    assert game.legal_mask()[int(probs.argmax())] == 1
    again = SearchAgent(sigma1_agent(), SearchConfig(determinizations=6, seed=3))
    np.testing.assert_array_equal(decide(again, game), probs)  # keyed, not global, randomness
    assert agent.decisions == 1 and agent.seconds > 0


def test_search_margin_keeps_the_blueprint_move_unless_another_is_clearly_better():
    agent = SearchAgent(sigma1_agent(), SearchConfig(determinizations=4, margin=2.0))
    # candidate 0 is the blueprint's move; paired values over 4 redeals
    noisy = np.array([[0.0, 10.0], [0.0, -8.0], [0.0, 12.0], [0.0, -6.0]])
    clear = np.array([[0.0, 5.0], [1.0, 6.0], [2.0, 7.5], [0.0, 4.0]])
    assert agent._pick(noisy) == 0  # mean +2 with a standard error of ~5
    assert agent._pick(clear) == 1
    plain = SearchAgent(sigma1_agent(), SearchConfig(determinizations=4, margin=0.0))
    assert plain._pick(noisy) == 1


def test_value_blend_mixes_learned_advantages_into_the_pick():
    """lambda = 0.5: a candidate's value is half its playout mean, half its learned
    advantage; the margin's standard error is the playouts' half."""
    config = SearchConfig(determinizations=4, margin=2.0, value_blend=0.5)
    agent = SearchAgent(sigma1_agent(), config)
    noisy = np.array([[0.0, 10.0], [0.0, -8.0], [0.0, 12.0], [0.0, -6.0]])
    clear = np.array([[0.0, 5.0], [1.0, 6.0], [2.0, 7.5], [0.0, 4.0]])
    assert agent._pick(noisy) == 0 and agent._pick(clear) == 1  # no advantages: playouts
    assert agent._pick(noisy, np.array([0.0, 20.0])) == 1  # the nets back the noisy move
    assert agent._pick(clear, np.array([0.0, -20.0])) == 0  # the nets veto the clear one
    assert agent._pick(clear, np.array([0.0, 0.0])) == 1  # equal advantages: playouts decide


class RegretsForTheFirstMove:
    """Ranks the legal actions highest index first, with learned advantages of 1000 points
    on the lowest legal index (ranked last)."""

    name = "regrets_for_the_first_move"

    def probs(self, games, players, features, masks):
        weights = masks * np.arange(1, masks.shape[1] + 1)
        return weights / weights.sum(axis=1, keepdims=True)

    def advantages(self, games, players, features, masks):
        out = np.zeros(masks.shape)
        out[np.arange(len(masks)), masks.argmax(axis=1)] = 1000.0
        return out


def test_value_blend_uses_the_blueprints_advantages_and_leaves_sigma1_alone():
    """With a blend, a blueprint's large learned advantage decides the move among the
    candidates; sigma_1 (no advantages) searches exactly as without one."""
    game = LostCitiesGame.from_seed(4)
    config = SearchConfig(determinizations=4, candidates=0, margin=2.0, value_blend=0.5)
    blended = SearchAgent(RegretsForTheFirstMove(), config)
    legal = np.flatnonzero(game.legal_mask())
    assert int(decide(blended, game).argmax()) == legal[0]
    unblended = SearchAgent(
        RegretsForTheFirstMove(), SearchConfig(determinizations=4, candidates=0)
    )
    assert int(decide(unblended, game).argmax()) != legal[0]
    plain = SearchAgent(sigma1_agent(), SearchConfig(determinizations=8, seed=2))
    with_blend = SearchAgent(
        sigma1_agent(), SearchConfig(determinizations=8, seed=2, value_blend=0.5)
    )
    while not game.is_terminal:
        move = decide(plain, game)
        np.testing.assert_array_equal(decide(with_blend, game), move)
        game.apply(int(move.argmax()))


def test_search_improves_on_its_heuristic_against_the_same_heuristic():
    """Policy improvement: one-step lookahead with sigma_1's rule in the playouts beats
    sigma_1's greedy rule itself on the same deals (fixed seeds, not a timing)."""
    games = 24
    search = SearchAgent(
        sigma1_agent(), SearchConfig(determinizations=24, candidates=0, margin=0.0)
    )  # heuristic playouts, every legal move
    searched = evaluation_match(search, "sigma1_greedy", games, 5, 24, play="greedy").result
    plain = evaluation_match(sigma1_agent(), "sigma1_greedy", games, 5, 24, play="greedy").result
    assert searched.mean_diff() > plain.mean_diff()


def test_agent_playouts_end_every_game_and_score_from_the_viewer():
    games = [LostCitiesGame.from_seed(s) for s in range(6)]
    viewers = [s % 2 for s in range(6)]
    values = agent_playouts(games, viewers, list(range(6)), sigma1_agent(), np.arange(6))
    assert all(g.is_terminal for g in games)
    assert list(values) == [g.returns()[v] for g, v in zip(games, viewers, strict=True)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"determinizations": 0}, "determinizations=0: expected an integer >= 1"),
        ({"candidates": -1}, "candidates=-1: expected an integer >= 0"),
        ({"rollout": "oracle"}, "rollout=oracle: expected one of blueprint, heuristic"),
        ({"rollout_play": "wild"}, "rollout_play=wild: expected one of greedy, sampled"),
        ({"blueprint_plies": -1}, "blueprint_plies=-1: expected an integer >= 0"),
        ({"keep": "best"}, "keep=best: expected one of greedy, sampled"),
        ({"rank": "value"}, "rank=value: expected one of probability, regret"),
        ({"margin": -1.0}, "margin=-1.0: expected a finite number >= 0"),
        ({"value_blend": 1.0}, r"value_blend=1.0: expected a number in \[0, 1\)"),
        ({"value_blend": -0.1}, r"value_blend=-0.1: expected a number in \[0, 1\)"),
    ],
)
def test_search_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SearchConfig(**kwargs)


@pytest.mark.parametrize("kwargs", [{"rollout": "blueprint"}, {"keep": "sampled"}])
def test_blueprint_playouts_and_sampled_keeps_need_a_blueprint(kwargs):
    with pytest.raises(ValueError, match="need a blueprint"):
        SearchAgent(None, SearchConfig(**kwargs))


def blueprint_probs(blueprint, game):
    """The blueprint's probabilities (A,) at the game's current decision, as game 0."""
    player = game.current_player
    return blueprint.probs(
        np.array([0]),
        np.array([player], dtype=np.int8),
        game.encode(player)[None],
        game.legal_mask()[None],
    )[0]


def test_one_candidate_is_the_blueprints_most_probable_move():
    blueprint = sigma1_agent()
    agent = SearchAgent(blueprint, SearchConfig(determinizations=4, candidates=1))
    game = LostCitiesGame.from_seed(9)
    prior = blueprint_probs(blueprint, game)
    assert int(decide(agent, game).argmax()) == int(prior.argmax())


class HighIndexFirst:
    """A blueprint that ranks the legal actions by index, highest first."""

    name = "high_index_first"

    def probs(self, games, players, features, masks):
        weights = masks * np.arange(1, masks.shape[1] + 1)
        return weights / weights.sum(axis=1, keepdims=True)


def test_candidates_are_the_blueprints_most_probable_moves():
    """With the plain argmax (margin 0) the search plays one of the blueprint's top 2
    moves when candidates=2, and leaves them when every legal move is a candidate."""
    blueprint = HighIndexFirst()
    top2 = SearchAgent(blueprint, SearchConfig(determinizations=4, candidates=2, margin=0.0))
    every = SearchAgent(blueprint, SearchConfig(determinizations=4, candidates=0, margin=0.0))
    game, left_top2 = LostCitiesGame.from_seed(3), 0
    while not game.is_terminal:
        legal = np.flatnonzero(game.legal_mask())
        assert int(decide(top2, game).argmax()) in legal[-2:]
        move = int(decide(every, game).argmax())
        left_top2 += move not in legal[-2:]
        game.apply(move)
    assert left_top2 > 0


class LowestFirstHighScores:
    """A regret-matching-like blueprint: all its probability on the lowest legal index,
    and regret scores that order the rest highest index first."""

    name = "lowest_first"

    def probs(self, games, players, features, masks):
        out = np.zeros(masks.shape)
        out[np.arange(len(masks)), masks.argmax(axis=1)] = 1.0
        return out

    def scores(self, games, players, features, masks):
        scores = np.arange(masks.shape[1], dtype=np.float64)[None, :] - masks.shape[1]
        return np.where(self.probs(games, players, features, masks) > 0, 1.0, scores)


@pytest.mark.parametrize("rank", RANK_RULES)
def test_rank_regret_takes_the_candidates_regret_matching_leaves_at_zero(rank):
    """Two candidates, plain argmax: the kept move (the most probable) and the next one by
    probability (index order among the zeros) or, with rank=regret, by regret score."""
    agent = SearchAgent(
        LowestFirstHighScores(),
        SearchConfig(determinizations=4, candidates=2, margin=0.0, rank=rank),
    )
    game, second = LostCitiesGame.from_seed(3), 0
    while not game.is_terminal:
        legal = np.flatnonzero(game.legal_mask())
        allowed = legal[:2] if rank == "probability" else legal[[0, -1]]
        move = int(decide(agent, game).argmax())
        assert move in allowed
        second += len(legal) > 2 and move == allowed[1]
        game.apply(move)
    assert second > 0  # the second candidate is played, so it was searched


def test_sampled_keep_plays_the_move_drawn_from_the_blueprint():
    """With one candidate the search plays its kept move: under keep=sampled, the draw
    from the blueprint's probabilities on the SEARCH_KEEP stream of (seed, game,
    decision); sigma_1 explores 10% of the time, so over a whole game it leaves its
    argmax."""
    blueprint = sigma1_agent()
    config = SearchConfig(determinizations=2, candidates=1, keep="sampled", seed=4)
    agent = SearchAgent(blueprint, config)
    game, off_argmax = LostCitiesGame.from_seed(11), 0
    while not game.is_terminal:
        prior = blueprint_probs(blueprint, game)
        decision = 2 * game.turns + game.phase
        drawn = Stream(stream_key(4, 0, decision, 0, Purpose.SEARCH_KEEP)).choice(prior)
        move = int(decide(agent, game).argmax())
        assert move == drawn and game.legal_mask()[move] == 1
        off_argmax += move != int(prior.argmax())
        game.apply(move)
    assert off_argmax > 0


def test_agent_steps_advance_the_given_number_of_plies():
    from lostcities.eval.search import agent_steps

    games = [LostCitiesGame.from_seed(s) for s in range(3)]
    agent_steps(games, [1, 2, 3], sigma1_agent(), np.arange(3), plies=5)
    # a turn is two decisions (play or discard, then draw): 5 plies end in turn 2's draw
    assert all((g.turns, g.phase) == (2, 1) for g in games)


def test_blueprint_plies_change_what_the_playouts_measure():
    game = LostCitiesGame.from_seed(21)
    plain = SearchAgent(sigma1_agent(), SearchConfig(determinizations=8, margin=0.0))
    mixed = SearchAgent(
        sigma1_agent(), SearchConfig(determinizations=8, margin=0.0, blueprint_plies=4)
    )
    seen = []
    for agent in (plain, mixed):
        values = []
        agent._pick = lambda block, learned=None, values=values: values.append(block.copy()) or 0
        decide(agent, game)
        seen.append(values[0])
    assert seen[0].shape == seen[1].shape
    assert not np.array_equal(seen[0], seen[1])  # sampled sigma_1 plies, then the greedy rule
