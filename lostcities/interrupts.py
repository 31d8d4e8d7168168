"""Ctrl-C and SIGTERM where the default (raise, or die, at once) is wrong.

Held back while a short write must finish (:func:`deferred_interrupts`), or passed on to
a child process that must end itself cleanly (:func:`forwarded_interrupts`).

A signal's Python handler runs between any two bytecodes, also inside
``torch.save``'s zip writer: the exception it raises there makes the writer's
own clean-up fail with a ``RuntimeError`` that hides the interrupt (seen in CI:
SIGTERM during a checkpoint write ended the run with exit 1 and a traceback
instead of 143 and the resume line). Inside :func:`deferred_interrupts` the two
signals are only recorded; on leaving, the handlers that were there are put back
and each recorded signal is raised again, so it acts as if it had arrived just
after the write.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _handled_by(handler) -> Iterator[None]:
    """``handler`` takes SIGINT and SIGTERM for the block; the old handlers come back
    after it. Only the main thread can set handlers: elsewhere this changes nothing. An
    ignored signal stays ignored (a background job's SIGINT), and one whose handler was
    not set from Python is left alone (it could not be put back)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in DEFERRED:
        old = signal.getsignal(signum)
        if old is not None and old is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Delay SIGINT and SIGTERM until the block ends (successfully or not). Nesting
    works: an inner block hands its signals to the outer one's recorder when it ends."""
    received: list[int] = []
    try:
        with _handled_by(lambda signum, frame: received.append(signum)):
            yield
    finally:
        for signum in dict.fromkeys(received):  # once each, in arrival order
            signal.raise_signal(signum)  # the restored handler acts on it now


class InterruptForwarder:
    """What :func:`forwarded_interrupts` yields: ``received`` lists the signals that came
    (in order); :meth:`attach` names the process they go to. Each kind goes on once: the
    process is stopping already, and a repeat must not cut short its unwinding (its
    MLflow run would stay RUNNING). Repeats come unasked: submitit's local launcher passes
    a terminal's Ctrl-C on to its jobs again, milliseconds after the terminal did."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.pid: int | None = None

    def attach(self, pid: int) -> None:
        """Send from now on to ``pid``, starting with any signal that came before."""
        self.pid = pid
        for signum in dict.fromkeys(self.received):
            os.kill(pid, signum)

    def __call__(self, signum: int, frame: object) -> None:
        repeat = signum in self.received
        self.received.append(signum)
        if self.pid is not None and not repeat:
            os.kill(self.pid, signum)


@contextmanager
def forwarded_interrupts() -> Iterator[InterruptForwarder]:
    """Within the block, SIGINT and SIGTERM do not act on this process: they are passed on
    to the process given to ``attach`` (a child in its own process group, which a
    terminal's Ctrl-C does not reach), which decides how to stop. Handlers are set before
    the child exists, so a signal that comes while it starts is not lost."""
    forwarder = InterruptForwarder()
    with _handled_by(forwarder):
        yield forwarder
