"""AgentStore contract (run over every store in conftest.STORE_FACTORIES) and plaintext specifics.

The contract part talks to a store only through the AgentStore protocol, so an
encrypted store passes the same tests by joining ``STORE_FACTORIES``.
"""

from __future__ import annotations

import datetime as dt
import os
import select
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from governed_memory import (
    AgentStore,
    FixedClock,
    PlaintextAgentStore,
    StorageError,
    parse_memory,
)
from governed_memory._format._records import render_block, render_header
from governed_memory._stores import archive_names

StoreMaker = Callable[[Path, Callable[[], str], FixedClock], AgentStore]
HEADER = render_header("A_id_1_conversation", "2026-11-30T10:00:00")


def _header() -> str:
    return HEADER


def _block(n: int | str) -> str:
    return render_block(
        "Human", f"2026-11-30T10:00:00.{int(n) if str(n).isdigit() else 0:06d}", f"m{n}"
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def memory(workspace: Path) -> Path:
    return workspace / "agents" / "A" / "MEMORY.md"


@pytest.fixture
def frozen() -> FixedClock:
    return FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0))


@pytest.fixture
def store(store_factory: StoreMaker, memory: Path, frozen: FixedClock) -> Iterator[AgentStore]:
    made = store_factory(memory, _header, frozen)
    yield made
    made.close()


@pytest.fixture
def other(store_factory: StoreMaker, memory: Path, frozen: FixedClock) -> Iterator[AgentStore]:
    """A second store on the same agent folder (another Conversation, another process)."""
    made = store_factory(memory, _header, frozen)
    yield made
    made.close()


def _contents(text: str | None) -> list[str]:
    assert text is not None
    return [r.content for r in parse_memory(text).records]


# == contract ==================================================================


def test_paths(store: AgentStore, memory: Path) -> None:
    # The encrypted store keeps the active memory in MEMORY.md.gmenc beside it.
    assert store.memory_path in (memory, memory.with_name(memory.name + ".gmenc"))
    assert store.folder == memory.parent


def test_reading_a_missing_agent_returns_none_and_creates_nothing(
    store: AgentStore, workspace: Path
) -> None:
    assert store.read_memory() is None
    assert store.list_archives() == []
    assert list(workspace.iterdir()) == []


def test_ensure_creates_the_header_once(store: AgentStore) -> None:
    store.ensure()
    assert store.read_memory() == HEADER
    store.append(_block(1))
    store.ensure()
    assert store.read_memory() == HEADER + _block(1)


def test_appends_are_read_back_in_order(store: AgentStore) -> None:
    for n in range(5):
        store.append(_block(n))
    assert store.read_memory() == HEADER + "".join(_block(n) for n in range(5))


def test_append_creates_the_file_with_its_header(store: AgentStore) -> None:
    store.append(_block(1))
    assert store.read_memory() == HEADER + _block(1)


def test_compact_archives_the_old_text_then_replaces_it(store: AgentStore) -> None:
    store.append(_block(1))
    store.append(_block(2))
    before = store.read_memory()
    archive = store.compact(_block("summary"))
    assert archive is not None
    assert store.list_archives() == [archive]
    assert store.read_archive(archive) == before
    assert store.read_memory() == HEADER + _block("summary")


def test_compact_without_records_writes_no_archive(store: AgentStore) -> None:
    store.ensure()
    assert store.compact(_block("summary")) is None
    assert store.list_archives() == []
    assert store.read_memory() == HEADER + _block("summary")


def test_compact_with_no_first_block_leaves_a_fresh_header(store: AgentStore) -> None:
    store.append(_block(1))
    store.compact(None)
    assert store.read_memory() == HEADER


def test_compactions_in_one_second_never_overwrite_an_archive(store: AgentStore) -> None:
    texts = []
    for n in range(4):
        store.append(_block(n))
        texts.append(store.read_memory())
        store.compact(None)
    archives = store.list_archives()
    assert len(archives) == 4
    assert [store.read_archive(a) for a in archives] == texts  # oldest first


def test_failed_archiving_changes_nothing(store: AgentStore) -> None:
    store.append(_block(1))
    before = store.read_memory()
    (store.folder / "archive").write_text("a file, not a folder")
    with pytest.raises(StorageError, match="unchanged"):
        store.compact(_block("summary"))
    assert store.read_memory() == before
    (store.folder / "archive").unlink()
    store.append(_block(2))  # still usable afterwards
    assert _contents(store.read_memory()) == ["m1", "m2"]


def test_files_are_private_whatever_the_umask(store: AgentStore, workspace: Path) -> None:
    old = os.umask(0)
    try:
        store.append(_block(1))
        archive = store.compact(_block(2))
    finally:
        os.umask(old)
    assert archive is not None
    assert _mode(store.folder) == 0o700
    assert _mode(workspace / "agents") == 0o700
    assert _mode(store.memory_path) == 0o600
    assert _mode(store.archive_file(archive).parent) == 0o700
    assert _mode(store.archive_file(archive)) == 0o600


def test_two_stores_on_one_folder_see_each_others_writes(
    store: AgentStore, other: AgentStore
) -> None:
    store.append(_block(1))
    other.append(_block(2))
    store.compact(_block(3))
    other.append(_block(4))  # goes to the new file, not the archived one
    store.append(_block(5))
    assert _contents(other.read_memory()) == ["m3", "m4", "m5"]
    (archive,) = store.list_archives()
    assert _contents(other.read_archive(archive)) == ["m1", "m2"]


def _blocked(action: Callable[[], object]) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def run() -> None:
        action()
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_lock_excludes_other_stores_until_released(store: AgentStore, other: AgentStore) -> None:
    store.ensure()
    with store.lock():
        thread, done = _blocked(lambda: other.append(_block(9)))
        assert not done.wait(0.3)  # the other writer waits for the lock
        store.append(_block(1))  # the holder may use its own store inside the lock
        store.compact(_block(2))
        assert not done.is_set()  # nested use did not release the lock
        assert _contents(store.read_memory()) == ["m2"]
    thread.join(10)
    assert done.is_set()
    assert _contents(store.read_memory()) == ["m2", "m9"]


def test_many_threads_and_stores_lose_nothing(
    store_factory: StoreMaker, memory: Path, frozen: FixedClock
) -> None:
    stores = [store_factory(memory, _header, frozen) for _ in range(3)]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for n in range(40):
                stores[index % 3].append(_block(index * 1000 + n))
                if n % 13 == 0:
                    stores[index % 3].compact(None)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seen = _contents(stores[0].read_memory())
    for archive in stores[0].list_archives():
        seen += _contents(stores[0].read_archive(archive))
    assert sorted(seen) == sorted(f"m{i * 1000 + n}" for i in range(6) for n in range(40))
    for made in stores:
        made.close()


def test_folder_deleted_under_the_store_is_recreated_on_write(store: AgentStore) -> None:
    store.append(_block(1))
    shutil.rmtree(store.folder)
    assert store.read_memory() is None
    assert not store.folder.exists()  # reading did not recreate it
    store.append(_block(2))
    assert store.read_memory() == HEADER + _block(2)
    assert _mode(store.folder) == 0o700


def test_folder_replaced_by_another_writer_is_followed(
    store: AgentStore, other: AgentStore
) -> None:
    store.append(_block(1))
    shutil.rmtree(store.folder)
    other.append(_block(2))  # another process recreates the agent
    store.append(_block(3))
    store.compact(_block(4))
    (archive,) = other.list_archives()
    assert _contents(other.read_archive(archive)) == ["m2", "m3"]
    assert _contents(other.read_memory()) == ["m4"]


def test_close_then_reuse(store: AgentStore) -> None:
    store.append(_block(1))
    store.close()
    store.append(_block(2))
    store.close()
    assert _contents(store.read_memory()) == ["m1", "m2"]


def test_a_forked_child_does_not_share_the_parents_lock(store: AgentStore) -> None:
    """A store inherited through fork must take its own lock, not ride on the parent's."""
    store.append(_block(1))
    read_end, write_end = os.pipe()
    with store.lock():
        pid = os.fork()
        if pid == 0:  # child: use the inherited store object
            code = 0
            try:
                os.close(read_end)
                store.append(_block(2))
                os.write(write_end, b"appended")
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write_end)
        ready, _, _ = select.select([read_end], [], [], 0.5)
        assert ready == []  # the child waits for the parent's lock
        store.append(_block(3))
    _, status = os.waitpid(pid, 0)
    assert os.read(read_end, 100) == b"appended"
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _contents(store.read_memory()) == ["m1", "m3", "m2"]


def test_archives_listing_ignores_other_files(store: AgentStore) -> None:
    store.append(_block(1))
    archive = store.compact(None)
    assert archive is not None
    (store.archive_dir / ".gm-tmp-0123").write_text("torn")
    (store.archive_dir / "notes.txt").write_text("x")
    assert store.list_archives() == [archive]


# == plaintext specifics =======================================================


@pytest.fixture
def plain(memory: Path, frozen: FixedClock) -> Iterator[PlaintextAgentStore]:
    made = PlaintextAgentStore(memory, _header, clock=frozen)
    yield made
    made.close()


def test_archive_names_start_with_the_reference_stamp_and_sort() -> None:
    names = archive_names(dt.datetime(2026, 11, 30, 4, 0, 25))
    first = [next(names) for _ in range(3)]
    assert first == [
        "history_2026-11-30_04-00-25.md",
        "history_2026-11-30_04-00-25_000001.md",
        "history_2026-11-30_04-00-25_000002.md",
    ]
    later = next(archive_names(dt.datetime(2026, 11, 30, 4, 0, 26)))
    assert sorted([*first, later]) == [*first, later]


def test_plaintext_bytes_are_exactly_the_text(plain: PlaintextAgentStore, memory: Path) -> None:
    plain.append(_block(1))
    assert memory.read_bytes() == (HEADER + _block(1)).encode("utf-8")
    archive = plain.compact(_block(2))
    assert archive is not None
    assert plain.archive_file(archive).name == "history_2026-11-30_10-00-00.md"
    assert plain.archive_file(archive).read_bytes() == (HEADER + _block(1)).encode("utf-8")


def test_existing_reference_file_is_appended_to_not_rewritten(
    plain: PlaintextAgentStore, memory: Path, fixtures_dir: Path
) -> None:
    source = fixtures_dir / "write_compact" / "workspace" / "agents" / "QuantAgent" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    shutil.copyfile(source, memory)
    plain.ensure()
    plain.append(_block(1))
    assert memory.read_bytes() == source.read_bytes() + _block(1).encode("utf-8")


def test_a_torn_block_does_not_swallow_the_next_record(
    plain: PlaintextAgentStore, memory: Path
) -> None:
    """A kill during a large write can leave half a block; the next append starts cleanly.

    The torn, unacknowledged bytes are kept (a hand-edited tail looks the same
    and must not be deleted); a fragment cut before its header's dash reads as
    part of the record before it.
    """
    plain.append(_block(1))
    full = _block(2)
    cuts = (5, 20, len(full) - 9, len(full) - 3, len(full) - 1)
    for cut in cuts:
        with memory.open("ab") as handle:  # another process, killed mid-write
            handle.write(full[:cut].encode("utf-8"))
        plain.append(_block(3))
    records = parse_memory(memory.read_bytes().decode("utf-8")).records
    assert records[0].content.startswith("m1")
    assert [r.content for r in records].count("m3") == len(cuts)
    assert records[-1].content == "m3"
    assert memory.read_bytes().endswith(_block(3).encode("utf-8"))


def test_a_write_torn_inside_a_character_keeps_the_file_decodable(
    plain: PlaintextAgentStore, memory: Path
) -> None:
    plain.append(_block(1))
    with memory.open("ab") as handle:
        handle.write("### Bot \u2014 t\n\ncaf\u00e9 \U0001f680".encode()[:-2])
    plain.append(_block(2))
    text = memory.read_bytes().decode("utf-8")  # would raise if the torn bytes stayed
    assert [r.content for r in parse_memory(text).records] == ["m1", "caf\u00e9", "m2"]


def test_ordinary_appends_add_no_repair_bytes(
    plain: PlaintextAgentStore, memory: Path, frozen: FixedClock
) -> None:
    second = PlaintextAgentStore(memory, _header, clock=frozen)
    for n in range(4):
        (plain if n % 2 else second).append(_block(n))
    assert memory.read_bytes() == (HEADER + "".join(_block(n) for n in range(4))).encode()
    second.close()


def test_a_recreated_folder_reusing_the_inode_number_is_not_mistaken_for_ours(
    plain: PlaintextAgentStore, memory: Path, frozen: FixedClock
) -> None:
    """Regression: the old folder's descriptor made the store wipe the new MEMORY.md."""
    plain.append(_block(1))
    shutil.rmtree(memory.parent)
    other = PlaintextAgentStore(memory, _header, clock=frozen)
    other.append(_block(2))
    other.append(_block(3))
    st = os.stat(memory.parent)
    plain._lock._ident = (st.st_dev, st.st_ino)  # as if the filesystem reused the number
    plain.append(_block(4))
    assert _contents(memory.read_bytes().decode()) == ["m2", "m3", "m4"]
    other.close()


def test_memory_that_is_not_utf8_is_reported_not_overwritten(
    plain: PlaintextAgentStore, memory: Path
) -> None:
    memory.parent.mkdir(parents=True)
    memory.write_bytes(HEADER.encode() + b"\xff\xfe broken")
    with pytest.raises(StorageError, match="not valid UTF-8"):
        plain.read_memory()
    with pytest.raises(StorageError, match="not valid UTF-8"):
        plain.compact(None)
    assert memory.read_bytes() == HEADER.encode() + b"\xff\xfe broken"


def test_stale_temporary_files_are_removed_by_compaction(
    plain: PlaintextAgentStore, memory: Path
) -> None:
    plain.append(_block(1))
    (memory.parent / ".gm-tmp-dead").write_text("left by a killed writer")
    plain.compact(None)
    assert not (memory.parent / ".gm-tmp-dead").exists()


def test_fsync_appends_option_syncs_each_append(
    memory: Path, frozen: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PlaintextAgentStore(memory, _header, clock=frozen, fsync_appends=True)
    store.ensure()
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    store.append(_block(1))
    store.append(_block(2))
    assert len(synced) == 2
    store.close()


def test_an_os_error_from_the_callers_block_is_not_reported_as_a_lock_failure(
    store: AgentStore,
) -> None:
    """lock() wraps only its own failure to lock; the block's errors pass through unchanged."""
    store.ensure()
    with pytest.raises(FileNotFoundError, match="raised by the caller"), store.lock():
        raise FileNotFoundError(2, "raised by the caller", "x")
    with store.lock():  # and the lock was released
        pass


def test_delete_finishes_a_deletion_a_crash_left_half_done(store: AgentStore) -> None:
    """kill -9 inside delete() leaves part of the folder; the resumed erasure deletes again."""
    store.append(_block(1))
    archive = store.compact(_block(2))
    assert archive is not None
    shutil.rmtree(
        store.archive_dir
    )  # what a killed rmtree may leave: the archives gone, the rest not
    with store.lock():
        store.delete()
    assert not store.folder.exists()
    assert store.read_memory() is None and store.list_archives() == []
    store.append(_block(3))  # a new, empty memory
    assert _contents(store.read_memory()) == ["m3"]
