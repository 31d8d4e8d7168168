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
from lostcities.eval.br import best_response_match
from lostcities.eval.evaluators import evaluation_match
from lostcities.eval.match import normal_interval, paired_gain, pooled_paired_gain
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
    parser.add_argument(
        "--iteration", type=int, metavar="K", help="the agents after iteration K (default: last)"
    )
    parser.add_argument(
        "--versus-iteration",
        type=int,
        metavar="J",
        dest="versus",
        help="pair with the same run's agent after iteration J instead of sigma_1",
    )
    parser.add_argument(
        "--br-games", type=int, default=0, metavar="N", help="best-response games per agent"
    )
    add_search_arguments(parser)
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.threads < 1:
        parser.error(f"--jobs and --threads must be >= 1, got {args.jobs} and {args.threads}")
    if args.games <= 0 or args.games % 2:
        parser.error(f"--games must be a positive even number (seats alternate), got {args.games}")
    if args.br_games < 0 or args.br_games % 2:
        parser.error(f"--br-games must be an even number >= 0, got {args.br_games}")
    for flag, value in (("--iteration", args.iteration), ("--versus-iteration", args.versus)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be >= 1, got {value}")
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


def evaluate_checkpoint(
    path: str, kinds: Sequence[str], args: argparse.Namespace, iteration: int | None = None
) -> dict:
    """{(kind, play, bot): (MatchResult, search ms per move or None)} for the agents
    ``kinds`` of one checkpoint (as after ``iteration``; None: its last), {("br", kind):
    the best response's MatchResult} with ``--br-games``, and {"initial_strategy": name}."""
    wanted = [*kinds, "sigma1"] if "sigma1" not in kinds else list(kinds)
    agents = agents_from_checkpoint(path, wanted, seed=args.seed, iteration=iteration)
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
    if args.br_games and "sigma1" not in kinds:  # sigma_1 is a baseline, never the agent
        models = agents_from_checkpoint(path, kinds, seed=args.seed + 1, iteration=iteration)
        for kind in kinds:
            match = best_response_match(agents[kind], models[kind], args.br_games, args.seed)
            out[("br", kind)] = match.result
    return out


def _evaluate_in_worker(
    path: str, kinds: Sequence[str], args: argparse.Namespace, iteration: int | None
) -> dict:
    torch.set_num_threads(args.threads)
    return evaluate_checkpoint(path, kinds, args, iteration)


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


def report(results: list[dict], args: argparse.Namespace) -> tuple[str, list[dict]]:
    """Markdown table and JSON rows over the checkpoints."""
    baseline = (
        "sigma_1" if args.versus is None else f"the run's agent after iteration {args.versus}"
    )
    at = "" if args.iteration is None else f"agents after iteration {args.iteration}; "
    lines = [
        f"{len(results)} checkpoint(s), {at}{args.games} games per bot, match seed {args.seed}; "
        f"mean (min..max over checkpoints); gain = agent minus {baseline} on the same games, "
        "95% interval over the games (each game's differences averaged over the checkpoints)",
        "",
        "| agent | play | bot | win rate | score diff | baseline win rate | gain win rate "
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
    if args.br_games:
        lines += ["", *best_response_report(results, args, rows)]
    return "\n".join(lines), rows


def best_response_report(results: list[dict], args: argparse.Namespace, rows: list) -> list[str]:
    """The best response's margin against each agent (and the baseline's, and their paired
    difference: agent's margin minus the baseline's, pooled over the checkpoints)."""
    lines = [
        f"best response ({args.br_games} games per agent): its mean score difference against "
        "the agent, 95% interval over the games",
        "",
        "| agent | margin [95%] | baseline's margin | margin minus baseline's [95%] |",
        "| --- | ---: | ---: | ---: |",
    ]
    for kind in args.agents:
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
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.versus is None:
        # sigma_1 is the same rule for every checkpoint (checked): it plays once, as task 0
        baselines = [(args.checkpoints[0], ["sigma1"], args, None)]
    else:  # each run against its own earlier agents
        baselines = [(path, args.agents, args, args.versus) for path in args.checkpoints]
    tasks = baselines + [(path, args.agents, args, args.iteration) for path in args.checkpoints]
    try:
        if args.jobs > 1:  # one process per task: the matches are independent
            context = multiprocessing.get_context("spawn")
            with context.Pool(min(args.jobs, len(tasks))) as pool:
                done = pool.starmap(_evaluate_in_worker, tasks)
        else:
            done = [evaluate_checkpoint(*task) for task in tasks]
        results = pair_with_baseline(done[len(baselines) :], done[: len(baselines)])
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
