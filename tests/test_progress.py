"""ProgressLine: tqdm bars on a terminal, sparse plain lines off it, nothing when disabled;
the trainer's progress callback."""

from __future__ import annotations

import io
import os
from itertools import groupby

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lostcities.games import make_game
from lostcities.progress import (
    ProgressLine,
    format_duration,
    format_number,
    format_progress,
    format_si,
)
from lostcities.train import build_executor, build_trainer

FIELDS = {"trav_s": 3.1, "train_s": 1.2, "nodes/s": 45_200.0, "loss": 0.13412, "expl": 0.2121}


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_display(progress: ProgressLine, clock: FakeClock, iterations: int) -> None:
    """Per iteration: a 100 s traversal phase (10 s per 100 of 1000), a 1 s policy phase."""
    for it in range(1, iterations + 1):
        progress.phase("traversal p0", 0, 1000)
        for done in range(100, 1001, 100):
            clock.now += 10
            progress.phase("traversal p0", done, 1000)
        progress.phase("policy", 0, 50)
        clock.now += 1
        progress.phase("policy", 50, 50)
        progress.update(it, {"loss": 0.5 / it, "opp": "random"})
    progress.close()


def test_example_line():
    expected = "it 12/30 | trav 3.1s train 1.2s | 45.2k nodes/s | loss 0.134 | expl 0.212"
    assert format_progress(12, 30, FIELDS) == expected


def test_plain_lines_when_not_a_tty():
    stream, clock = io.StringIO(), FakeClock()
    run_display(ProgressLine(True, total=3, stream=stream, clock=clock, interval=30), clock, 3)
    lines = stream.getvalue().split("\n")
    # one line per 30 s of the long phase and one at its end; the 1 s phase is silent
    phase = [
        "traversal p0 300/1000 (30%), 30s, eta 1m10s",
        "traversal p0 600/1000 (60%), 1m00s, eta 40s",
        "traversal p0 900/1000 (90%), 1m30s, eta 10s",
        "traversal p0 1000/1000 (100%), 1m40s",
    ]
    assert lines == [
        *(f"it 1/3 {line}" for line in phase),
        "it 1/3 | loss 0.5 | opp random | eta 3m22s",  # 2 more iterations of 101 s
        *(f"it 2/3 {line}" for line in phase),
        "it 2/3 | loss 0.25 | opp random | eta 1m41s",
        *(f"it 3/3 {line}" for line in phase),
        "it 3/3 | loss 0.167 | opp random",
        "",
    ]
    assert "\r" not in stream.getvalue()


def test_resumed_run_counts_from_its_iteration():
    stream, clock = io.StringIO(), FakeClock()
    progress = ProgressLine(True, total=9, stream=stream, done=6, clock=clock, interval=30)
    progress.phase("advantage p1", 0, 10)
    clock.now += 40
    progress.phase("advantage p1", 5, 10)
    assert stream.getvalue() == "it 7/9 advantage p1 5/10 (50%), 40s, eta 40s\n"


def test_tty_shows_tqdm_bars_and_summary_lines():
    stream, clock = FakeTTY(), FakeClock()
    run_display(ProgressLine(True, total=2, stream=stream, clock=clock, interval=30), clock, 2)
    out = stream.getvalue()
    assert "\r" in out  # tqdm redraws its bar in place
    assert "it 1/2 traversal p0" in out and "trav" in out
    assert "it 2/2 policy" in out
    assert "(30%)" not in out  # no plain phase lines on a terminal
    # what a terminal shows of each line: the text after its last carriage return
    shown = [line.rsplit("\r", 1)[-1] for line in out.split("\n")]
    assert "it 1/2 | loss 0.5 | opp random | eta 1m41s" in shown
    assert "it 2/2 | loss 0.25 | opp random" in shown
    assert shown[-1].strip() == ""  # every bar was cleared: nothing left on the last line


def test_zero_width_pseudo_terminal_gets_plain_lines():
    # A pty nobody sized (``script``, CI capture): tqdm would draw nothing there.
    pytest.importorskip("pty")
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as stream:
        assert stream.isatty() and os.get_terminal_size(slave).columns == 0
        assert not ProgressLine(True, total=2, stream=stream)._tty
    os.close(master)


def test_interrupted_phase_bar_is_cleared_by_close():
    stream = FakeTTY()
    with ProgressLine(True, total=2, stream=stream) as progress:
        progress.phase("traversal p0", 3, 10)
    assert stream.getvalue().rsplit("\r", 1)[-1].strip() == ""


@pytest.mark.parametrize("stream_type", [io.StringIO, FakeTTY])
def test_disabled_prints_nothing(stream_type):
    stream, clock = stream_type(), FakeClock()
    run_display(ProgressLine(False, total=2, stream=stream, clock=clock, interval=30), clock, 2)
    assert stream.getvalue() == ""


KUHN_TINY = [
    "game=kuhn",
    "traversal.traversals_per_player=24",
    "optim.advantage_steps=120",  # over 100: per-step calls would fail the test
    "optim.strategy_steps=7",
    "optim.advantage_batch_size=16",
    "optim.strategy_batch_size=16",
    "optim.policy_training=continual",  # the policy is trained inside run_iteration
]


@pytest.mark.parametrize(
    "executor",
    [[], ["executor=processes", "executor.num_workers=1", "executor.chunk_size=5"]],
    ids=["inline", "processes"],
)
def test_trainer_reports_each_phase_up_to_its_total(executor):
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        cfg = OmegaConf.to_object(compose("train", overrides=[*KUHN_TINY, *executor]))
    pool = build_executor(cfg)
    try:
        trainer = build_trainer(cfg, make_game(cfg.game), pool)
        calls = []
        trainer.progress = lambda phase, done, total: calls.append((phase, done, total))
        trainer.run_iteration()
    finally:
        pool.close()
    phases = [(phase, list(group)) for phase, group in groupby(calls, key=lambda c: c[0])]
    expected = {"traversal p0": 24, "advantage p0": 120, "traversal p1": 24}
    expected |= {"advantage p1": 120, "policy": 7}
    assert [phase for phase, _ in phases] == list(expected)
    for phase, group in phases:
        dones = [done for _, done, _ in group]
        assert {total for _, _, total in group} == {expected[phase]}
        assert dones[0] == 0 and dones[-1] == expected[phase]
        assert all(a < b for a, b in zip(dones, dones[1:], strict=False)), phase
    # coarse: ~1% of the steps at a time, never per step
    assert max(len(group) for _, group in phases) <= 102
    if executor:  # one call per chunk of 5 IDs as it arrives
        assert [done for phase, done, _ in calls if phase == "traversal p0"] == [
            0,
            5,
            10,
            15,
            20,
            24,
        ]


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
