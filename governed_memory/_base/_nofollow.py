"""File operations relative to an open folder that never follow a symbolic link.

An agent's folder tree (``<workspace>/agents/<agent>/`` and everything in it)
is the library's own, and the library never makes a link there: a link could
lead out of the workspace and make an append, a chmod, a deletion or a print
happen elsewhere. So every open, create, chmod, rename, unlink and listing in
that tree goes through these helpers: names are resolved relative to the
descriptor of a folder that was itself opened without following a link
(``O_NOFOLLOW``; ``O_DIRECTORY`` for folders), modes are set with ``fchmod``
on the opened descriptor, and a link is refused with
:class:`~governed_memory._errors.UnsafePathError`. The decision is the
kernel's open itself, never an ``lstat`` before it, so a link planted between
a check and the open cannot win the race (``lstat`` only words the message).

The folders above the tree (the workspace, ``agents/``) are the operator's and
may be links on purpose: :func:`open_beneath` follows them and refuses links
only in the components below.

Crash safety is :mod:`._fsutil`'s (a temporary ``.gm-tmp-*`` file, fsync,
rename, folder fsync); the path-based helpers there are these applied to the
folder they are given. POSIX only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from .._errors import UnsafePathError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "TMP_PREFIX",
    "atomic_write_at",
    "exists_at",
    "link_exclusive_at",
    "lstat_at",
    "open_beneath",
    "open_dir_at",
    "open_file_at",
    "open_read_at",
    "read_at",
    "remove_temps_at",
    "write_all",
    "write_temp_at",
]

DIR_MODE = 0o700
FILE_MODE = 0o600
TMP_PREFIX = ".gm-tmp-"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _is_link(dir_fd: int | None, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _refused(dir_fd: int | None, name: str, path: Path, exc: OSError, what: str) -> OSError:
    """The error for a failed no-follow open: :class:`UnsafePathError` when ``name`` is a link."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(dir_fd, name):
        return UnsafePathError(path, what)
    return exc


def open_dir_at(dir_fd: int | None, name: str, path: Path, *, create: bool = False) -> int:
    """Open the folder ``name`` in ``dir_fd`` without following a link; return its descriptor.

    Args:
        dir_fd: the folder it is in (None: ``name`` is a path opened as such).
        name: its name there.
        path: its full path, for messages.
        create: create it 0700 when missing (``FileNotFoundError`` otherwise).

    Raises:
        UnsafePathError: ``name`` is a symbolic link.
        NotADirectoryError: ``name`` is a file.
    """
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        raise _refused(dir_fd, name, path, exc, "folder") from exc
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, DIR_MODE, dir_fd=dir_fd)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refused(dir_fd, name, path, exc, "folder") from exc
    _private(fd, DIR_MODE)  # mkdir's mode is filtered by the umask
    return fd


def open_beneath(root: Path, parts: Sequence[str], *, create: bool = False) -> int:
    """Open ``root/parts...``, following links in ``root`` but in none of ``parts``.

    ``root`` (e.g. ``<workspace>/agents``) is the operator's: it may be a link,
    and when ``create`` and it is missing it is created with its parents
    (0700), while folders that exist keep their mode. Each of ``parts`` is
    opened with :func:`open_dir_at` relative to the one before; with
    ``create`` missing ones are created 0700 and the last is made 0700.

    Raises:
        UnsafePathError: one of ``parts`` is a symbolic link.
        FileNotFoundError: a folder is missing (and ``create`` is false).
    """
    if create and not root.is_dir():
        from ._fsutil import ensure_private_dir

        ensure_private_dir(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    path = Path(root)
    try:
        for part in parts:
            path = path / part
            child = open_dir_at(fd, part, path, create=create)
            os.close(fd)
            fd = child
        if create and parts:
            _private(fd, DIR_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _private(fd: int, mode: int) -> None:
    if (os.fstat(fd).st_mode & 0o777) != mode:
        os.fchmod(fd, mode)


def open_file_at(dir_fd: int | None, name: str, flags: int, path: Path) -> int:
    """``os.open`` of ``name`` in ``dir_fd`` that refuses a link and leaves the file 0600.

    Raises:
        UnsafePathError: ``name`` is a symbolic link.
    """
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, "file") from exc
        raise
    try:
        _private(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_read_at(dir_fd: int | None, name: str, path: Path) -> int:
    """Open the file ``name`` in ``dir_fd`` read-only, refusing a link; its mode is left alone.

    Raises:
        UnsafePathError: ``name`` is a symbolic link.
        FileNotFoundError: there is no ``name``.
    """
    try:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, "file") from exc
        raise


def read_at(dir_fd: int | None, name: str, path: Path) -> bytes:
    """The bytes of the file ``name`` in ``dir_fd`` (``FileNotFoundError`` when missing).

    Reading does not change the file's mode (it is opened read-only, and only
    checked not to be a link).
    """
    fd = open_read_at(dir_fd, name, path)
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def lstat_at(dir_fd: int | None, name: str, path: Path) -> os.stat_result:
    """``name``'s own ``stat`` in ``dir_fd``; a link is refused (``FileNotFoundError`` when missing)."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(path)
    return st


def exists_at(dir_fd: int | None, name: str, path: Path) -> bool:
    """Whether ``name`` exists in ``dir_fd``; a link is refused, never taken for its target."""
    try:
        lstat_at(dir_fd, name, path)
    except FileNotFoundError:
        return False
    return True


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_temp_at(dir_fd: int | None, data: bytes | Iterable[bytes]) -> str:
    """Write ``data`` to a new fsynced 0600 temporary file in ``dir_fd``; return its name.

    ``data`` may be chunks, written as they come (a file made as it is
    written, never held whole); an error raised by them removes the file.
    """
    name = f"{TMP_PREFIX}{secrets.token_hex(8)}"
    fd = open_file_at(dir_fd, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, Path(name))
    try:
        for chunk in (data,) if isinstance(data, bytes) else data:
            write_all(fd, chunk)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)
    return name


def _fsync(dir_fd: int) -> None:
    os.fsync(dir_fd)


def atomic_write_at(dir_fd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in ``dir_fd`` with ``data`` atomically and durably.

    The rename replaces whatever entry has the name, a link included, and
    never writes through one.
    """
    tmp = write_temp_at(dir_fd, data)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    _fsync(dir_fd)


def link_exclusive_at(
    dir_fd: int, data: bytes | Iterable[bytes], names: Iterable[str], folder: Path
) -> str:
    """Durably create a new file holding ``data`` in ``dir_fd`` under the first free name.

    ``names`` are tried in order; the name is claimed with ``link``, which
    fails when the name exists (a link included), so two writers (threads or
    processes) never overwrite each other's file. ``folder`` names the folder
    in messages. Returns the name claimed. ``data``: as :func:`write_temp_at`.
    """
    tmp = write_temp_at(dir_fd, data)
    try:
        for name in names:
            try:
                os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
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
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
                    os.close(open_file_at(dir_fd, name, flags, folder / name))
                except FileExistsError:
                    continue
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            _fsync(dir_fd)
            return name
        raise FileExistsError(f"no free name left in {folder}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)


def remove_temps_at(dir_fd: int) -> int:
    """Delete the temporary files a crashed writer left in ``dir_fd``; return how many.

    ``unlink`` removes a link itself, never its target. Only call this while
    holding the folder's lock, so no live writer's temporary file is removed.
    """
    removed = 0
    with os.scandir(dir_fd) as entries:
        names = [
            e.name
            for e in entries
            if e.name.startswith(TMP_PREFIX) and not e.is_dir(follow_symlinks=False)
        ]
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
            removed += 1
    return removed
