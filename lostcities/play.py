"""``python -m lostcities.play``: the same command as ``lostcities play`` and
``python -m lostcities.cli.play``, kept under this name so that commands written with it
keep working."""

from lostcities.cli.play import main

if __name__ == "__main__":
    raise SystemExit(main())
