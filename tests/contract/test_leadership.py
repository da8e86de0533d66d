"""Contract of the single-holder lock seam (Leadership), run over every implementation.

Today: the scheduler's leader lock and the purge lock. A backend joins by
appending a ``pytest.param`` to ``LEADERSHIPS``: a module-level factory that
opens a candidate for the one lock ``tmp_path`` names (each call a new
candidate, as another process would be). Module-level so a spawned process
can build one too.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from pg_keys import LEADERSHIPS as PG_LEADERSHIPS

from governed_memory._protocols import Leadership
from governed_memory._retention._purge import _PurgeLock
from governed_memory._scheduler import LeaderLock


def _scheduler_leader(tmp_path: Path) -> Leadership:
    return LeaderLock(tmp_path / "scheduler" / "leader.lock")


def _purge_lock(tmp_path: Path) -> Leadership:
    return _PurgeLock(tmp_path / "purge", tmp_path)


LEADERSHIPS = [
    pytest.param(_scheduler_leader, id="file-scheduler-leader"),
    pytest.param(_purge_lock, id="file-purge-lock"),
]
LEADERSHIPS += PG_LEADERSHIPS

Factory = Callable[[Path], Leadership]


@pytest.fixture(params=LEADERSHIPS)
def factory(request: pytest.FixtureRequest) -> Factory:
    made: Factory = request.param
    return made


def test_a_free_lock_is_taken(factory: Factory, tmp_path: Path) -> None:
    candidate = factory(tmp_path)
    assert not candidate.held
    assert candidate.try_acquire()
    assert candidate.held
    candidate.release()


def test_only_one_candidate_holds_it(factory: Factory, tmp_path: Path) -> None:
    first, second = factory(tmp_path), factory(tmp_path)
    assert first.try_acquire()
    try:
        assert not second.try_acquire()
        assert not second.held
    finally:
        first.release()


def test_trying_again_while_holding_keeps_it(factory: Factory, tmp_path: Path) -> None:
    candidate, other = factory(tmp_path), factory(tmp_path)
    assert candidate.try_acquire()
    assert candidate.try_acquire()
    candidate.release()
    assert not candidate.held
    assert other.try_acquire()  # one release gave it up entirely
    other.release()


def test_release_hands_it_to_the_next_candidate(factory: Factory, tmp_path: Path) -> None:
    first, second = factory(tmp_path), factory(tmp_path)
    assert first.try_acquire()
    first.release()
    assert not first.held
    assert second.try_acquire()
    second.release()


def test_releasing_a_lock_not_held_does_nothing(factory: Factory, tmp_path: Path) -> None:
    holder, bystander = factory(tmp_path), factory(tmp_path)
    assert holder.try_acquire()
    bystander.release()
    assert holder.held
    assert not factory(tmp_path).try_acquire()
    holder.release()


def test_trying_a_held_lock_returns_at_once(factory: Factory, tmp_path: Path) -> None:
    holder = factory(tmp_path)
    assert holder.try_acquire()
    try:
        started = time.monotonic()
        assert not factory(tmp_path).try_acquire()
        assert time.monotonic() - started < 1.0
    finally:
        holder.release()


def _hold(make: Factory, tmp_path: Path, conn: Connection) -> None:
    candidate = make(tmp_path)
    conn.send(candidate.try_acquire())
    time.sleep(120)


def test_a_holder_killed_loses_the_lock(factory: Factory, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_hold, args=(factory, tmp_path, child))
    proc.start()
    try:
        assert parent.poll(60), "the holder process did not start"
        assert parent.recv() is True
        waiting = factory(tmp_path)
        assert not waiting.try_acquire()
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
        assert waiting.try_acquire()
        waiting.release()
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(30)
