"""Evaluate trained Lost Cities runs against the bots, paired with sigma_1.

    lostcities evaluate RUN0.pt RUN1.pt RUN2.pt --games 400 \\
        --agents policy,current,sdcfr --play greedy,sampled --json report.json

(or ``python -m lostcities.cli.evaluate``; the options are the fields of EvaluateConfig,
lostcities/cli/config.py).

Each checkpoint is one training seed. For every agent kind (lostcities/eval/agents.py),
play mode and bot, the agent plays ``--games`` games (deals, seats and bot seeds fixed by
``--seed``), and so does sigma_1 (the runs' initial strategy, played once: the same for
every checkpoint) played the same way on the same games; the paired gain is the mean
per-game difference (agent minus sigma_1) of the win indicator (draw = 1/2) and of the
score difference, with a 95% normal interval. The table gives, over the checkpoints, the
mean and min..max of the win rate, score difference and gains, and the interval of the
gain over all pairs of all checkpoints.

``--search K`` plays every agent, and sigma_1 with it, through the play-time search of
lostcities/eval/search.py (K redeals per decision; ``--search-*`` set the rest) instead
of the play modes; the table then also gives the search's milliseconds per move.

Learning over a run: ``--iteration K`` evaluates the agents as they were after iteration
K (sdcfr, current; the default is the file's last), and ``--versus-iteration J`` pairs
them with the same run's agent after iteration J, played the same way on the same games,
instead of sigma_1 (``--iteration 20 --versus-iteration 1``: has the run improved on its
first iteration?). ``--br-games N`` adds each agent's best-response margin
(lostcities/eval/br.py: a search best response's mean score difference against it, the
searcher's model of the agent drawing its own randomness), the baseline's with
``--versus-iteration``, and their paired difference on the same deals.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from statistics import fmean

import torch

from lostcities.cli.config import EVALUATE_CROSS_RULES, EvaluateConfig
from lostcities.cli.options import parse
from lostcities.eval.agents import agents_from_checkpoint
from lostcities.eval.br import best_response_match
from lostcities.eval.evaluators import evaluation_match
from lostcities.eval.match import normal_interval, paired_gain, pooled_paired_gain
from lostcities.eval.search import SearchAgent


def parse_args(argv: Sequence[str] | None) -> EvaluateConfig:
    """The command line as a checked EvaluateConfig (lostcities/cli/config.py); the
    search's streams are keyed by the match seed."""
    cfg = parse(
        EvaluateConfig,
        argv,
        prog="lostcities evaluate",
        description=__doc__.split("\n\n")[0],
        cross=EVALUATE_CROSS_RULES,
    )
    if cfg.search is not None:
        cfg = replace(cfg, search=replace(cfg.search, seed=cfg.seed))
    return cfg


def play_modes(cfg: EvaluateConfig) -> list[str]:
    """The play modes of the table: ``search`` under search (its choices are one-hot, so
    sampled and greedy coincide), else the configured ones."""
    return ["search"] if cfg.search is not None else cfg.play


def evaluate_checkpoint(
    path: str, kinds: Sequence[str], cfg: EvaluateConfig, iteration: int | None = None
) -> dict:
    """{(kind, play, bot): (MatchResult, search ms per move or None)} for the agents
    ``kinds`` of one checkpoint (as after ``iteration``; None: its last), {("br", kind):
    the best response's MatchResult} with ``--br-games``, and {"initial_strategy": name}."""
    wanted = [*kinds, "sigma1"] if "sigma1" not in kinds else list(kinds)
    agents = agents_from_checkpoint(path, wanted, seed=cfg.seed, iteration=iteration)
    out = {"initial_strategy": agents["sigma1"].rule}
    for play in play_modes(cfg):
        for bot in cfg.bots:
            for kind in kinds:
                agent, mode = agents[kind], play
                if play == "search":
                    agent, mode = SearchAgent(agent, cfg.search), "greedy"
                match = evaluation_match(
                    agent, bot, cfg.games, cfg.seed, cfg.batch_size, play=mode
                ).result
                per_move = 1000 * agent.seconds / agent.decisions if play == "search" else None
                out[(kind, play, bot)] = (match, per_move)
    if cfg.br_games and "sigma1" not in kinds:  # sigma_1 is a baseline, never the agent
        models = agents_from_checkpoint(path, kinds, seed=cfg.seed + 1, iteration=iteration)
        for kind in kinds:
            match = best_response_match(agents[kind], models[kind], cfg.br_games, cfg.seed)
            out[("br", kind)] = match.result
    return out


def _evaluate_in_worker(
    path: str, kinds: Sequence[str], cfg: EvaluateConfig, iteration: int | None
) -> dict:
    torch.set_num_threads(cfg.threads)
    return evaluate_checkpoint(path, kinds, cfg, iteration)


def pair_with_baseline(agent_results: list[dict], baselines: list[dict]) -> list[dict]:
    """Each checkpoint's {(kind, play, bot): (agent's MatchResult, the baseline's, ms per
    move)} and {("br", kind): (the best response's MatchResult against the agent, against
    the baseline or None)}. ``baselines``: one result (sigma_1, played once from the first
    checkpoint: every checkpoint must share it), or one per checkpoint (its own agents of
    an earlier iteration)."""
    paired = []
    for index, result in enumerate(agent_results):
        baseline = baselines[index if len(baselines) > 1 else 0]
        if result["initial_strategy"] != baseline["initial_strategy"]:
            raise ValueError(
                f"checkpoints start from different initial strategies "
                f"({baseline['initial_strategy']!r} and {result['initial_strategy']!r}): "
                "evaluate them separately"
            )
        pairs = {}
        for key, value in result.items():
            if key == "initial_strategy":
                continue
            if key[0] == "br":
                pairs[key] = (value, baseline.get(key))
                continue
            kind, play, bot = key
            match, per_move = value
            own = baseline.get((kind, play, bot)) or baseline[("sigma1", play, bot)]
            pairs[key] = (match, own[0], per_move)
        paired.append(pairs)
    return paired


def _spread(values: list[float], fmt: str) -> str:
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(fmean(values), fmt)} ({format(min(values), fmt)}..{format(max(values), fmt)})"


def _table_row(kind: str, play: str, bot: str, triples: list) -> tuple[str, dict]:
    """One (agent, play, bot) line of the table and its JSON row; ``triples``: per
    checkpoint (agent's MatchResult, baseline's MatchResult, search ms per move or None)."""
    pairs = [(a, b) for a, b, _ in triples]
    per_move = [ms for _, _, ms in triples if ms is not None]
    win = [a.win_rate() for a, _ in pairs]
    diff = [a.mean_diff() for a, _ in pairs]
    base = [b.win_rate() for _, b in pairs]
    per_seed = [paired_gain(a, b) for a, b in pairs]
    pooled = pooled_paired_gain(pairs)
    lo, hi = pooled.win_rate_ci
    slo, shi = pooled.score_diff_ci
    line = (
        f"| {kind} | {play} | {bot} | {_spread(win, '.3f')} | "
        f"{_spread(diff, '+.1f')} | {_spread(base, '.3f')} | "
        f"{pooled.win_rate:+.3f} [{lo:+.3f}, {hi:+.3f}] | "
        f"{pooled.score_diff:+.1f} [{slo:+.1f}, {shi:+.1f}] |"
        + (f" {_spread(per_move, '.1f')} |" if per_move else "")
    )
    row = {
        "agent": kind,
        "play": play,
        "bot": bot,
        "win_rate": win,
        "score_diff": diff,
        "sigma1_win_rate": base,
        "sigma1_score_diff": [b.mean_diff() for _, b in pairs],
        "gain_win_rate": [g.win_rate for g in per_seed],
        "gain_win_rate_ci": [g.win_rate_ci for g in per_seed],
        "gain_score_diff": [g.score_diff for g in per_seed],
        "gain_score_diff_ci": [g.score_diff_ci for g in per_seed],
        "pooled_gain_win_rate": pooled.win_rate,
        "pooled_gain_win_rate_ci": pooled.win_rate_ci,
        "pooled_gain_score_diff": pooled.score_diff,
        "pooled_gain_score_diff_ci": pooled.score_diff_ci,
        "search_ms_per_move": per_move,
        # per game, for re-analysis without replaying: agent minus bot score
        "score_diffs": [list(a.diffs) for a, _ in pairs],
        "sigma1_score_diffs": list(pairs[0][1].diffs),
    }
    return line, row


def report(results: list[dict], cfg: EvaluateConfig) -> tuple[str, list[dict]]:
    """Markdown table and JSON rows over the checkpoints."""
    baseline = (
        "sigma_1"
        if cfg.versus_iteration is None
        else f"the run's agent after iteration {cfg.versus_iteration}"
    )
    at = "" if cfg.iteration is None else f"agents after iteration {cfg.iteration}; "
    lines = [
        f"{len(results)} checkpoint(s), {at}{cfg.games} games per bot, match seed {cfg.seed}; "
        f"mean (min..max over checkpoints); gain = agent minus {baseline} on the same games, "
        "95% interval over the games (each game's differences averaged over the checkpoints)",
        "",
        "| agent | play | bot | win rate | score diff | baseline win rate | gain win rate "
        "[95%] | gain score [95%] |" + (" ms/move |" if cfg.search is not None else ""),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
        + (" ---: |" if cfg.search is not None else ""),
    ]
    if cfg.search is not None:
        lines[0] += f"; search: {cfg.search}"
    rows = []
    for kind in cfg.agents:
        for play in play_modes(cfg):
            for bot in cfg.bots:
                line, row = _table_row(kind, play, bot, [r[(kind, play, bot)] for r in results])
                lines.append(line)
                rows.append(row)
    if cfg.br_games:
        lines += ["", *best_response_report(results, cfg, rows)]
    return "\n".join(lines), rows


def best_response_report(results: list[dict], cfg: EvaluateConfig, rows: list) -> list[str]:
    """The best response's margin against each agent (and the baseline's, and their paired
    difference: agent's margin minus the baseline's, pooled over the checkpoints)."""
    lines = [
        f"best response ({cfg.br_games} games per agent): its mean score difference against "
        "the agent, 95% interval over the games",
        "",
        "| agent | margin [95%] | baseline's margin | margin minus baseline's [95%] |",
        "| --- | ---: | ---: | ---: |",
    ]
    for kind in cfg.agents:
        against = [r[("br", kind)] for r in results]  # (vs agent, vs baseline or None)
        margins = [a.mean_diff() for a, _ in against]
        pooled = [sum(d) / len(d) for d in zip(*(a.diffs for a, _ in against), strict=True)]
        low, high = normal_interval([float(x) for x in pooled])
        row = {"agent": kind, "br_margin": margins, "br_margin_ci": (low, high)}
        text = f"| {kind} | {_spread(margins, '+.1f')} [{low:+.1f}, {high:+.1f}] |"
        if all(b is not None for _, b in against):
            base = [b.mean_diff() for _, b in against]
            gain = pooled_paired_gain([(a, b) for a, b in against])
            glo, ghi = gain.score_diff_ci
            text += f" {_spread(base, '+.1f')} | {gain.score_diff:+.1f} [{glo:+.1f}, {ghi:+.1f}] |"
            row |= {"baseline_br_margin": base, "br_margin_change": gain.score_diff,
                    "br_margin_change_ci": gain.score_diff_ci}  # fmt: skip
        else:
            text += " | |"
        lines.append(text)
        rows.append(row)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    torch.set_num_threads(cfg.threads)
    start = time.perf_counter()
    if cfg.versus_iteration is None:
        # sigma_1 is the same rule for every checkpoint (checked): it plays once, as task 0
        baselines = [(cfg.checkpoints[0], ["sigma1"], cfg, None)]
    else:  # each run against its own earlier agents
        baselines = [(path, cfg.agents, cfg, cfg.versus_iteration) for path in cfg.checkpoints]
    tasks = baselines + [(path, cfg.agents, cfg, cfg.iteration) for path in cfg.checkpoints]
    try:
        if cfg.jobs > 1:  # one process per task: the matches are independent
            context = multiprocessing.get_context("spawn")
            with context.Pool(min(cfg.jobs, len(tasks))) as pool:
                done = pool.starmap(_evaluate_in_worker, tasks)
        else:
            done = [evaluate_checkpoint(*task) for task in tasks]
        results = pair_with_baseline(done[len(baselines) :], done[: len(baselines)])
    except (OSError, ValueError) as e:  # CheckpointError is a ValueError
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"evaluated in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    table, rows = report(results, cfg)
    print(table)
    if cfg.json:
        with open(cfg.json, "w") as f:
            json.dump(
                {
                    "checkpoints": cfg.checkpoints,
                    "games": cfg.games,
                    "seed": cfg.seed,
                    "search": str(cfg.search) if cfg.search is not None else None,
                    "rows": rows,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
