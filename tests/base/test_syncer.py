"""Group commit: concurrent callers share one fdatasync; a failure fails its round only."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from governed_memory._base import GroupSync


class _Gate:
    """A sync double: records each call and holds the first until released."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail: OSError | None = None

    def __call__(self, fd: int) -> None:
        self.calls.append(fd)
        if len(self.calls) == 1:
            self.entered.set()
            assert self.release.wait(10)
        if self.fail is not None:
            raise self.fail


def _file(tmp_path: Path) -> tuple[int, tuple[int, int]]:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    st = os.fstat(fd)
    return fd, (st.st_dev, st.st_ino)


def _waiting(syncer: GroupSync, ident: tuple[int, int], count: int) -> bool:
    rounds = syncer._files[ident]
    with rounds.wake:
        return rounds.waiting >= count


def test_callers_during_a_round_share_the_next_single_round(tmp_path: Path) -> None:
    fd, ident = _file(tmp_path)
    gate = _Gate()
    syncer = GroupSync(gate)
    first = threading.Thread(target=syncer.sync, args=(fd, ident))
    first.start()
    assert gate.entered.wait(10)
    # Ten callers arrive while the first round runs: its fdatasync may have
    # started before their writes, so they need one more round, and share it.
    others = [threading.Thread(target=syncer.sync, args=(fd, ident)) for _ in range(10)]
    for thread in others:
        thread.start()
    while not _waiting(syncer, ident, 11):
        threading.Event().wait(0.001)
    gate.release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert len(gate.calls) == 2
    os.close(fd)


def test_a_call_after_a_finished_round_runs_its_own(tmp_path: Path) -> None:
    fd, ident = _file(tmp_path)
    calls: list[int] = []
    syncer = GroupSync(calls.append)
    syncer.sync(fd, ident)
    syncer.sync(fd, ident)
    assert calls == [fd, fd]
    os.close(fd)


def test_files_have_separate_rounds(tmp_path: Path) -> None:
    fd, ident = _file(tmp_path)
    other = os.open(tmp_path / "g", os.O_RDWR | os.O_CREAT, 0o600)
    st = os.fstat(other)
    calls: list[int] = []
    syncer = GroupSync(calls.append)
    syncer.sync(fd, ident)
    syncer.sync(other, (st.st_dev, st.st_ino))
    assert calls == [fd, other]
    os.close(fd)
    os.close(other)


def test_a_failed_round_fails_its_callers_and_the_next_call_tries_again(tmp_path: Path) -> None:
    fd, ident = _file(tmp_path)
    gate = _Gate()
    gate.fail = OSError(5, "Input/output error")
    syncer = GroupSync(gate)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            syncer.sync(fd, ident)
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(3)]
    threads[0].start()
    assert gate.entered.wait(10)
    for thread in threads[1:]:
        thread.start()
    while not _waiting(syncer, ident, 3):
        threading.Event().wait(0.001)
    gate.release.set()
    for thread in threads:
        thread.join(10)
    assert len(errors) == 3 and all(e.errno == 5 for e in errors)
    gate.fail = None
    syncer.sync(fd, ident)  # a new round, which succeeds
    os.close(fd)


def test_the_default_is_the_real_fdatasync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fd, ident = _file(tmp_path)
    seen: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda f: (seen.append(f), real(f))[1])
    GroupSync().sync(fd, ident)
    assert seen == [fd]
    os.close(fd)
