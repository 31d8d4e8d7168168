"""The play-time search's command-line options (``--search K``, ``--search-*``), shared
by the front ends that play agents; the search itself is lostcities/eval/search.py."""

from __future__ import annotations

import argparse

from lostcities.eval.agents import Agent
from lostcities.eval.search import (
    KEEP_RULES,
    RANK_RULES,
    ROLLOUT_PLAYS,
    ROLLOUT_POLICIES,
    SearchAgent,
    SearchConfig,
)


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--search K`` and ``--search-*`` options of the commands that play agents
    (lostcities.cli.evaluate, .arena, .play); :func:`search_config_from_args` reads them."""
    group = parser.add_argument_group("play-time search (lostcities/eval/search.py)")
    group.add_argument(
        "--search", type=int, default=0, metavar="K", help="redeals per decision (0: no search)"
    )
    group.add_argument(
        "--search-candidates",
        type=int,
        default=SearchConfig.candidates,
        metavar="N",
        help=f"the agent's N most probable moves (default {SearchConfig.candidates}; 0: all)",
    )
    group.add_argument(
        "--search-rank",
        default=SearchConfig.rank,
        choices=RANK_RULES,
        help="what orders the agent's moves: its probabilities, or regret matching's input "
        "(sdcfr, current; orders the moves of probability 0 too)",
    )
    group.add_argument("--search-margin", type=float, default=SearchConfig.margin, metavar="Z")
    group.add_argument(
        "--search-keep",
        default=SearchConfig.keep,
        choices=KEEP_RULES,
        help="the move played unless another is clearly better: the agent's most probable "
        "(greedy) or one sampled from it",
    )
    group.add_argument("--search-rollout", default=SearchConfig.rollout, choices=ROLLOUT_POLICIES)
    group.add_argument(
        "--search-rollout-play", default=SearchConfig.rollout_play, choices=ROLLOUT_PLAYS
    )
    group.add_argument(
        "--search-blueprint-plies", type=int, default=SearchConfig.blueprint_plies, metavar="P"
    )
    group.add_argument(
        "--search-value-blend",
        type=float,
        default=SearchConfig.value_blend,
        metavar="LAMBDA",
        help="weight in [0, 1) of the agent's learned advantages (sdcfr only) beside its "
        "playout mean in each move's value (default 0: playouts alone)",
    )


def search_config_from_args(args: argparse.Namespace, seed: int) -> SearchConfig | None:
    """The SearchConfig of parsed :func:`add_search_arguments` options (None: ``--search``
    0), its streams keyed by ``seed``. Raises ValueError naming the option at fault."""
    if args.search < 0:
        raise ValueError(f"--search must be >= 0, got {args.search}")
    if not args.search:
        return None
    try:
        return SearchConfig(
            determinizations=args.search,
            candidates=args.search_candidates,
            rank=args.search_rank,
            margin=args.search_margin,
            keep=args.search_keep,
            rollout=args.search_rollout,
            rollout_play=args.search_rollout_play,
            blueprint_plies=args.search_blueprint_plies,
            value_blend=args.search_value_blend,
            seed=seed,
        )
    except ValueError as e:
        raise ValueError(f"--search: {e}") from None


def searched(agent: Agent, config: SearchConfig) -> SearchAgent:
    """``agent`` played through the search of ``config``. Raises ValueError where
    ``--search-value-blend`` asks for learned advantages the agent does not have (only
    lostcities.cli.evaluate searches sigma_1 with a blend, as the baseline it is)."""
    if config.value_blend > 0 and not hasattr(agent, "advantages"):
        raise ValueError(
            f"--search-value-blend: agent {agent.name!r} has no learned advantages to blend "
            "(single Deep CFR, --agent sdcfr, has)"
        )
    return SearchAgent(agent, config)
