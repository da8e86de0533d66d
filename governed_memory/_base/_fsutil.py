"""Crash-safe, private file operations shared by every store.

Everything written is private whatever the umask: folders 0700, files 0600
(the reference leaves memory world-readable, defect D7). Replacements go
through a temporary file in the same folder, fsync, rename and an fsync of the
folder, so a crash leaves either the old or the new file, never a torn one.
Temporary files start with ``.gm-tmp-`` and are ignored by readers.

POSIX only (fcntl, directory fsync). Not safe on network filesystems whose
rename or flock semantics are weaker than a local disk's (NFS, SMB).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

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

DIR_MODE = 0o700
FILE_MODE = 0o600
TMP_PREFIX = ".gm-tmp-"


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


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(path: Path) -> None:
    """Make a rename or link inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_temp(folder: Path, data: bytes) -> Path:
    """Write ``data`` to a new fsynced 0600 temporary file in ``folder``."""
    tmp = folder / f"{TMP_PREFIX}{secrets.token_hex(8)}"
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    tmp = write_temp(path.parent, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def link_exclusive(folder: Path, data: bytes, names: Iterable[str]) -> Path:
    """Durably create a new file holding ``data`` under the first free name.

    ``names`` is an iterable of candidate names, tried in order. The name is
    claimed with ``link``, which fails when the name exists, so two writers
    (threads or processes) never overwrite each other's file.
    """
    tmp = write_temp(folder, data)
    try:
        for name in names:
            target = folder / name
            try:
                os.link(tmp, target)
            except FileExistsError:
                continue
            except OSError as exc:  # filesystems without hard links
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                # Claim the name with an empty placeholder, then rename the
                # complete file over it: a crash leaves an empty file or the
                # whole one, never a torn archive, and never overwrites a
                # file another writer claimed.
                try:
                    os.close(open_private(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    continue
                os.replace(tmp, target)
            fsync_dir(folder)
            return target
        raise FileExistsError(f"no free name left in {folder}")
    finally:
        tmp.unlink(missing_ok=True)


def remove_stale_temps(folder: Path) -> int:
    """Delete temporary files a crashed writer left in ``folder``; return how many.

    Only call this while holding the folder's lock, so no live writer's
    temporary file is removed.
    """
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if entry.name.startswith(TMP_PREFIX):
            Path(entry.path).unlink(missing_ok=True)
            removed += 1
    return removed
