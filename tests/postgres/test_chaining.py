"""The background chaining thread (_postgres/_chaining.py): woken, retried, flushed at exit."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from governed_memory._postgres._chaining import Chainer, _at_exit


class Chain:
    """A chain() that records its calls and fails while ``down`` is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.down = threading.Event()
        self.called = threading.Condition()

    def __call__(self) -> None:
        with self.called:
            self.calls += 1
            self.called.notify_all()
        if self.down.is_set():
            raise ConnectionError("cannot reach PostgreSQL")

    def wait_for(self, calls: int) -> None:
        with self.called:
            assert self.called.wait_for(lambda: self.calls >= calls, timeout=20)


def _idle(chainer: Chainer) -> None:
    deadline = time.monotonic() + 20
    while not chainer.idle and time.monotonic() < deadline:
        time.sleep(0.005)
    assert chainer.idle


def test_soon_chains_in_the_background_and_flush_chains_in_the_caller() -> None:
    chain = Chain()
    chainer = Chainer(chain, "the test chain")
    try:
        assert chainer.idle
        chainer.soon()
        chain.wait_for(1)
        _idle(chainer)
        assert chainer.flush() is True  # at exit: once more, in this thread
        assert chain.calls == 2
    finally:
        chainer.close()


def test_a_flush_with_nothing_handed_to_the_thread_does_nothing() -> None:
    chain = Chain()
    chainer = Chainer(chain, "the test chain")
    assert chainer.flush() is True
    assert chain.calls == 0
    chainer.close()


def test_a_failing_chaining_is_retried_and_the_exit_does_not_wait_for_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chain = Chain()
    chain.down.set()
    chainer = Chainer(chain, "the test chain")
    try:
        with caplog.at_level(logging.WARNING, logger="governed_memory"):
            chainer.soon()
            chain.wait_for(2)  # failed, then retried after a delay
            assert any("retrying in" in r.getMessage() for r in caplog.records)
            assert chainer.flush() is False  # not tried
            calls = chain.calls
            started = time.monotonic()
            _at_exit(lambda: chainer)  # what atexit runs: logs, returns at once
            assert time.monotonic() - started < 1
        assert chain.calls == calls  # the exit did not try again
        assert any(
            "left waiting at exit" in r.getMessage() and "not retried" in r.getMessage()
            for r in caplog.records
        )
    finally:
        chainer.close()


def test_once_the_server_is_back_the_exit_chains_again() -> None:
    chain = Chain()
    chain.down.set()
    chainer = Chainer(chain, "the test chain")
    try:
        chainer.soon()
        chain.wait_for(1)
        chain.down.clear()
        chain.wait_for(2)  # the retry succeeded
        _idle(chainer)
        assert chainer.flush() is True
        assert chain.calls == 3
    finally:
        chainer.close()
