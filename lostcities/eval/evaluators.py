"""The training run's evaluators (``evaluate(run) -> {metric: value}``, ``run`` the agent
as it stands: lostcities.cfr.trainer.AgentView, never the trainer), and the evaluation's
games.

Small games: exact exploitability (NashConv and exploitability = NashConv / 2,
in chips) of the policy network, the current regret-matching policy and single Deep CFR.
Lost Cities: the run's agent (policy network, current strategy or single Deep
CFR; sampled or greedy) plays each configured bot over a fixed set of deals
(seats alternate), with forward passes batched across the games in flight
(lostcities/eval/match.py); win rate with a 95% Wilson interval, mean score difference,
the agent's play statistics, and its paired gain over sigma_1 played the same way on the
same games. ``python -m lostcities.cli.evaluate`` plays the same games from checkpoints.
"""

from __future__ import annotations

import numpy as np

from lostcities.cfr.exploitability import GameTree
from lostcities.cfr.policy import iteration_strategies
from lostcities.cfr.trainer import AgentView
from lostcities.config import EvalConfig
from lostcities.eval.agents import Agent, earlier_agent, run_agent
from lostcities.eval.br import best_response_match, head_to_head
from lostcities.eval.match import MatchResult, PlayedMatch, paired_gain, play_match
from lostcities.eval.players import AgentPlayer, BotPlayer
from lostcities.games import lost_cities_spec as spec
from lostcities.rng import EvaluationRole, Purpose, stream_key


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

    def evaluate(self, run: AgentView) -> dict[str, float]:
        policy = self.tree.evaluate(self.tree.tabulate(run.policy_probs))
        current_fn = self._with_players(run.regret_matching_probs)
        current = self.tree.evaluate(self.tree.tabulate(current_fn))
        metrics = {
            "eval/nash_conv": policy.nash_conv,
            "eval/exploitability": policy.exploitability,
            "eval/current_nash_conv": current.nash_conv,
            "eval/current_exploitability": current.exploitability,
        }
        per_iteration = run.iteration_advantage_nets
        done = len(self.iteration_tables)
        if per_iteration[0]:
            # an iteration's table never changes once trained: tabulate only the new ones
            new = [nets[done:] for nets in per_iteration]
            for strategy in iteration_strategies(
                run.spec.network,
                run.spec.traversal,
                new,
                run.dims,
                run.spec.batch_invariant,
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


def evaluation_match(
    agent: Agent,
    bot_name: str,
    games: int,
    seed: int,
    batch_size: int,
    max_turns: int = spec.DEFAULT_MAX_TURNS,
    play: str = "sampled",
) -> PlayedMatch:
    """``agent`` against ``bot_name``, its rows turned into actions by ``play`` (``sampled``
    or ``greedy``, see agents.choose_actions), ``batch_size`` games in flight.

    Game i uses deal ``arena_deal_seed(seed, i)`` with the agent in seat i % 2, a bot of its
    own and the agent's choice stream keyed by (seed, i): every agent evaluated with the
    same seed plays the same deals, seats and bot seeds, so two agents' results pair up
    game by game (match.paired_gain).
    """
    player = AgentPlayer(
        agent, play, lambda i: stream_key(seed, i, EvaluationRole.AGENT, 0, Purpose.EVALUATION)
    )
    bot = BotPlayer.per_game(
        bot_name, lambda i: stream_key(seed, i, EvaluationRole.BOT, 0, Purpose.EVALUATION)
    )
    return play_match(player, bot, games, seed, max_turns, batch_size)


class LostCitiesEvaluator:
    """Matches of the run's agent (``eval.agent``, played ``eval.play``) against every
    configured bot; with ``eval.paired_baseline`` also sigma_1 played the same way on the
    same games (computed once per run: it never changes), and the paired gain over it.
    With ``eval.br_games`` a search best response's margin against the agent
    (``eval/br/*``), with ``eval.h2h_games`` the agent against the run's agent of
    iteration ``eval.h2h_iteration`` (``eval/h2h/*``): lostcities/eval/br.py."""

    def __init__(self, cfg: EvalConfig, max_turns: int) -> None:
        # eval.opponents, eval.agent and eval.play: validated by lostcities/config_checks.py
        self.cfg = cfg
        self.max_turns = max_turns
        self.baseline: dict[str, MatchResult] = {}  # bot name -> sigma_1's match

    def match(self, agent: Agent, bot: str) -> PlayedMatch:
        cfg = self.cfg
        return evaluation_match(
            agent, bot, cfg.games, cfg.seed, cfg.batch_size, self.max_turns, cfg.play
        )

    def evaluate(self, run: AgentView) -> dict[str, float]:
        agent = run_agent(run, self.cfg.agent, self.cfg.seed)
        metrics = self.progress(run, agent)
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
                    f"eval/{name}/colors_opened": match.stats.colors_opened,
                    f"eval/{name}/cards_per_opened_color": match.stats.cards_per_color,
                    f"eval/{name}/score_per_opened_color": match.stats.score_per_color,
                    f"eval/{name}/capped": match.result.capped,
                }
            )
            if self.cfg.paired_baseline:
                if name not in self.baseline:
                    sigma1 = run_agent(run, "sigma1", self.cfg.seed)
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

    def progress(self, run: AgentView, agent: Agent) -> dict[str, float]:
        """``eval/br/*`` and ``eval/h2h/*``: the best response's margin and the earlier
        agent's match (each when asked for)."""
        cfg, metrics = self.cfg, {}
        if cfg.br_games:
            model = run_agent(run, cfg.agent, stream_key(cfg.seed, 1, 0, 0, Purpose.BR_MODEL))
            match = best_response_match(
                agent, model, cfg.br_games, cfg.seed, cfg.br_redeals, cfg.br_candidates,
                self.max_turns, cfg.br_agent_plies,
            )  # fmt: skip
            metrics.update(_match_metrics("eval/br", match.result))
        if cfg.h2h_games and run.iteration > cfg.h2h_iteration:
            earlier = earlier_agent(run, cfg.agent, cfg.h2h_iteration, cfg.seed)
            match = head_to_head(
                agent, earlier, cfg.h2h_games, cfg.seed, cfg.batch_size, self.max_turns
            )
            metrics.update(_match_metrics("eval/h2h", match.result))
        return metrics


def _match_metrics(prefix: str, result: MatchResult) -> dict[str, float]:
    """Player A's win rate and mean score difference, each with its 95% interval."""
    low, high = result.win_rate_ci()
    diff_low, diff_high = result.mean_diff_ci()
    return {
        f"{prefix}/win_rate": result.win_rate(),
        f"{prefix}/win_rate_low": low,
        f"{prefix}/win_rate_high": high,
        f"{prefix}/score_diff": result.mean_diff(),
        f"{prefix}/score_diff_low": diff_low,
        f"{prefix}/score_diff_high": diff_high,
    }
