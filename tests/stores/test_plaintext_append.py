"""PlaintextAgentStore.append: the cached-descriptor fast path keeps every check.

Two store objects on one folder have separate open file descriptions, so
their flocks exclude each other exactly as two processes' do; one test also
uses real processes. Every test runs twice: with the inotify check of the
fast path (Linux) and with the stat check used where inotify is missing.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import shutil
import sys
from pathlib import Path

import pytest

from governed_memory import FixedClock, PlaintextAgentStore, StorageError, parse_memory
from governed_memory._format._records import render_block, render_header
from governed_memory._stores import _watch


def _store(path: Path, clock: FixedClock | None = None) -> PlaintextAgentStore:
    return PlaintextAgentStore(
        path, lambda: render_header("A_conv", "2026-01-01T00:00:00"), clock=clock
    )


def _contents(store: PlaintextAgentStore) -> list[str]:
    text = store.read_memory()
    assert text is not None
    return [record.content for record in parse_memory(text).records]


@pytest.fixture(autouse=True, params=["inotify", "stat"])
def check(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How appends learn that MEMORY.md was replaced: inotify, or stat where it is missing."""
    if request.param == "inotify" and not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux-only")
    if request.param == "stat":
        monkeypatch.setattr(_watch, "watch", lambda fd, dirfd, folder: None)
    return str(request.param)


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    return tmp_path / "ws" / "agents" / "A" / "MEMORY.md"


def test_appends_take_the_fast_check_only_when_inotify_is_there(memory: Path, check: str) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))
    assert (store._armed is not None) == (check == "inotify")
    store.append(render_block("User", "t2", "two"))
    assert _contents(store) == ["one", "two"]


def test_another_agents_compaction_keeps_this_stores_fast_check(memory: Path, check: str) -> None:
    store = _store(memory)
    elsewhere = _store(memory.parent.with_name("B") / "MEMORY.md")
    store.append(render_block("User", "t1", "one"))
    elsewhere.append(render_block("User", "t1", "b"))
    armed = store._armed
    elsewhere.compact(render_block("System", "t2", "summary"))  # an event in the shared queue
    store.append(render_block("User", "t3", "two"))
    assert store._armed is armed  # drained, found not ours, stayed on the fast path
    assert _contents(store) == ["one", "two"]


def test_append_after_memory_file_was_renamed_away_recreates_it(memory: Path) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))
    memory.rename(memory.with_name("MEMORY.old.md"))
    store.append(render_block("User", "t2", "two"))
    assert _contents(store) == ["two"]
    assert "two" not in memory.with_name("MEMORY.old.md").read_text(encoding="utf-8")


def test_append_after_replacement_behind_a_hard_link_goes_to_the_new_file(
    memory: Path, clock: FixedClock
) -> None:
    """A backup made with hard links (cp -al) keeps the old inode's link count above 0."""
    writer, other = _store(memory, clock), _store(memory, clock)
    writer.append(render_block("User", "t1", "before"))
    os.link(memory, memory.parent.parent / "backup.md")
    other.compact(render_block("System", "t2", "summary"))
    writer.append(render_block("User", "t3", "after"))
    assert _contents(writer) == ["summary", "after"]
    assert "after" not in (memory.parent.parent / "backup.md").read_text(encoding="utf-8")


def test_append_after_a_folder_above_was_moved_writes_at_the_path(memory: Path) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))
    agents = memory.parent.parent
    os.rename(agents, agents.with_name("agents.moved"))
    store.append(render_block("User", "t2", "two"))
    assert _contents(store) == ["two"]
    moved = agents.with_name("agents.moved") / "A" / "MEMORY.md"
    assert "two" not in moved.read_text(encoding="utf-8")


def test_append_after_another_store_compacted_goes_to_the_new_file(
    memory: Path, clock: FixedClock
) -> None:
    writer, other = _store(memory, clock), _store(memory, clock)
    writer.append(render_block("User", "t1", "before"))  # caches the descriptors
    other.compact(render_block("System", "t2", "summary"))
    writer.append(render_block("User", "t3", "after"))
    assert _contents(writer) == ["summary", "after"]
    [archive] = writer.list_archives()
    assert [r.content for r in parse_memory(writer.read_archive(archive)).records] == ["before"]


def test_append_after_memory_file_was_deleted_recreates_it(memory: Path) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))
    memory.unlink()
    store.append(render_block("User", "t2", "two"))
    assert _contents(store) == ["two"]
    assert memory.read_text(encoding="utf-8").startswith("# Agent Memory")


def test_append_after_folder_was_replaced_writes_into_the_new_folder(memory: Path) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))
    moved = memory.parent.with_name("A.old")
    os.rename(memory.parent, moved)  # the open descriptors now point into A.old
    store.append(render_block("User", "t2", "two"))
    assert _contents(store) == ["two"]
    assert "one" in (moved / "MEMORY.md").read_text(encoding="utf-8")
    assert "two" not in (moved / "MEMORY.md").read_text(encoding="utf-8")
    assert (memory.parent.stat().st_mode & 0o777) == 0o700


def test_append_after_folder_was_removed_creates_a_fresh_private_one(memory: Path) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))
    shutil.rmtree(memory.parent)
    store.append(render_block("User", "t2", "two"))
    assert _contents(store) == ["two"]
    assert (memory.stat().st_mode & 0o777) == 0o600


def test_append_inside_lock_keeps_the_outer_lock(memory: Path) -> None:
    store, other = _store(memory), _store(memory)
    store.ensure()
    with store.lock():
        store.append(render_block("User", "t1", "inside"))
        # Another open file description cannot take the folder lock: the
        # nested append did not release it.
        probe = os.open(memory.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    other.append(render_block("User", "t2", "after"))
    assert _contents(other) == ["inside", "after"]


def test_short_write_is_completed(memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))
    real_write = os.write
    calls: list[int] = []

    def short_write(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data)[: max(1, len(data) // 2)])

    monkeypatch.setattr(os, "write", short_write)
    store.append(render_block("User", "t2", "two " * 49 + "two"))
    monkeypatch.undo()
    assert len(calls) > 1
    assert _contents(store) == ["one", "two " * 49 + "two"]


def test_failed_write_raises_storage_error_naming_the_file(
    memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(memory)
    store.append(render_block("User", "t1", "one"))

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(StorageError, match=r"MEMORY\.md"):
        store.append(render_block("User", "t2", "two"))
    monkeypatch.undo()
    # The lock was released: another store can still write.
    other = _store(memory)
    other.append(render_block("User", "t3", "three"))
    assert _contents(other) == ["one", "three"]


def _append_many(path: str, tag: str, count: int) -> None:
    store = _store(Path(path))
    for i in range(count):
        store.append(render_block("User", f"t{i}", f"{tag}-{i}"))


def _compact_many(path: str, count: int) -> None:
    store = _store(Path(path))
    for i in range(count):
        store.compact(render_block("System", f"c{i}", f"summary-{i}"))


def test_processes_appending_and_compacting_lose_no_message(memory: Path) -> None:
    """Every appended block is in MEMORY.md or in exactly one archive."""
    ctx = multiprocessing.get_context("spawn")
    appends = 300
    procs = [
        ctx.Process(target=_append_many, args=(str(memory), tag, appends)) for tag in ("p", "q")
    ]
    procs.append(ctx.Process(target=_compact_many, args=(str(memory), 20)))
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    store = _store(memory)
    texts = [store.read_memory() or ""] + [store.read_archive(a) for a in store.list_archives()]
    seen = [r.content for text in texts for r in parse_memory(text).records]
    for tag in ("p", "q"):
        mine = [c for c in seen if c.startswith(f"{tag}-")]
        assert sorted(mine) == sorted(f"{tag}-{i}" for i in range(appends)), tag
