"""Descriptor-relative file operations that never follow a symbolic link (issue 13, finding 1)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from governed_memory._base import (
    FolderLock,
    atomic_write_at,
    exists_at,
    link_exclusive_at,
    open_beneath,
    open_file_at,
    read_at,
    remove_temps_at,
)
from governed_memory._errors import UnsafePathError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret").write_bytes(b"secret")
    os.chmod(folder / "secret", 0o644)
    os.chmod(folder, 0o755)
    return folder


def test_open_beneath_refuses_a_link_below_the_root_and_chmods_nothing(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "agents"
    root.mkdir()
    (root / "Evil").symlink_to(outside)
    for create in (False, True):
        with pytest.raises(UnsafePathError) as caught:
            open_beneath(root, ["Evil"], create=create)
        assert caught.value.path == root / "Evil"
    with pytest.raises(UnsafePathError):
        open_beneath(root, ["Evil", "subjects"], create=True)
    assert _mode(outside) == 0o755
    assert sorted(os.listdir(outside)) == ["secret"]


def test_open_beneath_follows_the_root_and_creates_the_rest_0700(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.chmod(real, 0o755)
    root = tmp_path / "agents"
    root.symlink_to(real)  # the operator's link: followed
    fd = open_beneath(root, ["A", "subjects", "p"], create=True)
    os.close(fd)
    assert _mode(real) == 0o755  # the operator's folder keeps its mode
    assert _mode(real / "A") == _mode(real / "A" / "subjects") == _mode(real / "A/subjects/p")
    assert _mode(real / "A") == 0o700


def test_open_beneath_without_create_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_beneath(tmp_path, ["missing"])
    assert not (tmp_path / "missing").exists()


def test_file_operations_refuse_a_link_and_leave_its_target_alone(
    tmp_path: Path, outside: Path
) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "MEMORY.md").symlink_to(outside / "secret")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(UnsafePathError):
            open_file_at(fd, "MEMORY.md", os.O_RDWR | os.O_APPEND, folder / "MEMORY.md")
        with pytest.raises(UnsafePathError):
            read_at(fd, "MEMORY.md", folder / "MEMORY.md")
        with pytest.raises(UnsafePathError):
            exists_at(fd, "MEMORY.md", folder / "MEMORY.md")
        assert link_exclusive_at(fd, b"new", ["MEMORY.md", "other"], folder) == "other"
        atomic_write_at(fd, "MEMORY.md", b"replaced")  # replaces the link itself
    finally:
        os.close(fd)
    assert (outside / "secret").read_bytes() == b"secret"
    assert _mode(outside / "secret") == 0o644
    assert not (folder / "MEMORY.md").is_symlink()
    assert (folder / "MEMORY.md").read_bytes() == b"replaced"


def test_remove_temps_at_unlinks_a_temp_link_never_its_target(
    tmp_path: Path, outside: Path
) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / ".gm-tmp-0011").symlink_to(outside / "secret")
    (folder / ".gm-tmp-0022").write_bytes(b"old text")
    (folder / "MEMORY.md").write_bytes(b"kept")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert remove_temps_at(fd) == 2
    finally:
        os.close(fd)
    assert os.listdir(folder) == ["MEMORY.md"]
    assert (outside / "secret").read_bytes() == b"secret"


def test_a_folder_lock_with_nofollow_refuses_a_linked_folder(tmp_path: Path, outside: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "Evil").symlink_to(outside)
    lock = FolderLock(agents / "Evil", nofollow=1)
    for create in (True, False):
        with pytest.raises(UnsafePathError), lock.held(create=create):
            pass
    assert _mode(outside) == 0o755  # the reference chmods it 0700 through the link
    lock.drop()


def test_a_folder_replaced_by_a_link_while_held_is_not_current(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    lock = FolderLock(agents / "A", nofollow=1)
    with lock.held():
        (agents / "A").rename(agents / "moved")
        (agents / "A").symlink_to(agents / "moved")  # same folder, through a link
        assert not lock.current()
    with pytest.raises(UnsafePathError), lock.held():
        pass
    lock.drop()


def test_a_folder_lock_without_nofollow_follows_as_before(tmp_path: Path) -> None:
    """The keyring's folder may be a link an operator pointed anywhere."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "keyring").symlink_to(real)
    lock = FolderLock(tmp_path / "keyring")
    with lock.held():
        assert lock.current()
    lock.drop()
