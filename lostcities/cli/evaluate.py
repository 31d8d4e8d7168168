"""Evaluate trained Lost Cities runs against the bots, paired with sigma_1.

    python -m lostcities.cli.evaluate RUN0.pt RUN1.pt RUN2.pt --games 400 \\
        --agents policy,current,sdcfr --play greedy,sampled --json report.json

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
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Sequence
from statistics import fmean

import torch

from lostcities.cli.search_options import add_search_arguments, search_config_from_args
from lostcities.eval.agents import AGENT_KINDS, PLAY_MODES, agents_from_checkpoint
from lostcities.eval.evaluators import evaluation_match
from lostcities.eval.match import paired_gain, pooled_paired_gain
from lostcities.eval.opponents import BOT_NAMES
from lostcities.eval.search import SearchAgent

DEFAULT_BOTS = "random,discard_only,eager,cautious,committer,sigma1_greedy"


def _names(text: str, allowed: Sequence[str], flag: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise SystemExit(f"error: {flag} takes names from {', '.join(allowed)}; got {text!r}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lostcities.cli.evaluate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT", help="one per seed")
    parser.add_argument("--agents", default="policy,current,sdcfr", help="agent kinds")
    parser.add_argument("--play", default="greedy,sampled", help="play modes")
    parser.add_argument("--bots", default=DEFAULT_BOTS, help="bots to play")
    parser.add_argument("--games", type=int, default=400, help="games per bot (default 400)")
    parser.add_argument("--seed", type=int, default=12345, help="match seed (default 12345)")
    parser.add_argument("--batch-size", type=int, default=400, help="games stepped together")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument(
        "--jobs", type=int, default=1, help="checkpoints evaluated in parallel processes"
    )
    parser.add_argument("--json", metavar="FILE", help="also write every number here")
    add_search_arguments(parser)
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.threads < 1:
        parser.error(f"--jobs and --threads must be >= 1, got {args.jobs} and {args.threads}")
    if args.games <= 0 or args.games % 2:
        parser.error(f"--games must be a positive even number (seats alternate), got {args.games}")
    args.agents = _names(args.agents, [k for k in AGENT_KINDS if k != "sigma1"], "--agents")
    args.play = _names(args.play, PLAY_MODES, "--play")
    args.bots = _names(args.bots, BOT_NAMES, "--bots")
    try:
        args.search_config = search_config_from_args(args, args.seed)
    except ValueError as e:
        parser.error(str(e))
    if args.search:
        if args.search_value_blend > 0 and args.agents != ["sdcfr"]:
            parser.error(
                "--search-value-blend: only sdcfr has learned advantages to blend, got "
                f"--agents {','.join(args.agents)}"
            )
        args.play = ["search"]  # one-hot choices: sampled and greedy coincide
    return args


def evaluate_checkpoint(path: str, kinds: Sequence[str], args: argparse.Namespace) -> dict:
    """{(kind, play, bot): (MatchResult, search ms per move or None)} for the agents
    ``kinds`` of one checkpoint, and {"initial_strategy": name}."""
    agents = agents_from_checkpoint(path, [*kinds, "sigma1"], seed=args.seed)
    out = {"initial_strategy": agents["sigma1"].rule}
    for play in args.play:
        for bot in args.bots:
            for kind in kinds:
                agent, mode = agents[kind], play
                if play == "search":
                    agent, mode = SearchAgent(agent, args.search_config), "greedy"
                match = evaluation_match(
                    agent, bot, args.games, args.seed, args.batch_size, play=mode
                ).result
                per_move = 1000 * agent.seconds / agent.decisions if play == "search" else None
                out[(kind, play, bot)] = (match, per_move)
    return out


def _evaluate_in_worker(path: str, kinds: Sequence[str], args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    return evaluate_checkpoint(path, kinds, args)


def pair_with_baseline(agent_results: list[dict], baseline: dict) -> list[dict]:
    """Each checkpoint's {(kind, play, bot): (agent's MatchResult, sigma_1's, ms per move)}:
    sigma_1 was played once (from the first checkpoint); every checkpoint must share it."""
    paired = []
    for result in agent_results:
        if result["initial_strategy"] != baseline["initial_strategy"]:
            raise ValueError(
                f"checkpoints start from different initial strategies "
                f"({baseline['initial_strategy']!r} and {result['initial_strategy']!r}): "
                "evaluate them separately"
            )
        pairs = {}
        for key, value in result.items():
            if key != "initial_strategy":
                _, play, bot = key
                match, per_move = value
                pairs[key] = (match, baseline[("sigma1", play, bot)][0], per_move)
        paired.append(pairs)
    return paired


def _spread(values: list[float], fmt: str) -> str:
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(fmean(values), fmt)} ({format(min(values), fmt)}..{format(max(values), fmt)})"


def report(results: list[dict], args: argparse.Namespace) -> tuple[str, list[dict]]:
    """Markdown table and JSON rows over the checkpoints."""
    lines = [
        f"{len(results)} checkpoint(s), {args.games} games per bot, match seed {args.seed}; "
        "mean (min..max over checkpoints); gain = agent minus sigma_1 on the same games, "
        "95% interval over the games (each game's differences averaged over the checkpoints)",
        "",
        "| agent | play | bot | win rate | score diff | sigma1 win rate | gain win rate "
        "[95%] | gain score [95%] |" + (" ms/move |" if args.search else ""),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
        + (" ---: |" if args.search else ""),
    ]
    if args.search:
        lines[0] += f"; search: {args.search_config}"
    rows = []
    for kind in args.agents:
        for play in args.play:
            for bot in args.bots:
                triples = [r[(kind, play, bot)] for r in results]
                pairs = [(a, b) for a, b, _ in triples]
                per_move = [ms for _, _, ms in triples if ms is not None]
                win = [a.win_rate() for a, _ in pairs]
                diff = [a.mean_diff() for a, _ in pairs]
                base = [b.win_rate() for _, b in pairs]
                per_seed = [paired_gain(a, b) for a, b in pairs]
                pooled = pooled_paired_gain(pairs)
                lo, hi = pooled.win_rate_ci
                slo, shi = pooled.score_diff_ci
                lines.append(
                    f"| {kind} | {play} | {bot} | {_spread(win, '.3f')} | "
                    f"{_spread(diff, '+.1f')} | {_spread(base, '.3f')} | "
                    f"{pooled.win_rate:+.3f} [{lo:+.3f}, {hi:+.3f}] | "
                    f"{pooled.score_diff:+.1f} [{slo:+.1f}, {shi:+.1f}] |"
                    + (f" {_spread(per_move, '.1f')} |" if per_move else "")
                )
                rows.append(
                    {
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
                )
    return "\n".join(lines), rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    # sigma_1 is the same rule for every checkpoint (checked): it plays once, as task 0
    tasks = [(args.checkpoints[0], ["sigma1"], args)]
    tasks += [(path, args.agents, args) for path in args.checkpoints]
    try:
        if args.jobs > 1:  # one process per task: the matches are independent
            context = multiprocessing.get_context("spawn")
            with context.Pool(min(args.jobs, len(tasks))) as pool:
                done = pool.starmap(_evaluate_in_worker, tasks)
        else:
            done = [evaluate_checkpoint(*task) for task in tasks]
        results = pair_with_baseline(done[1:], done[0])
    except (OSError, ValueError) as e:  # CheckpointError is a ValueError
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"evaluated in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    table, rows = report(results, args)
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "checkpoints": args.checkpoints,
                    "games": args.games,
                    "seed": args.seed,
                    "search": str(args.search_config) if args.search else None,
                    "rows": rows,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
