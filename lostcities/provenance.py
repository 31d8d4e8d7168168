"""Where the running code came from: git commit, uncommitted changes, package versions.

Logged as run tags so that a result can be traced to the code that produced it. Never
raises: git may be missing, slow, or the package may be an installed copy.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path

_GIT_TIMEOUT_S = 3.0


def provenance_tags() -> dict[str, str]:
    """Where the running code came from, as run tags; never raises.

    ``git/commit``: HEAD of the git checkout holding this package's source ("unknown"
    for an installed copy, or when git is missing or slow). ``git/dirty``: "true" when
    tracked files differ from HEAD (untracked files do not count), "false", or
    "unknown". ``version/lostcities`` and ``version/python``.
    """
    commit, dirty = _git_state(Path(__file__).resolve().parent)
    try:
        version = importlib.metadata.version("lostcities")
    except Exception:  # running from a source tree that was never installed
        version = "unknown"
    return {
        "git/commit": commit,
        "git/dirty": dirty,
        "version/lostcities": version,
        "version/python": platform.python_version(),
    }


def _git(cwd: Path, *args: str) -> str | None:
    """stdout of ``git -C cwd args``; None if git is missing, fails or takes too long."""
    try:
        done = subprocess.run(
            # --no-optional-locks: a status must not take the index lock from a user's git
            ["git", "--no-optional-locks", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _git_state(package_dir: Path) -> tuple[str, str]:
    """(commit, dirty) of the checkout holding ``package_dir``, or ("unknown", "unknown")."""
    # The package must be tracked there: an installed copy inside someone's repository (a
    # virtualenv in a project) is not that project's commit.
    if _git(package_dir, "ls-files", "--error-unmatch", "--", "__init__.py") is None:
        return "unknown", "unknown"
    commit = _git(package_dir, "rev-parse", "HEAD") or "unknown"
    status = _git(package_dir, "status", "--porcelain", "--untracked-files=no")
    return commit, "unknown" if status is None else str(bool(status)).lower()
