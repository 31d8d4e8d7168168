"""Play two baseline bots against each other and print a summary.

python -m lostcities.arena cautious random --games 400 --seed 0
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from lostcities.eval.arena import MatchResult, play_match
from lostcities.eval.opponents import BOT_NAMES, make_bot
from lostcities.games.lost_cities_spec import DEFAULT_MAX_TURNS
from lostcities.rng import stream_key


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lostcities.arena", description="Match two Lost Cities bots."
    )
    parser.add_argument("bot_a", metavar="BOT_A", choices=BOT_NAMES, help="one of %(choices)s")
    parser.add_argument("bot_b", metavar="BOT_B", choices=BOT_NAMES, help="one of %(choices)s")
    parser.add_argument("--games", type=int, default=200, help="games to play (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="match seed (default 0)")
    parser.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="turn cap")
    args = parser.parse_args(argv)
    if args.games <= 0:
        parser.error(f"--games must be positive, got {args.games}")
    return args


def format_result(result: MatchResult, seconds: float) -> str:
    lo, hi = result.win_rate_ci()
    dlo, dhi = result.mean_diff_ci()
    mean_a = sum(result.scores_a) / result.games
    mean_b = sum(result.scores_b) / result.games
    rows = [
        ("games", f"{result.games}"),
        ("A win rate", f"{result.win_rate():.3f}  [{lo:.3f}, {hi:.3f}]  (draw = half a win)"),
        ("W / D / L", f"{result.wins} / {result.draws} / {result.losses}"),
        ("mean diff", f"{result.mean_diff():+.1f}  [{dlo:+.1f}, {dhi:+.1f}]"),
        ("mean score", f"A {mean_a:+.1f}   B {mean_b:+.1f}"),
        ("capped", f"{result.capped}"),
        ("time", f"{seconds:.2f} s"),
    ]
    head = f"A = {result.name_a}  vs  B = {result.name_b}   (95% intervals)"
    return "\n".join([head, *(f"  {k:<11} {v}" for k, v in rows)])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Distinct bot streams, so a bot matched against itself does not mirror its twin.
    bot_a = make_bot(args.bot_a, stream_key(args.seed, 1))
    bot_b = make_bot(args.bot_b, stream_key(args.seed, 2))
    start = time.perf_counter()
    result = play_match(bot_a, bot_b, args.games, args.seed, args.max_turns)
    print(format_result(result, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
