"""Crash-safe, private file operations shared by every store.

Everything written is private whatever the umask: folders 0700, files 0600
(the reference leaves memory world-readable, defect D7). Replacements go
through a temporary file in the same folder, fsync, rename and an fsync of the
folder, so a crash leaves either the old or the new file, never a torn one.
Temporary files start with ``.gm-tmp-`` and are ignored by readers.

The same operations relative to an open folder, refusing symbolic links
(an agent folder's tree), are :mod:`._nofollow`'s; the path-based ones here
apply them to the folder they are given, which may be a link.

POSIX only (fcntl, directory fsync). Not safe on network filesystems whose
rename or flock semantics are weaker than a local disk's (NFS, SMB).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ._nofollow import (
    DIR_MODE,
    FILE_MODE,
    TMP_PREFIX,
    atomic_write_at,
    link_exclusive_at,
    remove_temps_at,
    write_all,
    write_temp_at,
)

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "TMP_PREFIX",
    "atomic_write",
    "ensure_private_dir",
    "fsync_dir",
    "link_exclusive",
    "open_private",
    "remove_stale_temps",
    "write_all",
    "write_temp",
]


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` and any missing parents 0700; make ``path`` itself 0700.

    Parents that already exist keep their mode: the workspace may be a folder
    the operator set up on purpose.
    """
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, DIR_MODE)
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(path))
    if (path.stat().st_mode & 0o777) != DIR_MODE:
        os.chmod(path, DIR_MODE)


def open_private(path: Path, flags: int) -> int:
    """``os.open`` that leaves the file 0600, also when it existed before."""
    fd = os.open(path, flags | os.O_CLOEXEC, FILE_MODE)
    try:
        if (os.fstat(fd).st_mode & 0o777) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def fsync_dir(path: Path) -> None:
    """Make a rename or link inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _folder(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def write_temp(folder: Path, data: bytes) -> Path:
    """Write ``data`` to a new fsynced 0600 temporary file in ``folder``."""
    with _folder(folder) as fd:
        return folder / write_temp_at(fd, data)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    with _folder(path.parent) as fd:
        atomic_write_at(fd, path.name, data)


def link_exclusive(folder: Path, data: bytes, names: Iterable[str]) -> Path:
    """Durably create a new file holding ``data`` under the first free name.

    ``names`` is an iterable of candidate names, tried in order. The name is
    claimed with ``link``, which fails when the name exists, so two writers
    (threads or processes) never overwrite each other's file.
    """
    with _folder(folder) as fd:
        return folder / link_exclusive_at(fd, data, names, folder)


def remove_stale_temps(folder: Path) -> int:
    """Delete temporary files a crashed writer left in ``folder``; return how many.

    Only call this while holding the folder's lock, so no live writer's
    temporary file is removed.
    """
    try:
        with _folder(folder) as fd:
            return remove_temps_at(fd)
    except (FileNotFoundError, NotADirectoryError):
        return 0
