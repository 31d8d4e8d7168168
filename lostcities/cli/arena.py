"""Match two Lost Cities players, baseline bots or trained agents, and print a summary.

python -m lostcities.cli.arena cautious random --games 400 --seed 0
python -m lostcities.cli.arena outputs/DAY/TIME_lost_cities/agent.pt cautious --agent sdcfr
python -m lostcities.cli.arena outputs/DAY/TIME_lost_cities/agent.pt committer --search 64

A player is a bot name or the path of a run's agent file (or a training checkpoint);
a file plays its ``--agent`` kind (default: single Deep CFR when the file has the
per-iteration nets, else the current strategy), moves chosen ``--play`` greedy or sampled,
or with ``--search K`` through play-time search over that agent (lostcities/eval/search.py;
the ``--search-*`` options as in lostcities.cli.evaluate).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lostcities.cli.agent_options import AGENT_CHOICES, load_agent
from lostcities.cli.search_options import add_search_arguments, search_config_from_args, searched
from lostcities.eval.agents import PLAY_MODES
from lostcities.eval.match import MatchResult, Player, play_match
from lostcities.eval.opponents import BOT_NAMES, make_bot
from lostcities.eval.players import AgentPlayer, BotPlayer
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.games.lost_cities_spec import DEFAULT_MAX_TURNS
from lostcities.rng import Purpose, stream_key


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lostcities.cli.arena", description="Match two Lost Cities players."
    )
    player = f"a bot ({', '.join(BOT_NAMES)}) or an agent file / checkpoint"
    parser.add_argument("player_a", metavar="A", help=player)
    parser.add_argument("player_b", metavar="B", help=player)
    parser.add_argument("--games", type=int, default=200, help="games to play (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="match seed (default 0)")
    parser.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="turn cap")
    parser.add_argument(
        "--agent", choices=AGENT_CHOICES, help="kind a file plays (default: sdcfr if it has it)"
    )
    parser.add_argument(
        "--play",
        choices=PLAY_MODES,
        default="sampled",
        help="how an agent picks (default sampled: single Deep CFR was measured strongest so)",
    )
    add_search_arguments(parser)  # an agent file plays through play-time search
    args = parser.parse_args(argv)
    try:
        search_config_from_args(args, 0)  # checked here; keyed per player in make_player
    except ValueError as e:
        parser.error(str(e))
    if args.games <= 0:
        parser.error(f"--games must be positive, got {args.games}")
    try:
        LostCitiesGame.from_seed(0, args.max_turns)  # the game kernel knows its turn range
    except ValueError as e:
        parser.error(f"--max-turns: {e}")
    return args


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def make_player(name: str, args: argparse.Namespace, slot: int) -> Player:
    """Player ``slot`` (1: A, 2: B) of the match: a bot by name (one bot, one stream, for the
    whole match), else an agent file (game i's choices from a stream keyed by the slot's seed
    and i; i also keys the agent's per-game state, single Deep CFR's iteration draw).
    Distinct streams per slot, so a player matched against itself does not mirror its twin."""
    if name in BOT_NAMES:
        return BotPlayer.shared(make_bot(name, stream_key(args.seed, slot)))
    if not Path(name).is_file():
        raise ValueError(
            f"invalid choice {name!r}: neither a bot ({', '.join(BOT_NAMES)}) "
            "nor an existing agent file or checkpoint"
        )
    seed = stream_key(args.seed, slot)
    agent = load_agent(name, args.agent, seed)
    search = search_config_from_args(args, seed)
    if search is not None:
        agent = searched(agent, search)
    return AgentPlayer(
        agent,
        args.play,
        lambda game: stream_key(seed, game, slot, 0, Purpose.ARENA_AGENT),
        f"{name} [{agent.name}, {args.play}]",
    )


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
    names = (args.player_a, args.player_b)
    if args.agent is not None and all(n in BOT_NAMES for n in names):
        return _fail("--agent applies to an agent file, and both players are bots")
    try:
        player_a, player_b = (make_player(n, args, slot) for slot, n in enumerate(names, 1))
    except (OSError, ValueError) as e:  # CheckpointError is a ValueError
        return _fail(str(e))
    start = time.perf_counter()
    # one game after another: a bot's single stream runs through the games in order
    result = play_match(player_a, player_b, args.games, args.seed, args.max_turns).result
    print(format_result(result, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
