"""Contract of the keyring's storage seam (WrappedKeyStorage), run over every implementation.

A backend joins by appending a ``pytest.param`` to ``KEY_STORAGES``: a factory
that opens the storage on what ``tmp_path`` names (called again, it opens the
same storage, as a second process would).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pg_keys import KEY_STORAGES as PG_KEY_STORAGES

from governed_memory._crypto import AGENT, SUBJECT, Keyring
from governed_memory._crypto._keyring import KeyringFolder
from governed_memory._crypto._providers import InMemoryKeyProvider
from governed_memory._protocols import WrappedKeyStorage

Opener = Callable[[], WrappedKeyStorage]

REF_A = bytes(range(16))
REF_B = bytes(range(16, 32))


def _file_storage(tmp_path: Path) -> Opener:
    return lambda: KeyringFolder(tmp_path / "keyring")


KEY_STORAGES = [pytest.param(_file_storage, id="file")]
KEY_STORAGES += PG_KEY_STORAGES


@pytest.fixture(params=KEY_STORAGES)
def open_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    opener: Opener = request.param(tmp_path)
    return opener


def test_an_empty_storage_holds_nothing(open_storage: Opener) -> None:
    storage = open_storage()
    assert storage.read_meta() is None
    assert storage.read_entry(REF_A) is None
    assert storage.list_refs() == []


def test_the_metadata_is_created_once(open_storage: Opener) -> None:
    first, second = open_storage(), open_storage()
    assert first.create_meta(b'{"first": 1}\n')
    assert not second.create_meta(b'{"second": 2}\n')
    assert second.read_meta() == b'{"first": 1}\n'


def test_writing_the_metadata_replaces_it(open_storage: Opener) -> None:
    storage = open_storage()
    storage.create_meta(b"old\n")
    with storage.locked():
        storage.write_meta(b"new\n")
    assert open_storage().read_meta() == b"new\n"


def test_an_entry_is_created_once_and_the_loser_reads_the_winner(open_storage: Opener) -> None:
    first, second = open_storage(), open_storage()
    assert first.create_entry(REF_A, b"winner")
    assert not second.create_entry(REF_A, b"loser")
    assert second.read_entry(REF_A) == b"winner"


def test_writing_an_entry_replaces_its_bytes_exactly(open_storage: Opener) -> None:
    storage = open_storage()
    storage.create_entry(REF_A, b"v1")
    data = bytes(range(256))
    with storage.locked():
        storage.write_entry(REF_A, data)
        storage.write_entry(REF_B, b"created by a write")
    other = open_storage()
    assert other.read_entry(REF_A) == data
    assert other.read_entry(REF_B) == b"created by a write"


def test_refs_are_listed_in_hex_order(open_storage: Opener) -> None:
    storage = open_storage()
    storage.create_entry(REF_B, b"b")
    storage.create_entry(REF_A, b"a")
    assert storage.list_refs() == [REF_A, REF_B]


def test_the_change_counter_advances_and_every_instance_sees_it(open_storage: Opener) -> None:
    storage, watcher = open_storage(), open_storage()
    before = watcher.counter()
    with storage.locked():
        storage.bump_counter()
        storage.bump_counter()
    assert watcher.counter() == before + 2


def test_the_lock_is_reentrant_in_one_thread(open_storage: Opener) -> None:
    storage = open_storage()
    with storage.locked(), storage.locked():
        storage.write_entry(REF_A, b"x")
    assert storage.read_entry(REF_A) == b"x"


def test_the_lock_excludes_another_instance(open_storage: Opener) -> None:
    holder, waiter = open_storage(), open_storage()
    entered = threading.Event()

    def wait_for_lock() -> None:
        with waiter.locked():
            entered.set()

    with holder.locked():
        thread = threading.Thread(target=wait_for_lock)
        thread.start()
        assert not entered.wait(0.3)
    assert entered.wait(10)
    thread.join(10)


def test_the_file_storage_reads_what_the_keyring_wrote(tmp_path: Path) -> None:
    """The file backend is the keyring's own layout: same refs, same bytes, same counter."""
    folder = tmp_path / "keyring"
    keyring = Keyring(folder, InMemoryKeyProvider())
    keyring.current(AGENT, "agent-1")
    keyring.shred(SUBJECT, "subject-1")
    storage = KeyringFolder(folder)
    refs = [keyring.ref(AGENT, "agent-1"), keyring.ref(SUBJECT, "subject-1")]
    assert storage.list_refs() == sorted(refs, key=bytes.hex)
    for ref in refs:
        assert storage.read_entry(ref) == keyring.entry_path(ref).read_bytes()
    assert storage.read_meta() == (folder / "keyring.json").read_bytes()
    assert storage.counter() == keyring.epoch()
