"""``write_key_file``: a new key file is 0600, never replaces one, and a failure leaves none."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from governed_memory import ConfigurationError, LocalKeyProvider, StorageError, generate_master_key
from governed_memory._keys import write_key_file


def _failing_open(monkeypatch: pytest.MonkeyPatch, target: Path, error: OSError) -> None:
    """Make ``os.open`` of ``target`` raise ``error`` (root is never denied by file modes)."""
    real = os.open

    def fake(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if Path(path) == target:
            raise error
        return real(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", fake)


def test_writes_the_key_and_a_newline_mode_0600_whatever_the_umask(
    tmp_path: Path, open_umask: None
) -> None:
    key = generate_master_key()
    path = tmp_path / "master.key"
    write_key_file(path, key)
    assert path.read_text() == key + "\n"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert LocalKeyProvider.from_file(path).key_id == LocalKeyProvider.from_base64(key).key_id
    assert [p.name for p in tmp_path.iterdir()] == ["master.key"]


def test_never_overwrites_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_text("the old key\n")
    with pytest.raises(ConfigurationError, match="never overwritten") as caught:
        write_key_file(path, generate_master_key())
    assert str(path) in str(caught.value) and "Choose another path" in str(caught.value)
    assert path.read_text() == "the old key\n"


def test_a_missing_folder_is_named_with_the_fix_and_not_created(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    with pytest.raises(ConfigurationError) as caught:
        write_key_file(folder / "master.key", generate_master_key())
    message = str(caught.value)
    assert f"the folder {folder} does not exist" in message
    assert f"mkdir -m 700 {folder}" in message
    assert not folder.exists()


def test_a_file_in_place_of_the_folder_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "secrets"
    blocker.write_text("")
    with pytest.raises(ConfigurationError, match=f"{blocker} is not a folder"):
        write_key_file(blocker / "master.key", generate_master_key())


def test_an_unwritable_folder_gives_a_clear_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "master.key"
    _failing_open(monkeypatch, path, PermissionError(errno.EACCES, "Permission denied"))
    with pytest.raises(ConfigurationError) as caught:
        write_key_file(path, generate_master_key())
    message = str(caught.value)
    assert f"permission denied in the folder {tmp_path}" in message
    assert "choose a folder you can write to" in message
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_gives_a_clear_error_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    path = tmp_path / "master.key"
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(StorageError) as caught:
        write_key_file(path, generate_master_key())
    message = str(caught.value)
    assert str(path) in message and "No space left on device" in message
    assert "no file was kept" in message and "free some space" in message
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_disk_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "master.key"
    _failing_open(monkeypatch, path, OSError(errno.EROFS, "Read-only file system"))
    with pytest.raises(StorageError, match="mounted read-only; choose a path on a writable disk"):
        write_key_file(path, generate_master_key())
    assert list(tmp_path.iterdir()) == []
