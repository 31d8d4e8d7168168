"""``python -m lostcities.arena``: the same command as ``lostcities arena`` and
``python -m lostcities.cli.arena``, kept under this name so that commands written with it
keep working."""

from lostcities.cli.arena import main

if __name__ == "__main__":
    raise SystemExit(main())
