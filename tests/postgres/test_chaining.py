"""The background chaining thread (_postgres/_chaining.py): woken, retried, flushed at exit."""

from __future__ import annotations

import atexit
import gc
import logging
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest

from governed_memory._postgres import _chaining
from governed_memory._postgres._chaining import Chainer


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
            chainer.finish("at exit")  # what the exit hook runs for it: logs, returns at once
            assert time.monotonic() - started < 1
        assert chain.calls == calls  # the exit did not try again
        assert any(
            "left waiting at exit" in r.getMessage() and "not retried" in r.getMessage()
            for r in caplog.records
        )
    finally:
        chainer.close()


def test_finish_chains_once_more_then_stops_the_thread_and_chains_nothing_after() -> None:
    """What closing a Governance does: nothing left to a thread of a Governance gone."""
    chain = Chain()
    chainer = Chainer(chain, "the test chain")
    chainer.soon()
    chain.wait_for(1)
    _idle(chainer)
    thread = chainer._thread
    assert thread is not None
    chainer.finish("on close")
    assert chain.calls == 2  # the flush, in this thread
    thread[1].join(20)
    assert not thread[1].is_alive()
    chainer.soon()  # (an entry written after the close: it waits for the next read)
    assert chainer.flush() is True and chain.calls == 2


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


def test_chainers_share_one_exit_hook_and_a_dropped_one_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One hook per instance would grow for ever in a service building a Governance
    (and its audit log) per request, each keeping its chainer alive until exit."""
    hooks: list[object] = []
    monkeypatch.setattr(atexit, "register", hooks.append)
    Chainer(Chain(), "the first").close()  # (the hook is registered once, by the first)
    registered = len(hooks)
    chainers = [Chainer(Chain(), f"chain {n}") for n in range(50)]
    assert all(c in _chaining._LIVE for c in chainers)
    refs = [weakref.ref(c) for c in chainers]
    del chainers
    gc.collect()
    assert [ref() for ref in refs] == [None] * 50  # (the set held none of them)
    assert len(hooks) == registered <= 1


_EXITING = """
import sys, time
from governed_memory._postgres._chaining import Chainer

def chain():
    with open(sys.argv[1], "a") as out:
        out.write("chained\\n")

chainer = Chainer(chain, "the test chain")
chainer.soon()
while len(open(sys.argv[1]).read().splitlines()) < 1 or not chainer.idle:
    time.sleep(0.01)
"""


def test_a_process_exiting_normally_chains_once_more(tmp_path: Path) -> None:
    """The exit hook of a real interpreter runs the last chaining (the entries
    committed after the background thread's last one)."""
    calls = tmp_path / "calls"
    calls.touch()
    done = subprocess.run(
        [sys.executable, "-c", _EXITING, str(calls)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == ["chained", "chained"]
