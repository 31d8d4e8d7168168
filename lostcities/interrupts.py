"""Hold Ctrl-C and SIGTERM back while a short write must finish.

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

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Delay SIGINT and SIGTERM until the block ends (successfully or not).

    Only the main thread can set handlers; elsewhere (and for a signal whose
    handler was not installed from Python, which could not be put back) this
    defers nothing. Nesting works: an inner block hands its signals to the outer
    one's recorder when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {}
    for signum in DEFERRED:
        handler = signal.getsignal(signum)
        if handler is None:  # set outside Python: cannot be restored
            continue
        previous[signum] = handler
        signal.signal(signum, lambda s, frame: received.append(s))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(received):  # once each, in arrival order
            signal.raise_signal(signum)  # the restored handler acts on it now
