"""Project sessions: ``nox -s tests lint bench``; ``nox -s gpu`` on a CUDA machine."""

from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True

TORCH = "torch==2.13.0"  # the CPU wheel that is on disk; other versions download gigabytes


def install(session: nox.Session, extras: str) -> None:
    session.install(TORCH)
    session.install("-e", f".[{extras}]")


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The default test run (slow learning tests excluded; pass `-- -m slow` for them)."""
    install(session, "test")
    session.run("pytest", "-q", *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff, then the house rules (tests/test_house_rules.py: who may import mlflow, who may
    call torch.save / torch.load, no import cycles), read from the source without torch."""
    session.install("ruff>=0.6", "pytest>=8")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("pytest", "-q", "tests/test_house_rules.py")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Every benchmark under benchmarks/, each printing side-by-side ratios."""
    install(session, "test")
    for script in sorted(Path("benchmarks").glob("bench_*.py")):
        session.run("python", str(script), *session.posargs)


@nox.session(python="3.11")
def ab(session: nox.Session) -> None:
    """An experiment sweep: `nox -s ab -- compile_ab game=leduc network=wide`.

    Families: compile_ab, amp_ab, network_ab, drift (conf/experiment/); the report lands in
    the sweep directory and in MLflow under one parent run.
    """
    if not session.posargs:
        session.error("name an experiment: nox -s ab -- compile_ab [overrides]")
    install(session, "test")
    name, *overrides = session.posargs
    session.run("python", "-m", "lostcities.train", "-m", f"+experiment={name}", *overrides)


@nox.session(python=False)
def gpu(session: nox.Session) -> None:
    """The GPU check: CUDA smoke tests, compile and AMP A/Bs, compiled inference forward and
    drift check, one report (``nox -s gpu -- --out DIR``; see benchmarks/gpu_check.py).

    Runs in the current environment (the project installed with a CUDA build of torch): a
    fresh virtualenv would install the pinned CPU wheel. Without CUDA it stops at once with
    one line (exit 2)."""
    session.run("python", "benchmarks/gpu_check.py", *session.posargs)
