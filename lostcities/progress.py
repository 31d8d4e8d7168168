"""Live progress of a training run: a bar for the running phase, a line per iteration.

``it 12/30 | trav 3.1s train 1.2s | 45.2k nodes/s | loss 0.134 | expl 0.212 | eta 4m10s``

Phases within an iteration (``traversal p0``, ``advantage p0``, ``policy``, ``eval``) are
reported through :meth:`ProgressLine.phase`, the trainer's ``progress`` callback. On a
terminal the running phase is a tqdm bar (done/total, rate, ETA) that vanishes when the
phase ends, and the summary lines are written above it. Otherwise (a log file, a pipe,
CI) there are no bars: a long phase prints a plain line at most every ``interval``
seconds, so logs stay short. This is display only: numbers that matter go to the
tracker as metrics.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from tqdm import tqdm

PHASE_LINE_INTERVAL_S = 30.0  # off a terminal: at most one line per phase this often
_UNITS = {"traversal": "trav", "eval": "eval"}  # tqdm rate units; training phases: "step"


class ProgressLine:
    """Shows phases as they run and ``update(iteration, fields)`` as one summary line.

    How a summary field is shown depends on its key:

    - ``"trav_s": 3.1`` (key ends in ``_s``): a duration, ``trav 3.1s``;
      consecutive durations share one ``|`` group.
    - ``"nodes/s": 45200`` (key ends in ``/s``): a rate, ``45.2k nodes/s``.
    - any other number: 3 significant digits, ``loss 0.134``.
    - a string: shown as is, ``opp random``.

    Fields appear in the order given; before the last iteration the line ends with the
    run's ETA (the mean iteration time so far, the first iteration left out once there
    are others: it carries the start-up). ``done`` is the iteration the run starts from
    (a resumed run's). ``clock`` (seconds) exists for tests. ``enabled=False`` prints
    nothing.
    """

    def __init__(
        self,
        enabled: bool,
        total: int,
        stream: TextIO | None = None,
        *,
        done: int = 0,
        interval: float = PHASE_LINE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.interval = interval
        self.clock = clock
        self._tty = _isatty(self.stream)
        self._iteration = done  # last finished iteration
        self._durations: list[float] = []  # of the iterations finished in this process
        self._iteration_start = clock()
        self._phase: tuple[str, int] | None = None  # (name, total) of the running phase
        self._done = 0  # its last done count
        self._phase_start = self._last_line = 0.0
        self._bar: tqdm | None = None

    def phase(self, name: str, done: int, total: int) -> None:
        """``done`` of ``total`` units of phase ``name`` (the trainer's progress callback).
        A new name or total, or a smaller ``done``, starts a new phase."""
        if not self.enabled:
            return
        now = self.clock()
        if self._phase != (name, total) or done < self._done:
            self._end_bar()
            self._phase, self._phase_start, self._last_line = (name, total), now, now
            if self._tty:
                unit = _UNITS.get(name.split()[0], "step")
                self._bar = tqdm(
                    total=total,
                    desc=f"it {self._iteration + 1}/{self.total} {name}",
                    unit=unit,
                    file=self.stream,
                    leave=False,  # the summary line is the record; a finished bar goes
                    dynamic_ncols=True,
                    disable=False,  # we decided it is a terminal; tqdm need not guess
                )
        self._done = done
        if self._bar is not None:
            self._bar.update(done - self._bar.n)
        elif done >= total:  # off a terminal: a line at the end of a phase that was long
            elapsed = now - self._phase_start
            if elapsed >= self.interval:
                self._write(self._phase_text(name, done, total, elapsed))
        elif now - self._last_line >= self.interval:  # and at most one per interval before
            elapsed = now - self._phase_start
            self._write(self._phase_text(name, done, total, elapsed))
            self._last_line = now
        if done >= total:
            self.close()

    def header(self, line: str) -> None:
        """A line of its own, outside the iterations: what runs, and how (threads,
        workers), before the first; where to see the run's charts, before and after."""
        if self.enabled:
            self._write(line)

    def update(self, iteration: int, fields: Mapping[str, float | str]) -> None:
        """The summary line of finished ``iteration``."""
        now = self.clock()
        self._durations.append(now - self._iteration_start)
        self._iteration_start = now
        self._iteration = iteration
        if not self.enabled:
            return
        self.close()
        line = format_progress(iteration, self.total, fields)
        if iteration < self.total:
            durations = self._durations[1:] or self._durations
            eta = (self.total - iteration) * sum(durations) / len(durations)
            line += f" | eta {format_duration(eta)}"
        self._write(line)

    def close(self) -> None:
        """Clear a bar still on screen (an interrupted phase), so later output starts on a
        fresh line. Idempotent."""
        self._end_bar()
        self._phase = None

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _phase_text(self, name: str, done: int, total: int, elapsed: float) -> str:
        text = f"it {self._iteration + 1}/{self.total} {name} {done}/{total}"
        text += f" ({100 * done // max(total, 1)}%), {format_duration(elapsed)}"
        if 0 < done < total:
            text += f", eta {format_duration(elapsed * (total - done) / done)}"
        return text

    def _write(self, line: str) -> None:
        if self._tty:
            tqdm.write(line, file=self.stream)  # clears and redraws any bar around it
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _end_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def format_progress(iteration: int, total: int, fields: Mapping[str, float | str]) -> str:
    """The text of one progress line (see :class:`ProgressLine` for the field rules)."""
    groups = [f"it {iteration}/{total}"]
    durations: list[str] = []
    for key, value in fields.items():
        if key.endswith("_s") and not isinstance(value, str):
            durations.append(f"{key[:-2]} {format_duration(float(value))}")
            continue
        if durations:
            groups.append(" ".join(durations))
            durations = []
        if isinstance(value, str):
            groups.append(f"{key} {value}")
        elif key.endswith("/s"):
            groups.append(f"{format_si(float(value))} {key}")
        else:
            groups.append(f"{key} {format_number(value)}")
    if durations:
        groups.append(" ".join(durations))
    return " | ".join(groups)


def format_number(value: float) -> str:
    """3 significant digits (``0.134``, ``12.3``, ``1.23e-05``); ints of up to 6 digits as is."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1_000_000:
        return str(value)
    return f"{float(value):.3g}"


def format_si(value: float) -> str:
    """3 significant digits with a k/M/G/T suffix: ``950``, ``45.2k``, ``1.5M``."""
    if not math.isfinite(value):
        return str(value)
    for suffix in ("", "k", "M", "G"):
        # Round first: 999_950 must become "1M", not "1e+03k".
        if abs(float(f"{value:.3g}")) < 1000:
            return f"{value:.3g}{suffix}"
        value /= 1000
    return f"{value:.3g}T"


def format_duration(seconds: float) -> str:
    """``0.42s``, ``3.1s``, ``45s``, ``2m05s``, ``1h02m``."""
    if not math.isfinite(seconds):
        return f"{seconds}s"
    if seconds < 1:
        return f"{seconds:.2f}s"
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _isatty(stream: object) -> bool:
    """A terminal that can show a bar. A pseudo-terminal of zero width (``script`` and
    some CI runners that capture output) counts as none: tqdm draws nothing in it."""
    try:
        if not stream.isatty():  # type: ignore[attr-defined]
            return False
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # no file descriptor: trust isatty
        return True
