"""The wheel ships every package: each directory of lostcities/ with an __init__.py is
listed in pyproject.toml's ``packages`` (an editable install finds unlisted ones; a
regular install would not)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject():
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "lostcities").rglob("__init__.py")
        if "conf" not in init.parent.relative_to(REPO).parts
    }
    assert found <= listed, f"not in pyproject.toml packages: {sorted(found - listed)}"
