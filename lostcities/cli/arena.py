"""Match two Lost Cities players, baseline bots or trained agents, and print a summary.

lostcities arena cautious random --games 400 --seed 0
lostcities arena outputs/DAY/TIME_lost_cities/agent.pt cautious --agent sdcfr
lostcities arena outputs/DAY/TIME_lost_cities/agent.pt committer --search 64

(or ``python -m lostcities.cli.arena``; the options are the fields of ArenaConfig,
lostcities/cli/config.py). A player is a bot name or the path of a run's agent file (or a
training checkpoint); a file plays its ``--agent`` kind (default: single Deep CFR when the
file has the per-iteration nets, else the current strategy), moves chosen ``--play``
greedy or sampled, or with ``--search K`` through play-time search over that agent
(lostcities/eval/search.py; the ``--search-*`` options as in lostcities.cli.evaluate).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from lostcities.cli.agent_options import load_agent, searched
from lostcities.cli.config import ARENA_CROSS_RULES, ArenaConfig
from lostcities.cli.options import parse
from lostcities.eval.match import MatchResult, Player, play_match
from lostcities.eval.opponents import BOT_NAMES, make_bot
from lostcities.eval.players import AgentPlayer, BotPlayer
from lostcities.rng import Purpose, stream_key


def parse_args(argv: Sequence[str] | None) -> ArenaConfig:
    """The command line as a checked ArenaConfig (lostcities/cli/config.py)."""
    return parse(
        ArenaConfig,
        argv,
        prog="lostcities arena",
        description="Match two Lost Cities players.",
        cross=ARENA_CROSS_RULES,
    )


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def make_player(name: str, cfg: ArenaConfig, slot: int) -> Player:
    """Player ``slot`` (1: A, 2: B) of the match: a bot by name (one bot, one stream, for the
    whole match), else an agent file (game i's choices from a stream keyed by the slot's seed
    and i; i also keys the agent's per-game state, single Deep CFR's iteration draw, and the
    search's streams). Distinct streams per slot, so a player matched against itself does
    not mirror its twin."""
    if name in BOT_NAMES:
        return BotPlayer.shared(make_bot(name, stream_key(cfg.seed, slot)))
    if not Path(name).is_file():
        raise ValueError(
            f"invalid choice {name!r}: neither a bot ({', '.join(BOT_NAMES)}) "
            "nor an existing agent file or checkpoint"
        )
    seed = stream_key(cfg.seed, slot)
    agent = load_agent(name, cfg.agent, seed)
    if cfg.search is not None:
        agent = searched(agent, replace(cfg.search, seed=seed))
    return AgentPlayer(
        agent,
        cfg.play,
        lambda game: stream_key(seed, game, slot, 0, Purpose.ARENA_AGENT),
        f"{name} [{agent.name}, {cfg.play}]",
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
    cfg = parse_args(argv)
    names = (cfg.player_a, cfg.player_b)
    try:
        player_a, player_b = (make_player(n, cfg, slot) for slot, n in enumerate(names, 1))
    except (OSError, ValueError) as e:  # CheckpointError is a ValueError
        return _fail(str(e))
    start = time.perf_counter()
    # one game after another: a bot's single stream runs through the games in order
    result = play_match(player_a, player_b, cfg.games, cfg.seed, cfg.max_turns).result
    print(format_result(result, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
