"""Evaluating learned strategies.

Small games: exact exploitability (NashConv and exploitability = NashConv / 2,
in chips) of the policy network and of the current regret-matching policy.
Lost Cities: the run's agent (policy network, current strategy or single Deep
CFR; sampled or greedy) plays each configured bot over a fixed set of deals
(seats alternate), with forward passes batched across the games in flight; win
rate with a 95% Wilson interval, mean score difference, the agent's play
statistics, and its paired gain over sigma_1 played the same way on the same
games.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lostcities.cfr.exploitability import GameTree
from lostcities.cfr.policy import iteration_strategies
from lostcities.config import EvalConfig
from lostcities.eval.agents import Agent, agent_probs, choose_actions, trainer_agent
from lostcities.eval.arena import MatchResult, arena_deal_seed, paired_gain
from lostcities.eval.opponents import make_bot
from lostcities.games import lost_cities_spec as spec
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Purpose, Stream, stream_key


class SmallGameEvaluator:
    """Exact exploitability on Kuhn or Leduc; the tree is walked once.

    Three strategies: the policy network (Deep CFR's distilled average), the current
    strategy sigma_{T+1}, and single Deep CFR's average: the mixture of sigma_2..sigma_{T+1}
    (one per iteration's advantage nets) with linear weights 1..T, made exact as one
    behaviour table by ``GameTree.average_strategy`` (own-reach weighting)."""

    def __init__(self, root) -> None:
        self.tree = GameTree.build(root)
        self.players = np.asarray(self.tree.infoset_player, dtype=np.int8)
        self.iteration_tables: list[np.ndarray] = []  # sigma_{t+1} tables, t = 1, 2, ...

    def evaluate(self, trainer) -> dict[str, float]:
        policy = self.tree.evaluate(self.tree.tabulate(trainer.policy_probs))
        current_fn = self._with_players(trainer.regret_matching_probs)
        current = self.tree.evaluate(self.tree.tabulate(current_fn))
        metrics = {
            "eval/nash_conv": policy.nash_conv,
            "eval/exploitability": policy.exploitability,
            "eval/current_nash_conv": current.nash_conv,
            "eval/current_exploitability": current.exploitability,
        }
        per_iteration = trainer.iteration_advantage_nets
        done = len(self.iteration_tables)
        if per_iteration[0]:
            # an iteration's table never changes once trained: tabulate only the new ones
            new = [nets[done:] for nets in per_iteration]
            dims = (trainer.game.encoding_size, trainer.game.num_actions)
            for strategy in iteration_strategies(
                trainer.network_cfg,
                trainer.traversal_cfg,
                new,
                dims,
                trainer.batch_invariant,
                first_iteration=done + 1,
            ):
                self.iteration_tables.append(self.tree.tabulate(self._with_players(strategy)))
            tables = self.iteration_tables[: len(per_iteration[0])]
            weights = np.arange(1, len(tables) + 1, dtype=np.float64)
            average = self.tree.evaluate(self.tree.average_strategy(tables, weights))
            metrics["eval/sdcfr_nash_conv"] = average.nash_conv
            metrics["eval/sdcfr_exploitability"] = average.exploitability
        return metrics

    def _with_players(self, strategy):
        return lambda features, masks: strategy(self.players, features, masks)


@dataclass
class NetworkMatch:
    result: MatchResult
    colors_opened: float  # mean expeditions started per game by the network
    cards_per_color: float  # mean cards on an opened expedition
    score_per_color: float  # mean score of an opened expedition


def play_agent_match(
    agent: Agent,
    bot_name: str,
    games: int,
    seed: int,
    batch_size: int,
    max_turns: int = spec.DEFAULT_MAX_TURNS,
    play: str = "sampled",
) -> NetworkMatch:
    """``agent`` against ``bot_name``, its rows turned into actions by ``play`` (``sampled``
    or ``greedy``, see agents.choose_actions).

    Game i uses deal ``arena_deal_seed(seed, i)`` with the agent in seat i % 2, the bot's
    stream and the agent's choice stream keyed by (seed, i): every agent evaluated with the
    same seed plays the same deals, seats and bot seeds, so two agents' results pair up
    game by game (arena.paired_gain).
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
                # Bots move until the agent's seat is to act (or the game ends).
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
            players = np.array([i % 2 for i in net_turn], dtype=np.int8)
            # one batched call for all games in flight: (n, A)
            states = [tables[i] for i in net_turn]
            probs = agent_probs(agent, np.array(net_turn), players, features, masks, states)
            actions = choose_actions(probs, masks, play, [choices[i] for i in net_turn])
            for i, action in zip(net_turn, actions, strict=True):
                tables[i].apply(action)
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
    result = MatchResult(agent.name, bot_name, tuple(scores_net), tuple(scores_bot), capped)
    return NetworkMatch(
        result, opened / games, cards / max(opened, 1), color_scores / max(opened, 1)
    )


class LostCitiesEvaluator:
    """Matches of the run's agent (``eval.agent``, played ``eval.play``) against every
    configured bot; with ``eval.paired_baseline`` also sigma_1 played the same way on the
    same games (computed once per run: it never changes), and the paired gain over it."""

    def __init__(self, cfg: EvalConfig, max_turns: int) -> None:
        # eval.opponents, eval.agent and eval.play: validated by lostcities/config_checks.py
        self.cfg = cfg
        self.max_turns = max_turns
        self.baseline: dict[str, MatchResult] = {}  # bot name -> sigma_1's match

    def match(self, agent: Agent, bot: str) -> NetworkMatch:
        cfg = self.cfg
        return play_agent_match(
            agent, bot, cfg.games, cfg.seed, cfg.batch_size, self.max_turns, cfg.play
        )

    def evaluate(self, trainer) -> dict[str, float]:
        agent = trainer_agent(trainer, self.cfg.agent, self.cfg.seed)
        metrics: dict[str, float] = {}
        for name in self.cfg.opponents:
            match = self.match(agent, name)
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
            if self.cfg.paired_baseline:
                if name not in self.baseline:
                    sigma1 = trainer_agent(trainer, "sigma1", self.cfg.seed)
                    self.baseline[name] = self.match(sigma1, name).result
                base = self.baseline[name]
                gain = paired_gain(match.result, base)
                metrics.update(
                    {
                        f"eval/{name}/sigma1_win_rate": base.win_rate(),
                        f"eval/{name}/sigma1_score_diff": base.mean_diff(),
                        f"eval/{name}/gain_win_rate": gain.win_rate,
                        f"eval/{name}/gain_win_rate_low": gain.win_rate_ci[0],
                        f"eval/{name}/gain_win_rate_high": gain.win_rate_ci[1],
                        f"eval/{name}/gain_score_diff": gain.score_diff,
                        f"eval/{name}/gain_score_diff_low": gain.score_diff_ci[0],
                        f"eval/{name}/gain_score_diff_high": gain.score_diff_ci[1],
                    }
                )
        return metrics
