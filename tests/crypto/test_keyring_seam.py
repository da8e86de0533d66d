"""The Keyring over its storage seam: a given storage gets exactly what the folder gets."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from governed_memory import FixedClock
from governed_memory._crypto._keyring import AGENT, SUBJECT, Keyring, KeyringFolder
from governed_memory._crypto._providers import LocalKeyProvider
from governed_memory._errors import StorageError
from governed_memory.testing import SeededRandom

MASTER = bytes(range(32))


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _use(keyring: Keyring) -> None:
    keyring.current(AGENT, "agent-1")
    keyring.current(SUBJECT, "subject-1")
    keyring.shred_subject("subject-1")
    keyring.current(SUBJECT, "subject-1")


def _keyring(folder: Path | None, storage: KeyringFolder | None = None) -> Keyring:
    return Keyring(
        folder,
        LocalKeyProvider(MASTER, random=SeededRandom(b"provider")),
        storage=storage,
        clock=FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0)),
        random=SeededRandom(b"keyring"),
    )


def test_a_keyring_on_a_folder_storage_writes_the_folders_bytes(tmp_path: Path) -> None:
    _use(_keyring(tmp_path / "by-folder"))
    _use(_keyring(None, KeyringFolder(tmp_path / "by-storage")))
    assert _files(tmp_path / "by-folder") == _files(tmp_path / "by-storage")
    assert "keyring.json" in _files(tmp_path / "by-folder")


def test_a_change_made_through_the_storage_is_seen_by_a_folder_keyring(tmp_path: Path) -> None:
    folder = tmp_path / "kr"
    reader = _keyring(folder)
    key = reader.current(SUBJECT, "subject-1")
    writer = _keyring(None, KeyringFolder(folder))
    epoch = reader.epoch()
    writer.shred_subject("subject-1")
    assert reader.epoch() == epoch + 1
    assert reader.key(key.ref, key.gen) is None


def test_a_keyring_needs_a_folder_or_a_storage() -> None:
    with pytest.raises(ValueError, match="storage="):
        Keyring(None, LocalKeyProvider(MASTER))


def test_a_keyring_on_a_storage_has_no_folder_to_give(tmp_path: Path) -> None:
    keyring = _keyring(None, KeyringFolder(tmp_path / "kr"))
    with pytest.raises(StorageError, match="has no folder"):
        _ = keyring.folder
    assert keyring.meta_path == tmp_path / "kr" / "keyring.json"


def test_a_forked_child_uses_the_keyring_at_once(tmp_path: Path) -> None:
    """Fork safety: the child gets fresh locks and counter mapping, and sees the parent's change."""
    keyring = _keyring(None, KeyringFolder(tmp_path / "kr"))
    key = keyring.current(SUBJECT, "subject-1")
    with keyring.locked():
        pid = os.fork()
        if pid == 0:  # the child: the parent's held lock state must not block it
            code = 0
            try:
                keyring.epoch()
                code = 0 if keyring.key(key.ref, key.gen) == key.key else 3
            except BaseException:
                code = 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
