"""``fsync_appends`` (durability.sync = "commit"): each append durable on return, outside the lock.

Run over both stores: the plaintext and the encrypted store share the sync
path (``AgentFolderStore._settle``).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from lock_helpers import flock_is_free

from governed_memory import FixedClock, StorageError, parse_memory
from governed_memory._base import GroupSync
from governed_memory._crypto import Keyring, LocalKeyProvider
from governed_memory._format._records import render_block, render_header
from governed_memory._stores import EncryptedAgentStore, PlaintextAgentStore
from governed_memory._stores._files import AgentFolderStore

CLOCK = FixedClock(dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC))
HEADER = render_header("A_id_1_conversation", "2026-11-30T10:00:00")

Maker = Callable[[Path, GroupSync, bool], AgentFolderStore]


def _plaintext(memory: Path, syncer: GroupSync, durable: bool) -> AgentFolderStore:
    return PlaintextAgentStore(
        memory, lambda: HEADER, clock=CLOCK, fsync_appends=durable, syncer=syncer
    )


def _encrypted(memory: Path, syncer: GroupSync, durable: bool) -> AgentFolderStore:
    keyring = Keyring(memory.parents[2] / "keyring", LocalKeyProvider(bytes(range(32))))
    return EncryptedAgentStore(
        memory, lambda: HEADER, keyring=keyring, clock=CLOCK, fsync_appends=durable, syncer=syncer
    )


@pytest.fixture(params=[_plaintext, _encrypted], ids=["plaintext", "encrypted"])
def maker(request: pytest.FixtureRequest) -> Maker:
    made: Maker = request.param
    return made


def _block(n: int) -> str:
    return render_block("Human", f"2026-11-30T10:00:00.{n:06d}", f"message {n}")


def test_each_append_is_synced_outside_the_folder_lock(tmp_path: Path, maker: Maker) -> None:
    memory = tmp_path / "ws" / "agents" / "A" / "MEMORY.md"
    seen: list[tuple[int, bool]] = []

    def sync(fd: int) -> None:
        seen.append((os.fstat(fd).st_size, flock_is_free(memory.parent)))
        os.fdatasync(fd)

    store = maker(memory, GroupSync(sync), True)
    store.ensure()
    sizes = []
    for n in range(3):
        store.append(_block(n))
        sizes.append(store.stat().size)  # type: ignore[union-attr]
    assert [size for size, _ in seen] == sizes  # each append's bytes were in the synced file
    assert all(free for _, free in seen)
    assert [r.content for r in parse_memory(store.read_memory() or "").records] == [
        f"message {n}" for n in range(3)
    ]
    store.close()


def test_a_failed_sync_is_a_storage_error_and_the_next_append_is_synced(
    tmp_path: Path, maker: Maker
) -> None:
    memory = tmp_path / "ws" / "agents" / "A" / "MEMORY.md"
    calls: list[int] = []

    def sync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")
        os.fdatasync(fd)

    store = maker(memory, GroupSync(sync), True)
    with pytest.raises(StorageError, match=r"cannot make the append to .* durable"):
        store.append(_block(1))
    store.append(_block(2))
    assert len(calls) == 2
    store.close()


def test_without_fsync_appends_nothing_is_synced(tmp_path: Path, maker: Maker) -> None:
    memory = tmp_path / "ws" / "agents" / "A" / "MEMORY.md"
    calls: list[int] = []
    store = maker(memory, GroupSync(calls.append), False)
    for n in range(3):
        store.append(_block(n))
    assert calls == []
    store.close()


def test_a_subject_partition_shares_the_stores_syncer(tmp_path: Path, maker: Maker) -> None:
    memory = tmp_path / "ws" / "agents" / "A" / "MEMORY.md"
    calls: list[int] = []
    store = maker(memory, GroupSync(lambda fd: (calls.append(fd), os.fdatasync(fd))[1]), True)
    store.subject_store("customer-1").append(_block(1))
    assert len(calls) == 1
    store.close()


def test_durable_appends_take_the_watched_path_and_each_is_synced_before_it_returns(
    tmp_path: Path, maker: Maker
) -> None:
    """The watched fast path is armed under fsync_appends too, and still settles every write."""
    memory = tmp_path / "ws" / "agents" / "A" / "MEMORY.md"
    synced: list[int] = []

    def sync(fd: int) -> None:
        os.fdatasync(fd)
        synced.append(os.fstat(fd).st_size)  # what this flush made durable

    store = maker(memory, GroupSync(sync), True)
    for n in range(4):
        store.append(_block(n))
        written = [p for p in memory.parent.iterdir() if p.name.startswith("MEMORY.md")]
        assert synced[-1] == written[0].stat().st_size
    assert store._armed is not None  # the later appends took the watched path
    assert len(synced) == 4
    records = parse_memory(store.read_memory() or "").records
    assert [r.content for r in records] == [f"message {n}" for n in range(4)]
    store.close()
