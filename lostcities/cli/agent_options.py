"""Which agent an agent file plays in the front ends that seat one (lostcities.cli.arena,
lostcities.cli.play): the ``--agent`` kinds and the default pick."""

from __future__ import annotations

from pathlib import Path

from lostcities.eval.agents import Agent, agents_from_checkpoint

AGENT_CHOICES = ("sdcfr", "current", "policy")


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
