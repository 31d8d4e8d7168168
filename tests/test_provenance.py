"""Provenance tags: the commit and state of the checkout, the package versions."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import subprocess
from pathlib import Path

from lostcities.provenance import provenance_tags


def test_provenance_tags(monkeypatch):
    import lostcities

    tags = provenance_tags()
    assert tags["version/python"] == platform.python_version()
    assert tags["version/lostcities"] == importlib.metadata.version("lostcities")
    source = Path(lostcities.__file__).resolve().parent.parent
    if (source / ".git").exists():  # a checkout: the commit and state of that checkout
        head = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        assert tags["git/commit"] == head.stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{40}", tags["git/commit"])
        assert tags["git/dirty"] in ("true", "false")
    monkeypatch.setenv("PATH", "")  # no git at all: unknown, never an error
    assert provenance_tags()["git/commit"] == "unknown"
    assert provenance_tags()["git/dirty"] == "unknown"
