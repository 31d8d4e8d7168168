"""The ``lostcities`` command: ``lostcities train|evaluate|arena|play ...``.

Installed on PATH by ``[project.scripts]`` (pyproject.toml) and also run as
``python -m lostcities``. Each subcommand is the ``main`` of its module, imported only when
chosen (training imports Hydra and the trainer), and takes the rest of the command line:
``lostcities train key=value ...`` passes it to the Hydra entry point, which reads
``sys.argv``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS = {
    "train": ("lostcities.train", "train a Deep CFR agent (Hydra overrides: key=value ...)"),
    "evaluate": ("lostcities.cli.evaluate", "evaluate trained runs against the bots"),
    "arena": ("lostcities.cli.arena", "match two players, bots or agent files"),
    "play": ("lostcities.cli.play", "play Lost Cities against a trained agent"),
}
"""Subcommand -> (the module whose ``main`` runs it, one line for ``lostcities --help``)."""


def _parser() -> argparse.ArgumentParser:
    lines = [f"  {name:<10}{summary}" for name, (_, summary) in COMMANDS.items()]
    parser = argparse.ArgumentParser(
        prog="lostcities",
        usage="lostcities {train,evaluate,arena,play} [ARGS ...]",
        description="Deep CFR for Lost Cities (and Kuhn and Leduc poker).",
        epilog="commands:\n" + "\n".join(lines) + "\n\n`lostcities COMMAND --help` for more.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=COMMANDS, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand named by ``argv[0]`` (None: ``sys.argv[1:]``) on the rest;
    its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        _parser().parse_args(argv[:1])  # --help exits 0; no or an unknown command exits 2
        return 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(COMMANDS[name][0])
    if name == "train":
        sys.argv = [sys.argv[0], *rest]  # Hydra parses sys.argv itself
        module.main()
        return 0
    return module.main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
