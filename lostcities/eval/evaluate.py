"""Evaluating learned strategies.

Small games: exact exploitability (NashConv and exploitability = NashConv / 2,
in chips) of the policy network and of the current regret-matching policy.
Lost Cities: the policy network plays each configured bot over a fixed set of
deals (seats alternate), with forward passes batched across the games in
flight; win rate with a 95% Wilson interval, mean score difference, and the
network's play statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lostcities.cfr.exploitability import GameTree
from lostcities.config import EvalConfig
from lostcities.eval.arena import MatchResult, arena_deal_seed
from lostcities.eval.opponents import make_bot
from lostcities.games import lost_cities_spec as spec
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Purpose, Stream, stream_key

# policy_fn(features float32 (n, d), masks uint8 (n, A)) -> probabilities (n, A)
PolicyFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
# players int8 (n,), features, masks -> probabilities
PlayerPolicyFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class SmallGameEvaluator:
    """Exact exploitability on Kuhn or Leduc; the tree is walked once."""

    def __init__(self, root) -> None:
        self.tree = GameTree.build(root)

    def evaluate(self, policy_fn: PolicyFn, current_fn: PlayerPolicyFn) -> dict[str, float]:
        policy = self.tree.evaluate(self.tree.tabulate(policy_fn))
        players = np.asarray(self.tree.infoset_player, dtype=np.int8)
        current = self.tree.evaluate(
            self.tree.tabulate(lambda features, masks: current_fn(players, features, masks))
        )
        return {
            "eval/nash_conv": policy.nash_conv,
            "eval/exploitability": policy.exploitability,
            "eval/current_nash_conv": current.nash_conv,
            "eval/current_exploitability": current.exploitability,
        }


@dataclass
class NetworkMatch:
    result: MatchResult
    colors_opened: float  # mean expeditions started per game by the network
    cards_per_color: float  # mean cards on an opened expedition
    score_per_color: float  # mean score of an opened expedition


def play_network_match(
    policy_fn: PolicyFn,
    bot_name: str,
    games: int,
    seed: int,
    batch_size: int,
    max_turns: int = spec.DEFAULT_MAX_TURNS,
) -> NetworkMatch:
    """The network (sampling from ``policy_fn``) against ``bot_name``.

    Game i uses deal ``arena_deal_seed(seed, i)`` with the network in seat i % 2,
    so every evaluation with the same seed plays the same deals.
    """
    scores_net, scores_bot, capped = [0] * games, [0] * games, 0
    opened, cards, color_scores = 0, 0, 0
    for first in range(0, games, batch_size):
        indices = range(first, min(games, first + batch_size))
        tables = {i: LostCitiesGame.from_seed(arena_deal_seed(seed, i), max_turns) for i in indices}
        bots = {
            i: make_bot(bot_name, stream_key(seed, i, 1, 0, Purpose.EVALUATION)) for i in indices
        }
        choices = {i: Stream(stream_key(seed, i, 2, 0, Purpose.EVALUATION)) for i in indices}
        live = set(indices)
        while live:
            net_turn = []
            for i in sorted(live):
                game = tables[i]
                # Bots move until the network's seat is to act (or the game ends).
                while not game.is_terminal and game.current_player != i % 2:
                    game.apply(bots[i].act(game))
                if game.is_terminal:
                    live.discard(i)
                else:
                    net_turn.append(i)
            if not net_turn:
                break
            features = np.stack([tables[i].encode(i % 2) for i in net_turn])
            masks = np.stack([tables[i].legal_mask() for i in net_turn])
            probs = policy_fn(features, masks)  # one batched forward for all games in flight
            for row, i in enumerate(net_turn):
                tables[i].apply(choices[i].choice(probs[row] * masks[row]))
        for i in indices:
            game, seat = tables[i], i % 2
            scores_net[i], scores_bot[i] = game.scores()[seat], game.scores()[1 - seat]
            capped += game.capped
            for color, score in enumerate(game.expedition_scores(seat)):
                played = len(game.expedition(seat, color))
                if played:
                    opened += 1
                    cards += played
                    color_scores += score
    result = MatchResult("network", bot_name, tuple(scores_net), tuple(scores_bot), capped)
    return NetworkMatch(
        result, opened / games, cards / max(opened, 1), color_scores / max(opened, 1)
    )


class LostCitiesEvaluator:
    def __init__(self, cfg: EvalConfig, max_turns: int) -> None:
        for name in cfg.opponents:
            make_bot(name, 0)  # fail fast on an unknown bot name
        self.cfg = cfg
        self.max_turns = max_turns

    def evaluate(
        self, policy_fn: PolicyFn, current_fn: PlayerPolicyFn | None = None
    ) -> dict[str, float]:
        """Matches of the policy network against every configured bot. ``current_fn``
        (the regret-matching policy) is accepted for a uniform evaluator interface but not
        played: on Lost Cities only the average strategy is evaluated."""
        metrics: dict[str, float] = {}
        for name in self.cfg.opponents:
            match = play_network_match(
                policy_fn, name, self.cfg.games, self.cfg.seed, self.cfg.batch_size, self.max_turns
            )
            low, high = match.result.win_rate_ci()
            metrics.update(
                {
                    f"eval/{name}/win_rate0": match.result.win_rate(),
                    f"eval/{name}/win_rate0_low": low,
                    f"eval/{name}/win_rate0_high": high,
                    f"eval/{name}/score_diff": match.result.mean_diff(),
                    f"eval/{name}/score": float(np.mean(match.result.scores_a)),
                    f"eval/{name}/colors_opened": match.colors_opened,
                    f"eval/{name}/cards_per_opened_color": match.cards_per_color,
                    f"eval/{name}/score_per_opened_color": match.score_per_color,
                    f"eval/{name}/capped": match.result.capped,
                }
            )
        return metrics
