"""A one-line live progress display for the training loop.

``it 12/30 | trav 3.1s train 1.2s | 45.2k nodes/s | loss 0.134 | expl 0.212``

On a terminal the line is rewritten in place; otherwise (a log file, a pipe, CI)
every update is printed as its own plain line, so logs stay readable. This is
display only: numbers that matter go to the tracker as metrics.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Mapping
from typing import TextIO

_CLEAR_LINE = "\r\x1b[K"  # carriage return + erase to end of line (ANSI)


class ProgressLine:
    """Renders ``update(iteration, fields)`` as one compact line.

    How a field is shown depends on its key:

    - ``"trav_s": 3.1`` (key ends in ``_s``): a duration, ``trav 3.1s``;
      consecutive durations share one ``|`` group.
    - ``"nodes/s": 45200`` (key ends in ``/s``): a rate, ``45.2k nodes/s``.
    - any other number: 3 significant digits, ``loss 0.134``.
    - a string: shown as is, ``opp random``.

    Fields appear in the order given. ``enabled=False`` prints nothing.
    """

    def __init__(self, enabled: bool, total: int, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self._tty = _isatty(self.stream)
        self._open = False  # a TTY line is on screen without its newline yet

    def update(self, iteration: int, fields: Mapping[str, float | str]) -> None:
        if not self.enabled:
            return
        line = format_progress(iteration, self.total, fields)
        if self._tty:
            # Longer than the terminal, the line would wrap and \r would only redraw its tail.
            width = shutil.get_terminal_size().columns - 1
            self.stream.write(_CLEAR_LINE + line[:width])
            self._open = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the live line (TTY) so that later output starts on a fresh line. Idempotent."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
