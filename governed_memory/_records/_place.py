"""Where a workspace's records live: the file place, one governance folder.

:class:`FolderPlace` implements the storage seam's ``RecordPlace`` over the
governance folder exactly as the reference lays it out: a log is a JSON Lines
file appended with ``O_APPEND`` and fsynced, a document a file replaced
atomically (temporary file, fsync, rename, folder fsync), a lock an ``flock``
on a lock file, and a name like ``tombstones/<id>.json`` that file in that
sub-folder. The record codec above it (``_jsonl``, ``_document``) decides
every byte; the place only stores them.

Readers take no lock. :meth:`FolderPlace.read_lines` first ``stat``s the log:
unchanged (inode, size, mtime) means nothing new; a larger file of the same
inode whose last bytes read are still in place is read from the last offset
only; anything else (replaced, truncated, rewritten in place) is read again
in full. Only complete lines (ending in ``\\n``) are returned, so a torn line
stays invisible until the next writer cuts it.

Not safe on network filesystems with weak flock/append/rename semantics (NFS, SMB).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .._base import (
    TMP_PREFIX,
    FileLock,
    atomic_write,
    ensure_private_dir,
    fsync_dir,
    open_private,
    remove_stale_temps,
    write_all,
)
from .._errors import StorageError
from .._protocols import LineBatch, WriteGuard

if TYPE_CHECKING:
    from .._protocols import RecordLock, RecordPlace

__all__ = ["FolderPlace", "as_place", "file_lock"]

_TAIL = 256  # bytes kept to recognise the same file grown by appends
_CHUNK = 65536


@dataclass(frozen=True)
class _Mark:
    """Where a reader of one log file stands: the file seen, the bytes read, their last ones."""

    ident: tuple[int, int, int]  # inode, size, mtime of the file last read
    offset: int
    tail: bytes


class FolderPlace:
    """The records of one workspace in its governance folder (``RecordPlace``).

    Args:
        folder: the governance folder (created 0700 by the first write,
            never by a read).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._paths: dict[str, str] = {}  # stat()ed on every gate check: no pathlib there

    def path(self, name: str) -> Path:
        """The file holding ``name``."""
        return self.folder / name

    def describe(self, name: str) -> str:
        return str(self.path(name))

    def lock(self, name: str) -> FileLock:
        return FileLock(self.path(name))

    def names(self, folder: str, suffix: str, *, hidden: bool = False) -> list[str]:
        try:
            names = os.listdir(self.folder / folder)
        except FileNotFoundError:
            return []
        return [
            n
            for n in names
            if n.endswith(suffix)
            and not n.startswith(TMP_PREFIX)
            and (n.startswith(".") if hidden else not n.startswith("."))
        ]

    def remove_temps(self, folder: str) -> int:
        return remove_stale_temps(self.folder / folder)

    # -- line stores ---------------------------------------------------------

    def read_lines(self, name: str, mark: Any) -> LineBatch | None:
        path = self._paths.get(name)
        if path is None:
            path = self._paths[name] = os.fspath(self.path(name))
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None if mark is None else LineBatch((), None, True, "byte 0")
        if mark is not None and (st.st_ino, st.st_size, st.st_mtime_ns) == mark.ident:
            return None
        with open(path, "rb") as handle:
            fst = os.fstat(handle.fileno())  # the file actually read, even if replaced since
            restarted = not _continues(handle, fst, mark)
            offset, tail = (0, b"") if restarted else (mark.offset, mark.tail)
            handle.seek(offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]  # a torn last line stays invisible
        if complete:
            tail = (tail + complete)[-_TAIL:]
        ident = (fst.st_ino, fst.st_size, fst.st_mtime_ns)
        new = _Mark(ident, offset + len(complete), tail)
        return LineBatch(complete.splitlines(), new, restarted, f"byte {offset}")

    def unchanged(self, name: str, mark: Any) -> WriteGuard | None:
        return None  # a file's stat is as cheap as a guard would be

    def stored_lines(self, name: str, *, under: Any = None) -> list[bytes] | None:
        data = self._stored(name)
        return None if data is None else _complete_lines(data)

    def _stored(self, name: str) -> bytes | None:
        try:
            return self.path(name).read_bytes()
        except FileNotFoundError:
            return None

    def append_lines(
        self,
        name: str,
        make: Callable[[Callable[[], Iterator[bytes]]], Sequence[bytes]],
        *,
        under: Any = None,
    ) -> None:
        path = self.path(name)
        ensure_private_dir(path.parent)
        created = not os.path.exists(path)
        fd = open_private(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            _repair_torn_tail(fd)
            size = os.fstat(fd).st_size  # the torn tail is cut: the file ends with a full line
            lines = make(lambda: _reversed_lines(fd, size))
            write_all(fd, b"".join(line + b"\n" for line in lines))
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(path.parent)

    def replace_lines(self, name: str, lines: Sequence[bytes], *, under: Any = None) -> bool:
        data = b"".join(line + b"\n" for line in lines)
        if data == self._stored(name):
            return False
        atomic_write(self.path(name), data)
        return True

    def create_lines(self, name: str) -> None:
        path = self.path(name)
        ensure_private_dir(path.parent)
        os.close(open_private(path, os.O_WRONLY | os.O_CREAT))
        fsync_dir(path.parent)

    def delete_lines(self, name: str) -> None:
        path = self.path(name)
        path.unlink(missing_ok=True)
        with suppress(FileNotFoundError):
            fsync_dir(path.parent)

    # -- documents -----------------------------------------------------------

    def read_document(self, name: str, mark: Any, *, under: Any = None) -> tuple[Any, bytes | None]:
        path = os.fspath(self.path(name))
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None, None
        ident = (st.st_ino, st.st_size, st.st_mtime_ns)
        if ident == mark:
            return ident, None
        try:
            with open(path, "rb") as handle:
                return ident, handle.read()
        except FileNotFoundError:
            return None, None

    def write_document(self, name: str, data: bytes, *, under: Any = None) -> None:
        path = self.path(name)
        ensure_private_dir(path.parent)
        atomic_write(path, data)

    def delete_document(self, name: str) -> bool:
        path = self.path(name)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        fsync_dir(path.parent)
        return True

    def __repr__(self) -> str:
        return f"FolderPlace({str(self.folder)!r})"


def as_place(folder: Path | RecordPlace) -> RecordPlace:
    """The place a registry was given: a folder path means :class:`FolderPlace` on it."""
    if isinstance(folder, (str, os.PathLike)):
        return FolderPlace(Path(folder))
    return folder


def file_lock(lock: RecordLock, what: str) -> FileLock:
    """``lock`` as the file lock it is in the file place (for the file-only tools).

    Raises:
        StorageError: the records are not kept in files (use the lock itself).
    """
    if not isinstance(lock, FileLock):
        raise StorageError(f"the {what} is not kept in files, so its lock is no lock file")
    return lock


def _continues(handle: BinaryIO, fst: os.stat_result, mark: _Mark | None) -> bool:
    """Whether ``handle`` is the file already read, grown by appends only.

    Same inode and not shorter is not enough (a rewrite may reuse a freed
    inode number), so the last bytes read before must still be there.
    """
    if mark is None or fst.st_ino != mark.ident[0] or fst.st_size < mark.offset:
        return False
    handle.seek(mark.offset - len(mark.tail))
    return handle.read(len(mark.tail)) == mark.tail


def _reversed_lines(fd: int, size: int) -> Iterator[bytes]:
    """The lines of the first ``size`` bytes of ``fd``, last first, read back in chunks."""
    pos, carry = size, b""
    while pos > 0:
        start = max(0, pos - _CHUNK)
        parts = (os.pread(fd, pos - start, start) + carry).split(b"\n")
        pos = start
        carry = parts.pop(0) if pos > 0 else b""  # may start mid-line: joined with the next chunk
        yield from reversed(parts)


def _repair_torn_tail(fd: int) -> None:
    """Cut a partial last line a crashed writer left (it was never acknowledged)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - _CHUNK)
    while True:
        chunk = os.pread(fd, size - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return
        if start == 0:
            os.ftruncate(fd, 0)
            return
        start = max(0, start - _CHUNK)


def _complete_lines(data: bytes) -> list[bytes]:
    """The complete lines of ``data`` (a torn last line, without its newline, left out)."""
    return data[: data.rfind(b"\n") + 1].splitlines()


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    _conforms: type[RecordPlace] = FolderPlace
