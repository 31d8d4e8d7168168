import signal
import subprocess
import sys
import threading

import pytest

from lostcities.interrupts import deferred_interrupts, forwarded_interrupts


def test_sigint_waits_for_the_block_then_raises():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            signal.raise_signal(signal.SIGINT)
            done.append("rest of the block")
    assert done == ["rest of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_reaches_the_handler_that_was_there_once():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda s, frame: seen.append(s))
    try:
        with deferred_interrupts():
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_nested_blocks_hand_the_signal_outwards():
    order = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            with deferred_interrupts():
                signal.raise_signal(signal.SIGINT)
            order.append("outer block still runs")
    assert order == ["outer block still runs"]


def test_an_error_in_the_block_still_restores_the_handlers():
    with pytest.raises(ValueError):
        with deferred_interrupts():
            raise ValueError("boom")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_other_threads_defer_nothing():
    errors = []

    def body():
        try:
            with deferred_interrupts():
                pass
        except Exception as e:  # signal.signal outside the main thread would raise ValueError
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert errors == []


def test_forwarded_signals_go_to_the_attached_process_only():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], process_group=0)
    try:
        with forwarded_interrupts() as forwarder:
            signal.raise_signal(signal.SIGTERM)  # before attach: kept, sent on attach
            assert child.poll() is None
            forwarder.attach(child.pid)
            assert child.wait(timeout=30) == -signal.SIGTERM
        assert forwarder.received == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        child.kill()
        child.wait()


def test_a_repeated_signal_is_forwarded_once():
    """The second Ctrl-C (submitit's local launcher repeats a terminal's) would cut short
    the child's unwinding: it is recorded, not passed on."""
    count = (
        "import signal, sys\n"
        "seen = []\n"
        "def on_sigint(signum, frame):\n"
        "    seen.append(signum)\n"
        "    print('got', flush=True)\n"
        "signal.signal(signal.SIGINT, on_sigint)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
        "print(len(seen), flush=True)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", count],
        process_group=0,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "ready\n"
        with forwarded_interrupts() as forwarder:
            forwarder.attach(child.pid)
            signal.raise_signal(signal.SIGINT)
            assert child.stdout.readline() == "got\n"  # handled: a second one would count
            signal.raise_signal(signal.SIGINT)
        assert forwarder.received == [signal.SIGINT, signal.SIGINT]
        out, _ = child.communicate("", timeout=30)
        assert out == "1\n"
    finally:
        child.kill()
        child.wait()


def test_an_ignored_signal_is_not_forwarded():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with forwarded_interrupts() as forwarder:
            signal.raise_signal(signal.SIGINT)
        assert forwarder.received == []
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
