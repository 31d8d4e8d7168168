"""Exact tree walks over the small games: the deliberately slow, independent
reference for the package evaluator :mod:`lostcities.cfr.exploitability`.

Kept only as a cross-check, never for speed: it recurses over the game
wrappers and looks policies up by information-state string, sharing no code
and no data layout with the evaluator's flat level-by-level arrays, so
``tests/cfr/test_exploitability.py`` can compare the two on random policies.
Known answers (game values, NashConv) are tested there, with the package
evaluator. The game tests use :func:`histories` to enumerate the tree.

A *policy* is a callable ``policy(game) -> sequence of NUM_ACTIONS
probabilities`` evaluated at decision nodes (zero on illegal actions);
:func:`tabular` turns a dict ``information_state -> probabilities`` into one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence

from lostcities.games.small_game import SmallGame

Policy = Callable[[SmallGame], Sequence[float]]


def histories(root: SmallGame) -> Iterator[tuple[tuple[int, ...], SmallGame]]:
    """Every state below ``root`` (itself included), depth first, with the
    action history that leads to it from ``root``."""
    stack = [((), root)]
    while stack:
        history, game = stack.pop()
        yield history, game
        if game.is_terminal:
            continue
        actions = [a for a, _ in game.chance_outcomes()] if game.is_chance else game.legal_actions()
        for action in reversed(actions):
            stack.append((history + (action,), game.child(action)))


def tabular(table: Mapping[str, Sequence[float]]) -> Policy:
    """A policy that looks up the acting player's information-state string."""

    def policy(game: SmallGame) -> Sequence[float]:
        return table[game.information_state(game.current_player)]

    return policy


def expected_returns(game: SmallGame, policy: Policy) -> tuple[float, float]:
    """Exact expected returns of both players when both play ``policy``."""
    if game.is_terminal:
        return game.returns()
    if game.is_chance:
        branches = game.chance_outcomes()
    else:
        probs = policy(game)
        branches = [(a, probs[a]) for a in game.legal_actions() if probs[a] > 0.0]
    v0 = v1 = 0.0
    for action, prob in branches:
        c0, c1 = expected_returns(game.child(action), policy)
        v0 += prob * c0
        v1 += prob * c1
    return v0, v1


def best_response_value(root: SmallGame, policy: Policy, player: int) -> float:
    """Exact value for ``player`` of a best response to ``policy`` (played by
    the other player). Perfect recall makes the greedy choice per information
    set exact: an infoset's action maximises the sum over its histories of
    (chance x opponent reach) x value of the action, with deeper infosets
    already best-responding."""
    # Histories of each of player's infosets, with chance x opponent reach.
    members: dict[str, list[tuple[SmallGame, float]]] = defaultdict(list)

    def collect(game: SmallGame, reach: float) -> None:
        if game.is_terminal:
            return
        if game.is_chance:
            for action, prob in game.chance_outcomes():
                collect(game.child(action), reach * prob)
        elif game.current_player == player:
            members[game.information_state(player)].append((game, reach))
            for action in game.legal_actions():
                collect(game.child(action), reach)
        else:
            probs = policy(game)
            for action in game.legal_actions():
                if probs[action] > 0.0:
                    collect(game.child(action), reach * probs[action])

    collect(root, 1.0)
    chosen: dict[str, int] = {}

    def best_action(key: str) -> int:
        if key not in chosen:
            group = members[key]
            actions = group[0][0].legal_actions()
            q = [sum(reach * value(game.child(a)) for game, reach in group) for a in actions]
            chosen[key] = actions[max(range(len(actions)), key=q.__getitem__)]
        return chosen[key]

    def value(game: SmallGame) -> float:
        if game.is_terminal:
            return game.returns()[player]
        if game.is_chance:
            return sum(prob * value(game.child(a)) for a, prob in game.chance_outcomes())
        if game.current_player == player:
            return value(game.child(best_action(game.information_state(player))))
        probs = policy(game)
        return sum(probs[a] * value(game.child(a)) for a in game.legal_actions() if probs[a] > 0)

    return value(root)
