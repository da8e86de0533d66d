"""The keyring: wrapped data keys, pseudonymous refs, races, and crypto-shredding."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from crypto_helpers import make_keyring

from governed_memory import memory_md_path
from governed_memory._crypto._keyring import AGENT, SUBJECT, Keyring
from governed_memory._crypto._providers import InMemoryKeyProvider
from governed_memory._errors import KeyProviderError
from governed_memory._format._records import render_block, render_header
from governed_memory._stores._encrypted import EncryptedAgentStore


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _block(text: str, subject: str | None = None) -> str:
    return render_block(
        "User", "2026-11-30T10:00:01", text, {"subject": subject} if subject else None
    )


def _store(workspace: Path, keyring: Keyring, agent: str = "A") -> EncryptedAgentStore:
    return EncryptedAgentStore(memory_md_path(agent, workspace), _header, keyring=keyring)


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_subject_ids_never_appear_in_the_keyring(tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "kr")
    keyring.current(SUBJECT, "patient-4711@example.org")
    keyring.current(AGENT, "Agent")
    data = _all_bytes(tmp_path / "kr")
    assert b"patient-4711" not in data
    assert b"Agent" in data  # agent names are folder names anyway, shown by `keys status`


def test_keys_are_stored_only_wrapped(tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "kr")
    key = keyring.current(SUBJECT, "s").key
    assert key not in _all_bytes(tmp_path / "kr")
    entry = json.loads(keyring.entry_path(keyring.ref(SUBJECT, "s")).read_bytes())
    assert entry["keys"]["1"]["wrapped_by"] == keyring.require_provider().key_id
    assert "key" not in entry["keys"]["1"]


def test_two_processes_creating_one_subject_key_agree(tmp_path: Path) -> None:
    first, second = make_keyring(tmp_path / "kr"), make_keyring(tmp_path / "kr")
    a = first.current(SUBJECT, "s")
    b = second.current(SUBJECT, "s")
    assert a == b


def test_refs_differ_per_kind_and_workspace(tmp_path: Path) -> None:
    one, two = make_keyring(tmp_path / "one"), make_keyring(tmp_path / "two")
    one.current(AGENT, "x")
    two.current(AGENT, "x")
    assert one.ref(AGENT, "x") != one.ref(SUBJECT, "x")
    assert one.ref(AGENT, "x") != two.ref(AGENT, "x")


def test_operations_that_need_the_master_key_say_how_to_give_it(tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "kr", None)
    with pytest.raises(KeyProviderError, match="GOVERNED_MEMORY_MASTER_KEY"):
        keyring.current(AGENT, "x")


def test_shredding_a_subject_erases_their_records_in_every_agent(
    workspace: Path, tmp_path: Path
) -> None:
    keyring = make_keyring(tmp_path / "keyring-outside-workspace")
    for agent in ("A", "B"):
        store = _store(workspace, keyring, agent)
        store.append(_block("about alice", "alice"))
        store.append(_block("about bob", "bob"))
        store.compact(_block("summary"))
        store.append(_block("alice again", "alice"))
    backup = tmp_path / "backup"
    shutil.copytree(workspace, backup)

    assert keyring.shred_subject("alice") == [1]

    for root in (workspace, backup):  # the live files and a copy taken before shredding
        for agent in ("A", "B"):
            store = _store(root, make_keyring(keyring.folder), agent)
            texts = [store.read_memory() or ""] + [
                store.read_archive(p) for p in store.list_archives()
            ]
            joined = "".join(texts)
            assert "alice" not in joined
            assert "about bob" in joined and "summary" in joined


def test_new_records_after_shredding_get_a_new_key(workspace: Path, tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "kr")
    store = _store(workspace, keyring)
    store.append(_block("old", "alice"))
    keyring.shred_subject("alice")
    store.append(_block("new", "alice"))
    assert _store(workspace, make_keyring(keyring.folder)).read_memory() == _header() + _block(
        "new", "alice"
    )
    assert keyring.current(SUBJECT, "alice").gen == 2


def test_shredding_is_seen_by_a_store_that_cached_the_key(workspace: Path, tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "kr")
    store = _store(workspace, keyring)
    store.append(_block("secret", "alice"))
    assert "secret" in (store.read_memory() or "")
    make_keyring(keyring.folder).shred_subject("alice")  # another process
    assert "secret" not in (store.read_memory() or "")


def test_shredding_an_agent_erases_all_its_files_and_restarts_its_memory(
    workspace: Path, tmp_path: Path
) -> None:
    keyring = make_keyring(tmp_path / "kr")
    store = _store(workspace, keyring)
    store.append(_block("agent secret"))
    store.append(_block("subject secret", "alice"))
    archive_id = store.compact(_block("summary"))
    assert archive_id is not None
    archive = store.archive_file(archive_id)
    backup = archive.read_bytes()
    assert keyring.shred_agent("A") == [1]
    fresh = _store(workspace, make_keyring(keyring.folder))
    assert fresh.read_memory() == ""
    assert fresh.read_archive(archive_id) == ""
    archive.write_bytes(backup)
    assert fresh.read_archive(archive_id) == ""
    fresh.append(_block("new life"))
    assert fresh.read_memory() == _header() + _block("new life")


def test_keyring_inside_a_backup_still_unwraps_shredded_keys(workspace: Path) -> None:
    """The documented limit (SECURITY.md): a backup that includes the keyring keeps the keys."""
    keyring = make_keyring(workspace / ".governed_memory" / "keyring")
    _store(workspace, keyring).append(_block("about alice", "alice"))
    backup = workspace.parent / "backup"
    shutil.copytree(workspace, backup)
    keyring.shred_subject("alice")
    assert "about alice" not in (
        _store(workspace, make_keyring(keyring.folder)).read_memory() or ""
    )
    restored = make_keyring(backup / ".governed_memory" / "keyring")
    assert "about alice" in (_store(backup, restored).read_memory() or "")


def test_in_memory_provider_calls_are_cached(tmp_path: Path) -> None:
    provider = InMemoryKeyProvider()
    keyring = Keyring(tmp_path / "kr", provider)
    for _ in range(5):
        keyring.current(AGENT, "a")
    unwraps = [c for c in provider.calls if c[0] == "unwrap"]
    assert len(unwraps) <= 2  # index key + data key, once each


def test_a_store_that_remembered_a_key_writes_under_the_new_one_after_shredding(
    workspace: Path, tmp_path: Path
) -> None:
    keyring = make_keyring(tmp_path / "kr")
    store = _store(workspace, keyring)
    store.append(_block("before", "alice"))  # the store now remembers alice's key
    make_keyring(keyring.folder).shred_subject("alice")  # another process
    store.append(_block("after", "alice"))
    text = _store(workspace, make_keyring(keyring.folder)).read_memory()
    assert text == _header() + _block("after", "alice")


def test_epoch_grows_with_every_key_change_seen_by_every_keyring(tmp_path: Path) -> None:
    one, two = make_keyring(tmp_path / "kr"), make_keyring(tmp_path / "kr")
    one.current(SUBJECT, "s")
    start = two.epoch()
    one.shred_subject("s")
    assert two.epoch() == start + 1
    one.current(SUBJECT, "s")  # a new generation after shredding
    assert two.epoch() == start + 2


def test_shredding_in_a_workspace_that_never_encrypted_anything_is_a_no_op(tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "kr")
    assert keyring.shred_subject("nobody") == []
    assert not (tmp_path / "kr").exists()


def test_the_keyring_lock_is_an_flock_on_its_folder_excluding_other_keyrings(
    tmp_path: Path,
) -> None:
    """Two keyrings on one folder exclude each other (as two processes do); no lock file."""
    first, second = make_keyring(tmp_path / "kr"), make_keyring(tmp_path / "kr")
    entered = threading.Event()

    def take() -> None:
        with second.locked():
            entered.set()

    with first.locked(), first.locked():  # re-entrant in one thread
        fd = os.open(tmp_path / "kr", os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):  # what a process of any release takes
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        worker = threading.Thread(target=take)
        worker.start()
        assert not entered.wait(0.2)
    worker.join(10)
    assert entered.is_set()
    assert sorted(p.name for p in (tmp_path / "kr").iterdir()) == ["keys"]
