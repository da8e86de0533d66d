"""_stores/_watch: what inotify reports about an open MEMORY.md, and what it must not.

Each test opens a real file and folder, changes them the way compaction,
erasure, retention, migration, the reference or an operator does, and reads
the queue as an append would (FIONREAD, then drain).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from governed_memory._base._fsutil import atomic_write
from governed_memory._stores import _watch
from governed_memory._stores._watch import IN_Q_OVERFLOW, Watch, Watcher, watcher

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify is Linux-only (elsewhere: stat)"
)


@dataclass
class Opened:
    memory: Path
    fd: int
    dirfd: int
    watcher: Watcher
    watch: Watch

    def changed(self) -> bool:
        self.watcher.drain()
        return self.watch.stale


def _kernel_watches(found: Watcher) -> int:
    with open(f"/proc/self/fdinfo/{found.fd}", encoding="ascii") as info:
        return sum(1 for line in info if line.startswith("inotify wd:"))


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Opened]:
    folder = tmp_path / "ws" / "agents" / "A"
    folder.mkdir(parents=True)
    memory = folder / "MEMORY.md"
    memory.write_bytes(b"# Agent Memory\n\n")
    dirfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(memory, os.O_RDWR | os.O_APPEND)
    made = _watch.watch(fd, dirfd, str(folder))
    assert made is not None
    found, file_watch = made
    found.drain()  # events of earlier tests' files
    file_watch.stale = False
    yield Opened(memory, fd, dirfd, found, file_watch)
    found.release(file_watch)
    os.close(fd)
    os.close(dirfd)


def _replace(memory: Path) -> None:
    atomic_write(memory, b"# Agent Memory\n\n(compacted)\n")


def _backup_then_replace(memory: Path) -> None:
    os.link(memory, memory.parent.parent / "backup-MEMORY.md")  # cp -al style backup
    _replace(memory)


CHANGES: dict[str, Callable[[Path], None]] = {
    "compaction renames a new file over it": _replace,
    "replaced while a hard link keeps the old inode": _backup_then_replace,
    "deleted (retention, migration, reference reset)": lambda m: m.unlink(),
    "renamed away": lambda m: m.rename(m.with_name("old.md")),
    "agent folder removed (erasure of the agent)": lambda m: shutil.rmtree(m.parent),
    "agent folder renamed": lambda m: m.parent.rename(m.parent.with_name("A.old")),
    "a folder above renamed": lambda m: m.parent.parent.rename(m.parent.parent.with_name("x")),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=list(CHANGES))
def test_a_change_that_strands_the_open_file_is_reported(
    opened: Opened, change: Callable[[Path], None]
) -> None:
    change(opened.memory)
    pending = bytearray(4)
    fcntl.ioctl(opened.watcher.fd, termios.FIONREAD, pending, True)
    assert pending != bytes(4)  # what the append's one ioctl sees
    assert opened.changed()


def test_ordinary_work_in_the_folder_reports_nothing(opened: Opened) -> None:
    os.write(opened.fd, b"### User \xe2\x80\x94 t\n\nhello\n\n---\n\n")  # appends
    os.ftruncate(opened.fd, os.fstat(opened.fd).st_size - 1)  # the tail repair
    os.write(opened.fd, b"\n")
    (opened.memory.parent / "archive").mkdir()  # archives, temp files
    atomic_write(opened.memory.parent / "archive" / "history_x.md", b"x")
    os.chmod(opened.memory.parent, 0o700)
    assert not opened.changed()


def test_two_watches_of_one_file_are_both_told_and_share_kernel_watches(
    opened: Opened,
) -> None:
    again = _watch.watch(opened.fd, opened.dirfd, str(opened.memory.parent))
    assert again is not None
    _, second = again
    count = _kernel_watches(opened.watcher)
    assert count >= 2  # the file, the folder and what it could watch above
    opened.memory.unlink()
    assert opened.changed()
    assert second.stale
    opened.watcher.release(second)
    assert _kernel_watches(opened.watcher) == count  # still in use by the first


def test_releasing_the_last_watch_removes_the_kernel_watches(opened: Opened) -> None:
    before = _kernel_watches(opened.watcher)
    opened.watcher.release(opened.watch)
    assert _kernel_watches(opened.watcher) < before
    assert opened.watch.stale  # a released watch never passes for fresh


def test_release_never_waits_even_inside_the_watchers_own_lock(opened: Opened) -> None:
    """Regression: a store's __del__, run by the garbage collector inside watch(), deadlocked."""
    done = threading.Event()

    def from_the_collector() -> None:
        with opened.watcher._lock:  # as if collected inside watch() or drain()
            opened.watcher.release(opened.watch)
        done.set()

    thread = threading.Thread(target=from_the_collector, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert done.is_set()
    before = _kernel_watches(opened.watcher)
    opened.watcher.drain()  # the next locked call unregisters it
    assert _kernel_watches(opened.watcher) < before


def test_a_lost_event_queue_marks_every_watch(opened: Opened) -> None:
    overflow = struct.pack("iIII", -1, IN_Q_OVERFLOW, 0, 0)
    with opened.watcher._lock:
        opened.watcher._mark(overflow)
    assert opened.watch.stale


def test_a_forked_child_never_touches_the_parents_instance(opened: Opened) -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            opened.watcher.release(opened.watch)  # inherited: must be a no-op
            opened.watcher.drain()  # must not steal the parent's events
            mine = watcher()
            code = 0 if mine is not None and mine is not opened.watcher else 2
        finally:
            os.write(write_end, b"%d" % code)
            os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    assert os.read(read_end, 10) == b"0"
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 0
    opened.memory.unlink()
    assert opened.changed()  # the parent's watch still works and saw it


def test_a_file_that_cannot_be_watched_gives_no_watch(
    opened: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opened.watcher, "_add_watch", lambda path, mask: -1)
    assert _watch.watch(opened.fd, opened.dirfd, str(opened.memory.parent)) is None
