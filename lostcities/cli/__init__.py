"""The command-line front ends: ``python -m lostcities.cli.arena``, ``.evaluate`` and
``.play``, and the options they share."""
