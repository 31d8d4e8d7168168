"""The command-line front ends ``lostcities evaluate|arena|play`` (also ``python -m
lostcities.cli.<name>``): their checked dataclasses (config.py), the adapter that builds a
command line from a dataclass (options.py), and the agent-file loading they share
(agent_options.py)."""
