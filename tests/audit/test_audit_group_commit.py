"""Group commit of the audit log: no lock across fdatasync, shared syncs, the tail hint."""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path

import pytest
from lock_helpers import flock_is_free

from governed_memory import FixedClock
from governed_memory._audit import AuditKey, AuditLog, verify_log
from governed_memory._audit import _log as log_module
from governed_memory._audit._log import HEAD_FILE, TAIL_FILE, parse_head
from governed_memory._base import GroupSync

KEY = AuditKey(bytes(range(32)))
T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)


def make_log(folder: Path, syncer: GroupSync | None = None) -> AuditLog:
    clock = FixedClock(T0, tick=dt.timedelta(seconds=1))
    return AuditLog(folder, KEY, clock=clock, syncer=syncer)


class _HeldSync:
    """fdatasync that, once armed, holds its first call until released; counts calls."""

    def __init__(self) -> None:
        self.armed = False
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, fd: int) -> None:
        if not self.armed:
            os.fdatasync(fd)
            return
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            assert self.release.wait(10)
        os.fdatasync(fd)


def test_writers_append_while_an_entry_is_synced_and_then_share_one_sync(tmp_path: Path) -> None:
    held = _HeldSync()
    log = make_log(tmp_path, GroupSync(held))
    log.append("persist", {"outcome": "ok"})  # the segment exists
    held.armed = True
    first = threading.Thread(target=log.append, args=("persist", {"outcome": "ok"}))
    first.start()
    assert held.entered.wait(10)
    assert flock_is_free(tmp_path / HEAD_FILE), "the lock is held across fdatasync"
    # Seven more appends are written while the first one's fdatasync runs
    # (they would block here if the lock were held), then wait for one round.
    others = [
        threading.Thread(target=log.append, args=("persist", {"outcome": "ok"})) for _ in range(7)
    ]
    for thread in others:
        thread.start()
    rounds = next(iter(log._syncer._files.values()))
    while True:
        with rounds.wake:
            if rounds.waiting == 8:
                break
        threading.Event().wait(0.001)
    held.release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert held.calls == 2
    assert len(list(log.entries())) == 10  # anchor + 9
    assert verify_log(tmp_path, KEY).ok


def test_the_head_names_an_entry_only_once_it_is_durable(tmp_path: Path) -> None:
    heads: list[tuple[int, int]] = []
    log: AuditLog

    def sync(fd: int) -> None:
        head = parse_head((tmp_path / HEAD_FILE).read_bytes())
        newest = max(e.seq for e in log.entries())
        heads.append((head.seq if head else 0, newest))
        os.fdatasync(fd)

    log = make_log(tmp_path, GroupSync(sync))
    for _ in range(5):
        log.append("persist", {"outcome": "ok"})
    assert all(head < newest for head, newest in heads)
    head = parse_head((tmp_path / HEAD_FILE).read_bytes())
    assert head is not None and head.seq == 6


def test_a_second_writer_continues_from_the_hint_without_reading_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = log_module.reverse_lines

    def counting(fd: int, size: int):  # type: ignore[no-untyped-def]
        reads.append(size)
        return real(fd, size)

    monkeypatch.setattr(log_module, "reverse_lines", counting)
    one, two = make_log(tmp_path), make_log(tmp_path)  # as two processes: nothing shared
    for _ in range(10):
        one.append("persist", {"outcome": "ok"})
        two.append("persist", {"outcome": "ok"})
    assert len(reads) == 1  # the second object's first append; every other one used the hint
    assert [e.seq for e in one.entries()] == list(range(1, 22))
    assert verify_log(tmp_path, KEY).ok


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: b"x" * len(raw), id="unreadable"),
        pytest.param(lambda raw: raw.replace(b'"seq":', b'"seq": 9', 1), id="forged"),
        pytest.param(lambda raw: b"", id="missing"),
    ],
)
def test_a_hint_that_does_not_authenticate_makes_the_writer_read_the_log(
    tmp_path: Path, damage: object
) -> None:
    one, two = make_log(tmp_path), make_log(tmp_path)
    one.append("persist", {"outcome": "ok"})
    two.append("persist", {"outcome": "ok"})
    one.append("persist", {"outcome": "ok"})
    hint = tmp_path / TAIL_FILE
    two.append("persist", {"outcome": "ok"})
    hint.write_bytes(damage(hint.read_bytes()))  # type: ignore[operator]
    one.append("persist", {"outcome": "ok"})
    assert [e.seq for e in one.entries()] == list(range(1, 7))
    assert verify_log(tmp_path, KEY).ok


def test_an_entry_appended_without_its_hint_is_found_by_reading_the_log(tmp_path: Path) -> None:
    one, two = make_log(tmp_path), make_log(tmp_path)
    one.append("persist", {"outcome": "ok"})
    two.append("persist", {"outcome": "ok"})
    hint = (tmp_path / TAIL_FILE).read_bytes()
    one.append("persist", {"outcome": "ok"})
    (tmp_path / TAIL_FILE).write_bytes(hint)  # a writer killed after its entry, before its hint
    two.append("persist", {"outcome": "ok"})
    assert [e.seq for e in two.entries()] == list(range(1, 6))
    assert verify_log(tmp_path, KEY).ok
