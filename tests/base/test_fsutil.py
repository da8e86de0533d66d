"""Private, crash-safe file operations (fixes D4 and D7 at the lowest level)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from governed_memory._base import _fsutil
from governed_memory._base._fsutil import (
    DIR_MODE,
    FILE_MODE,
    TMP_PREFIX,
    atomic_write,
    ensure_private_dir,
    link_exclusive,
    open_private,
    remove_stale_temps,
    write_all,
    write_temp,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o077], ids=["umask000", "umask022", "umask077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_ensure_private_dir_creates_missing_parents_0700_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    target = tmp_path / "ws" / "agents" / "A"
    ensure_private_dir(target)
    for folder in (tmp_path / "ws", tmp_path / "ws" / "agents", target):
        assert _mode(folder) == DIR_MODE


def test_ensure_private_dir_tightens_the_target_but_not_existing_parents(tmp_path: Path) -> None:
    parent = tmp_path / "ws"
    parent.mkdir(mode=0o755)
    os.chmod(parent, 0o755)
    target = parent / "A"
    target.mkdir()
    os.chmod(target, 0o755)  # as the reference leaves it (D7)
    ensure_private_dir(target)
    assert _mode(target) == DIR_MODE
    assert _mode(parent) == 0o755  # the operator's workspace keeps its mode


def test_ensure_private_dir_refuses_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "A"
    blocker.write_text("not a folder")
    with pytest.raises(NotADirectoryError):
        ensure_private_dir(blocker)
    with pytest.raises(OSError):
        ensure_private_dir(blocker / "child")


def test_open_private_creates_0600_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "f"
    os.close(open_private(path, os.O_WRONLY | os.O_CREAT))
    assert _mode(path) == FILE_MODE


def test_open_private_tightens_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    os.chmod(path, 0o644)
    os.close(open_private(path, os.O_RDONLY))
    assert _mode(path) == FILE_MODE
    assert path.read_text() == "x"


def test_write_all_retries_short_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def one_byte_at_a_time(fd: int, data: bytes | memoryview) -> int:
        calls.append(1)
        return real_write(fd, bytes(data[:1]))

    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    monkeypatch.setattr(os, "write", one_byte_at_a_time)
    try:
        write_all(fd, b"hello")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"hello"
    assert len(calls) == 5


def test_write_temp_leaves_a_complete_private_file(tmp_path: Path, umask: int) -> None:
    tmp = write_temp(tmp_path, b"data")
    assert tmp.parent == tmp_path
    assert tmp.name.startswith(TMP_PREFIX)
    assert tmp.read_bytes() == b"data"
    assert _mode(tmp) == FILE_MODE


def test_write_temp_removes_its_file_when_writing_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_temp(tmp_path, b"data")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_replaces_content_privately(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"old")
    os.chmod(path, 0o644)
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new"
    assert _mode(path) == FILE_MODE
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]


def test_atomic_write_failure_keeps_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"old")

    def failing_replace(src: object, dst: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="I/O error"):
        atomic_write(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]


def test_atomic_write_fsyncs_the_file_and_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    atomic_write(tmp_path / "f", b"x")
    assert synced == ["file", "dir"]


def test_link_exclusive_claims_the_first_free_name_and_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(b"first")
    target = link_exclusive(tmp_path, b"second", ["a.md", "b.md", "c.md"])
    assert target == tmp_path / "b.md"
    assert (tmp_path / "a.md").read_bytes() == b"first"
    assert target.read_bytes() == b"second"
    assert _mode(target) == FILE_MODE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.md"]  # no temp left


def test_link_exclusive_raises_when_every_name_is_taken(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(b"first")
    with pytest.raises(FileExistsError):
        link_exclusive(tmp_path, b"second", ["a.md"])
    assert [p.name for p in tmp_path.iterdir()] == ["a.md"]


def test_link_exclusive_works_without_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On filesystems without link(), a placeholder claims the name, then a rename fills it."""

    def no_links(src: object, dst: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    (tmp_path / "a.md").write_bytes(b"first")
    target = link_exclusive(tmp_path, b"second", ["a.md", "b.md"])
    assert target == tmp_path / "b.md"
    assert (tmp_path / "a.md").read_bytes() == b"first"
    assert target.read_bytes() == b"second"
    assert _mode(target) == FILE_MODE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.md"]


def test_link_exclusive_propagates_other_errors_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(src: object, dst: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "link", broken)
    with pytest.raises(OSError, match="I/O error"):
        link_exclusive(tmp_path, b"x", ["a.md"])
    assert list(tmp_path.iterdir()) == []


def test_remove_stale_temps_only_removes_temporary_files(tmp_path: Path) -> None:
    (tmp_path / f"{TMP_PREFIX}abc").write_bytes(b"torn")
    (tmp_path / "MEMORY.md").write_bytes(b"keep")
    assert remove_stale_temps(tmp_path) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]
    assert remove_stale_temps(tmp_path / "missing") == 0


def test_module_exports_what_it_documents() -> None:
    for name in _fsutil.__all__:
        assert hasattr(_fsutil, name)
