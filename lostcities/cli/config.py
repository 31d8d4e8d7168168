"""The commands' schemas: what ``lostcities evaluate``, ``arena`` and ``play`` take.

As lostcities/config.py for training: one dataclass per command, every field declared with
its rule (``checked(default, rule)``) and documented, and the command line built from it
(lostcities/cli/options.py: ``--batch-size`` is ``batch_size``, ``--search-candidates``
is ``search.candidates``), so a bad value fails as training's do, in one line naming the
key. A field that takes the values of a training field reuses its rule (``rule_of``); the
play-time search is the library's own :class:`~lostcities.eval.search.SearchConfig`. A
command's combinations of values are its cross rules, under its schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from lostcities.cli.options import positional, switched
from lostcities.config import BOT_NAMES, EVAL_AGENTS, PLAY_MODES, EvalConfig, GameConfig
from lostcities.config_checks import CrossRule
from lostcities.config_rules import (
    checked,
    integer,
    label,
    names_from,
    one_of,
    optional,
    optional_label,
    rule_of,
    seed,
    texts,
)
from lostcities.eval.search import SearchConfig
from lostcities.games.lost_cities_spec import DEFAULT_MAX_TURNS

DEFAULT_BOTS = ("random", "discard_only", "eager", "cautious", "committer", "sigma1_greedy")


@dataclass
class EvaluateConfig:
    """``lostcities evaluate``: trained runs against the bots, paired with a baseline."""

    checkpoints: list[str] = positional(texts(), "CHECKPOINT")
    """Agent files or training checkpoints, one per training seed."""
    agents: list[str] = checked(
        rule=names_from(EVAL_AGENTS, empty=False), factory=lambda: ["policy", "current", "sdcfr"]
    )
    """Agent kinds to evaluate (lostcities/eval/agents.py): ``policy`` (the policy
    network), ``current`` (regret matching on the last advantage nets), ``sdcfr`` (single
    Deep CFR)."""
    play: list[str] = checked(
        rule=names_from(PLAY_MODES, empty=False), factory=lambda: ["greedy", "sampled"]
    )
    """How the agents' probabilities become moves: ``greedy`` (the most probable legal
    move) and/or ``sampled``; with ``--search`` the search's choices instead."""
    bots: list[str] = checked(
        rule=names_from(BOT_NAMES, empty=False), factory=lambda: list(DEFAULT_BOTS)
    )
    """The baseline bots every agent plays (lostcities/eval/opponents.py)."""
    games: int = checked(400, rule_of(EvalConfig, "games"))
    """Games per agent kind, play mode and bot, an even number (seats alternate)."""
    seed: int = checked(12345, rule_of(EvalConfig, "seed"))
    """Match seed: deals, seats and bot seeds, the same for every agent and the baseline
    (and the search's streams)."""
    batch_size: int = checked(400, rule_of(EvalConfig, "batch_size"))
    """Games stepped together, so network forwards are batched."""
    threads: int = checked(1, integer(1))
    """torch intra-op threads of each process."""
    jobs: int = checked(1, integer(1))
    """Checkpoints evaluated in parallel processes (1: one after another, in this one)."""
    json: str | None = checked(None, optional_label())
    """Also write every number to this file."""
    iteration: int | None = checked(None, optional(integer(1)))
    """Evaluate the agents as they were after this iteration (sdcfr, current; by default
    the file's last)."""
    versus_iteration: int | None = checked(None, optional(integer(1)))
    """Pair the agents with the same run's agents after this iteration, played the same
    way on the same games, instead of sigma_1 (the runs' initial strategy)."""
    br_games: int = checked(0, rule_of(EvalConfig, "br_games"))
    """Games of a search best response against each agent (0: none; lostcities/eval/br.py):
    its margin, the baseline's with ``--versus-iteration``, and their paired difference."""
    search: SearchConfig | None = switched("determinizations", hidden=("seed",))
    """Play every agent, and sigma_1 with it, through play-time search
    (lostcities/eval/search.py) instead of the play modes: K redeals per decision (0: no
    search); the ``--search-*`` options set the rest."""


EVALUATE_CROSS_RULES = (
    # the blend reads single Deep CFR's predicted regrets (lostcities/eval/search.py)
    CrossRule(
        "search.value_blend",
        lambda c: c.search is None or c.search.value_blend == 0 or c.agents == ["sdcfr"],
        lambda c: f"0 with agents={','.join(c.agents)} (only sdcfr has learned advantages)",
    ),
)


@dataclass(kw_only=True)
class AgentFileConfig:
    """How an agent file plays where a command seats one (arena, play)."""

    agent: str | None = checked(None, optional(one_of(EVAL_AGENTS)))
    """The agent kind the file plays (lostcities/eval/agents.py): ``policy``, ``current``
    or ``sdcfr``; by default single Deep CFR when the file has the per-iteration nets, else
    the current strategy."""
    play: str = checked("sampled", rule_of(EvalConfig, "play"))
    """How the agent's probabilities become moves: ``sampled`` (a mixed strategy played
    as it is) or ``greedy`` (the most probable legal move)."""
    search: SearchConfig | None = switched("determinizations", hidden=("seed",))
    """Play the agent through play-time search over it (lostcities/eval/search.py): K
    redeals per decision (0: no search); the ``--search-*`` options set the rest."""


@dataclass(kw_only=True)
class ArenaConfig(AgentFileConfig):
    """``lostcities arena``: a match between two players, bots or agent files."""

    player_a: str = positional(label(), "A")
    """Player A: a bot (lostcities/eval/opponents.py) or an agent file / checkpoint."""
    player_b: str = positional(label(), "B")
    """Player B: a bot or an agent file / checkpoint."""
    games: int = checked(200, integer(1))
    """Games to play; seats alternate."""
    seed: int = checked(0, seed())
    """Match seed: the deals, and the bots' and agents' streams."""
    max_turns: int = checked(DEFAULT_MAX_TURNS, rule_of(GameConfig, "max_turns"))
    """Turn cap of each game (ends discard ping-pong; never binds in normal play)."""


ARENA_CROSS_RULES = (
    CrossRule(
        "agent",
        lambda c: c.agent is None or not {c.player_a, c.player_b} <= set(BOT_NAMES),
        lambda c: "none with two bots (it picks what an agent file plays)",
    ),
)


@dataclass(kw_only=True)
class PlayConfig(AgentFileConfig):
    """``lostcities play``: a game in the terminal against a trained agent."""

    path: str = positional(label(), "AGENT_FILE")
    """A run's agent file (agent.pt) or a training checkpoint."""
    seed: int | None = checked(None, optional(seed()))
    """Seed of the deal (by default a fresh one, printed so that the game can be replayed);
    it also keys the agent's choices and search."""
    seat: int = checked(0, integer(0, 1))
    """Your seat: 0 moves first."""
