"""ProgressLine: plain lines off a terminal, one rewritten line on it."""

from __future__ import annotations

import io

import pytest

from lostcities.progress import (
    ProgressLine,
    format_duration,
    format_number,
    format_progress,
    format_si,
)

FIELDS = {"trav_s": 3.1, "train_s": 1.2, "nodes/s": 45_200.0, "loss": 0.13412, "expl": 0.2121}


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_example_line():
    expected = "it 12/30 | trav 3.1s train 1.2s | 45.2k nodes/s | loss 0.134 | expl 0.212"
    assert format_progress(12, 30, FIELDS) == expected


def test_plain_lines_when_not_a_tty():
    stream = io.StringIO()
    progress = ProgressLine(True, total=3, stream=stream)
    for it in range(1, 4):
        progress.update(it, {"loss": 0.5 / it, "opp": "random"})
    progress.close()
    lines = stream.getvalue().split("\n")
    assert lines == [
        "it 1/3 | loss 0.5 | opp random",
        "it 2/3 | loss 0.25 | opp random",
        "it 3/3 | loss 0.167 | opp random",
        "",
    ]
    assert "\r" not in stream.getvalue()


def test_tty_rewrites_one_line():
    stream = FakeTTY()
    progress = ProgressLine(True, total=2, stream=stream)
    progress.update(1, FIELDS)
    progress.update(2, FIELDS)
    assert "\n" not in stream.getvalue()
    assert stream.getvalue().count("\r\x1b[K") == 2
    progress.close()
    progress.close()
    assert stream.getvalue().endswith("expl 0.212\n")


def test_disabled_prints_nothing():
    stream = FakeTTY()
    with ProgressLine(False, total=2, stream=stream) as progress:
        progress.update(1, FIELDS)
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    "value, text",
    [
        (0, "0"),
        (950, "950"),
        (999.4, "999"),
        (45_200, "45.2k"),
        (999_950, "1M"),
        (1_500_000, "1.5M"),
        (2.5e9, "2.5G"),
        (7e12, "7T"),
    ],
)
def test_si(value, text):
    assert format_si(value) == text


@pytest.mark.parametrize(
    "value, text",
    [
        (0.13412, "0.134"),
        (12.345, "12.3"),
        (1.2345e-5, "1.23e-05"),
        (42, "42"),
        (float("nan"), "nan"),
    ],
)
def test_number(value, text):
    assert format_number(value) == text


@pytest.mark.parametrize(
    "seconds, text",
    [(0.4213, "0.42s"), (3.14, "3.1s"), (45.2, "45s"), (125, "2m05s"), (3720, "1h02m")],
)
def test_duration(seconds, text):
    assert format_duration(seconds) == text
