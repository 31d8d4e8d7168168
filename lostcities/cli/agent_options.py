"""Which agent an agent file plays in the front ends that seat one (lostcities.cli.arena,
lostcities.cli.play): the default pick, and play-time search over it."""

from __future__ import annotations

from pathlib import Path

from lostcities.eval.agents import Agent, agents_from_checkpoint
from lostcities.eval.search import SearchAgent, SearchConfig


def load_agent(path: str | Path, kind: str | None, seed: int) -> Agent:
    """The agent of ``kind`` in an agent file or checkpoint; ``None`` picks the best the file
    holds: single Deep CFR (the average strategy, no distillation error) when it has the
    per-iteration nets, else the current strategy. Raises ValueError (a one-line message
    naming the file) or OSError."""
    if kind is not None:
        return agents_from_checkpoint(path, [kind], seed)[kind]
    try:
        return agents_from_checkpoint(path, ["sdcfr"], seed)["sdcfr"]
    except ValueError:
        # No per-iteration nets (an older file), or no usable file at all: the second load
        # either succeeds or raises the error that applies to every kind.
        return agents_from_checkpoint(path, ["current"], seed)["current"]


def searched(agent: Agent, config: SearchConfig) -> SearchAgent:
    """``agent`` played through the search of ``config``. Raises ValueError where
    ``--search-value-blend`` asks for learned advantages the agent does not have: which
    agent a file holds is known only once it is loaded (lostcities.cli.evaluate, which
    searches sigma_1 with a blend as the baseline it is, checks its agent kinds up front)."""
    if config.value_blend > 0 and not hasattr(agent, "advantages"):
        raise ValueError(
            f"--search-value-blend: agent {agent.name!r} has no learned advantages to blend "
            "(single Deep CFR, --agent sdcfr, has)"
        )
    return SearchAgent(agent, config)
