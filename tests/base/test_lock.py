"""The lock-file helper: exclusion across descriptors, probes, and forked children."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from governed_memory._base import FileLock


def test_a_second_descriptor_cannot_take_a_held_lock(tmp_path: Path) -> None:
    first, second = FileLock(tmp_path / "x" / "a.lock"), FileLock(tmp_path / "x" / "a.lock")
    fd = first.acquire()
    assert fd is not None
    assert (tmp_path / "x" / "a.lock").stat().st_mode & 0o777 == 0o600
    assert second.acquire(blocking=False) is None
    assert first.acquire(blocking=False) is None  # not re-entrant: each acquisition is a new open
    first.release(fd)
    again = second.acquire(blocking=False)
    assert again is not None
    second.release(again)


def test_shared_holders_coexist_and_exclude_an_exclusive_one(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "a.lock")
    one, two = lock.acquire(shared=True), lock.acquire(shared=True)
    assert one is not None and two is not None
    assert lock.acquire(blocking=False) is None
    lock.release(one)
    lock.release(two)


def test_a_probe_creates_nothing(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "a.lock")
    with pytest.raises(FileNotFoundError):
        lock.acquire(create=False)
    assert not (tmp_path / "a.lock").exists()


def test_a_forked_child_neither_holds_nor_releases_the_parents_lock(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "a.lock")
    with lock.held() as fd:
        pid = os.fork()
        if pid == 0:  # the child: the inherited descriptor is forgotten, never unlocked
            code = 1
            try:
                lock.release(fd)  # a no-op in the child
                if FileLock(tmp_path / "a.lock").acquire(blocking=False) is None:
                    code = 0  # the parent still holds it
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert FileLock(tmp_path / "a.lock").acquire(blocking=False) is None  # still held here
