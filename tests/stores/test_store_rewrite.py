"""AgentStore.rewrite_memory/rewrite_archive and the re-entrant lock that erasure relies on."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from governed_memory import FixedClock, PlaintextAgentStore, StorageError
from governed_memory._format._records import render_block, render_header


def _store(tmp_path: Path, clock: FixedClock) -> PlaintextAgentStore:
    return PlaintextAgentStore(
        tmp_path / "agents" / "A" / "MEMORY.md",
        lambda: render_header("A_conv", "2026-01-01T00:00:00"),
        clock=clock,
    )


def test_rewrite_replaces_memory_and_archive_text(tmp_path: Path, clock: FixedClock) -> None:
    store = _store(tmp_path, clock)
    store.append(render_block("User", "t1", "one"))
    archive = store.compact(render_block("System", "t2", "summary"))
    assert archive is not None
    with store.lock():
        store.rewrite_archive(archive, render_header("A_conv", "x"))
        store.rewrite_memory(render_header("A_conv", "y"))
    assert store.read_archive(archive) == render_header("A_conv", "x")
    assert store.read_memory() == render_header("A_conv", "y")
    assert (store.archive_file(archive).stat().st_mode & 0o777) == 0o600
    # Appends after a rewrite go to the new file, not the replaced inode.
    store.append(render_block("User", "t3", "after"))
    assert store.read_memory() == render_header("A_conv", "y") + render_block("User", "t3", "after")


def test_rewrite_refuses_foreign_paths(tmp_path: Path, clock: FixedClock) -> None:
    store = _store(tmp_path, clock)
    store.ensure()
    outside = tmp_path / "elsewhere.md"
    outside.write_text("x")
    with pytest.raises(StorageError, match="only"):
        store.rewrite_archive(str(outside), "y")
    with pytest.raises(StorageError, match="only"):
        store.rewrite_archive("history_x/../../../elsewhere", "y")
    with pytest.raises(StorageError, match="does not exist"):
        store.rewrite_archive("history_missing", "y")
    assert outside.read_text() == "x"


def test_rewrite_removes_stale_temp_files(tmp_path: Path, clock: FixedClock) -> None:
    store = _store(tmp_path, clock)
    store.ensure()
    stale = store.folder / ".gm-tmp-deadbeef"
    stale.write_text("secret left by a crashed writer")
    store.rewrite_memory(render_header("A_conv", "z"))
    assert not stale.exists()


def _try_lock(folder: str, queue: multiprocessing.Queue[bool]) -> None:
    import fcntl

    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        queue.put(True)
    except BlockingIOError:
        queue.put(False)
    finally:
        os.close(fd)


def test_reads_inside_lock_keep_the_exclusive_lock(tmp_path: Path, clock: FixedClock) -> None:
    """A nested read must not convert or release the outer flock."""
    store = _store(tmp_path, clock)
    store.ensure()
    ctx = multiprocessing.get_context("fork")
    with store.lock():
        store.read_memory()
        store.list_archives()
        queue: multiprocessing.Queue[bool] = ctx.Queue()
        proc = ctx.Process(target=_try_lock, args=(str(store.folder), queue))
        proc.start()
        proc.join()
        assert queue.get() is False
    queue2: multiprocessing.Queue[bool] = ctx.Queue()
    proc = ctx.Process(target=_try_lock, args=(str(store.folder), queue2))
    proc.start()
    proc.join()
    assert queue2.get() is True


def test_read_texts_reads_the_memory_then_every_archive_in_one_pass(
    tmp_path: Path, clock: FixedClock
) -> None:
    store = _store(tmp_path, clock)
    store.append(render_block("User", "t1", "one"))
    first = store.compact(render_block("System", "t2", "summary one"))
    store.append(render_block("User", "t3", "two"))
    second = store.compact(None)
    assert first is not None and second is not None
    seen: list[str | None] = []
    texts = store.read_texts(seen.append)
    assert texts == [
        (None, store.read_memory()),
        (first, store.read_archive(first)),
        (second, store.read_archive(second)),
    ]
    assert seen == [None, first, second]


def test_inside_syncing_each_folder_is_fsynced_once_at_the_flush(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from governed_memory._stores import FolderSync

    store = _store(tmp_path, clock)
    store.append(render_block("User", "t1", "one"))
    archive = store.compact(render_block("System", "t2", "summary"))
    assert archive is not None
    archive_two = store.compact(render_block("System", "t3", "again"))
    assert archive_two is not None
    folders = {os.stat(store.folder).st_ino: "agent", os.stat(store.archive_dir).st_ino: "archive"}
    synced: list[str] = []
    real = os.fsync

    def recording(fd: int) -> None:
        synced.append(folders.get(os.fstat(fd).st_ino, "file"))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    sync = FolderSync()
    with store.lock(), store.syncing(sync):
        store.rewrite_archive(archive, render_header("A_conv", "x"))
        store.rewrite_archive(archive_two, render_header("A_conv", "y"))
        store.rewrite_memory(render_header("A_conv", "z"))
    assert synced == ["file", "file", "file"]  # every new file, before its rename
    sync.flush()
    assert sorted(synced[3:]) == ["agent", "archive"]  # each folder once
    sync.flush()
    assert len(synced) == 5
    assert store.read_memory() == render_header("A_conv", "z")


def test_the_lineage_index_is_read_only_when_whole_and_of_this_version(
    tmp_path: Path, clock: FixedClock
) -> None:
    store = _store(tmp_path, clock)
    store.subject_store("alice").append(render_block("User", "t1", "one"))
    assert store.lineage_index() is None
    store.write_lineage_index(["a" * 32])
    assert store.lineage_index() == {"a" * 32}
    index = store.folder / "subjects" / ".gm-lineage.json"
    for damaged in (
        "{",
        '{"format": "governed-memory-lineage-index", "version": 2, "mixed": []}',
        '{"format": "governed-memory-lineage-index", "version": 1, "mixed": ["../x"]}',
    ):
        index.write_text(damaged)
        assert store.lineage_index() is None
    assert store.subject_store("alice").lineage_index() is None  # a subject's store has none
