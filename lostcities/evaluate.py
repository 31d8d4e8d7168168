"""``python -m lostcities.evaluate``: the same command as ``lostcities evaluate`` and
``python -m lostcities.cli.evaluate``, kept under this name so that commands written with it
keep working."""

from lostcities.cli.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
