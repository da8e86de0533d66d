"""The plaintext agent-folder store: MEMORY.md exactly as the reference writes it.

Locking: the agent folder's ``flock`` (:class:`._folder_lock.FolderLock`,
shared with the encrypted store), taken for every append, so MEMORY.md is
never written while another process compacts or erases it. Appends reuse one
O_APPEND descriptor. Before writing, the store checks under the lock that
the file it holds open is still MEMORY.md at its path: another process may
have replaced it (compaction, erasure rewrite), deleted it, or removed or
moved the folder, and then the store reopens (or recreates) it instead of
writing into a file nobody reads. The check asks inotify whether any such
change was reported (one ioctl, see :mod:`._watch`); without inotify, or
after a report, it is a ``stat`` of the folder and of the file.

When MEMORY.md's size is not what this store's last append left, another
writer came in between, possibly one killed in the middle of a large write:
the tail is checked and the torn line ended before the new block (see
``_tail_fix``), so a torn block never hides the next record. A forked child
drops the descriptors it inherited (the lock does), since it would share
the parent's flock through them.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import termios
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from .._base import (
    ARCHIVE_DIR,
    Clock,
    GroupSync,
    SystemClock,
    atomic_write_at,
    link_exclusive_at,
    open_dir_at,
    open_file_at,
    read_at,
    write_all,
)
from .._errors import GovernedMemoryError, StorageError
from .._format import has_records
from ._files import AgentFolderStore
from ._watch import Armed, arm, disarm

__all__ = ["PlaintextAgentStore", "archive_names"]

ARCHIVE_STAMP = "%Y-%m-%d_%H-%M-%S"

_flock = fcntl.flock
_ioctl = fcntl.ioctl
_lseek = os.lseek
_LOCK_EX = fcntl.LOCK_EX
_LOCK_UN = fcntl.LOCK_UN
_SEEK_END = os.SEEK_END
_FIONREAD = termios.FIONREAD
_NOTHING = bytes(4)  # FIONREAD's answer when no event is pending


def archive_names(when: _dt.datetime) -> Iterator[str]:
    """Candidate archive names for a compaction at ``when``, in claim order.

    ``history_<stamp>.md`` first (the reference's name), then
    ``history_<stamp>_000001.md`` and so on for further compactions within the
    same second (defect D2). ``.`` sorts before ``_`` and the counter is
    zero-padded, so names sort chronologically.
    """
    stamp = when.strftime(ARCHIVE_STAMP)
    yield f"history_{stamp}.md"
    for seq in range(1, 1_000_000):
        yield f"history_{stamp}_{seq:06d}.md"


class PlaintextAgentStore(AgentFolderStore):
    """MEMORY.md and ``archive/`` in the reference's plaintext format.

    Args:
        memory_path: the MEMORY.md file.
        header: builds the header of a new MEMORY.md (called under the lock).
        clock: names archives.
        fsync_appends: make every append durable before it returns (the
            policy's ``durability.sync = "commit"``). Off by default, as in
            the reference: an acknowledged add survives a crash of the
            process (the kernel holds the write) but not a power cut.
            Compactions always fsync.
        syncer: shares the appends' ``fdatasync`` with the other writers of
            the file in this process (group commit; default: this store's own).
    """

    def __init__(
        self,
        memory_path: Path,
        header: Callable[[], str],
        *,
        clock: Clock | None = None,
        fsync_appends: bool = False,
        syncer: GroupSync | None = None,
        partition: str | None = None,
    ) -> None:
        self._memory_path = Path(memory_path)
        self._folder = self._memory_path.parent
        self._set_partition(partition)
        self._folder_str = os.fspath(self._folder)
        self._memory_name = self._memory_path.name
        self._header = header
        self._clock: Clock = clock or SystemClock()
        self._fsync_appends = fsync_appends
        self._syncer = syncer if syncer is not None else GroupSync()
        self._lock = self._folder_lock()
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        # Size of MEMORY.md after this store's last append: when the file
        # still has that size, its tail is known to end a block.
        self._end: int | None = None
        # Set by a full check (see _arm) for the fast one: the folder and file
        # descriptors, the inotify descriptor, a buffer for its FIONREAD, the
        # watcher and this file's watch. None: the next append checks with stat.
        self._armed: Armed | None = None
        self._arm_failed = False  # for the open file: do not retry on every append

    suffix = ".md"

    def _open_partition(self, partition: str) -> PlaintextAgentStore:
        return PlaintextAgentStore(
            self._partition_path(partition),
            self._header,
            clock=self._clock,
            fsync_appends=self._fsync_appends,
            syncer=self._syncer,
            partition=partition,
        )

    # -- the active memory ---------------------------------------------

    def _create_memory(self) -> None:
        # Claimed with link(), never renamed over: a MEMORY.md that appeared
        # meanwhile is kept as it is, never replaced by an empty header.
        dirfd = self._lock.dirfd
        assert dirfd is not None
        with suppress(FileExistsError):
            data = self._header().encode("utf-8")
            link_exclusive_at(dirfd, data, [self._memory_name], self._folder)

    def _memory_fd(self) -> int:
        """The append descriptor of the current MEMORY.md (lock held).

        The lock holder has checked that the folder at the path is the locked
        one (:meth:`FolderLock.acquire`), so MEMORY.md is looked up relative
        to the folder's descriptor. Arms the fast check of :meth:`append`.
        """
        dirfd = self._lock.dirfd
        try:
            st = os.stat(self._memory_name, dir_fd=dirfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        fd = self._fd
        if st is None or fd is None or self._ident != (st.st_dev, st.st_ino):
            self._close_file()
            if st is None:
                self._create_memory()
            # Readable too, so the tail can be checked before an append.
            # Never through a link (UnsafePathError): it could lead out of the workspace.
            fd = open_file_at(dirfd, self._memory_name, os.O_RDWR | os.O_APPEND, self._memory_path)
            fst = os.fstat(fd)
            self._fd, self._ident = fd, (fst.st_dev, fst.st_ino)
        if self._armed is None and not self._arm_failed:
            self._arm(fd)
        return fd

    def _arm(self, fd: int) -> None:
        """Watch ``fd`` so later appends check it with one ioctl (lock held, ``fd`` just checked).

        With ``fsync_appends`` too: a shared ``fdatasync`` on a fast disk
        costs less than the full check, and the watched path settles its
        write as the full one does (durable before it returns, unlocked).
        """
        dirfd = self._lock.dirfd
        assert dirfd is not None
        self._armed, self._arm_failed = arm(
            fd, dirfd, self._folder_str, self._memory_name, self._ident, self._lock.current
        )

    def _disarm(self) -> None:
        disarm(self._armed)
        self._armed = None

    def ensure(self) -> None:
        try:
            with self._lock.held():
                self._memory_fd()
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot create {self._memory_path}: {exc}") from exc

    def read_memory(self) -> str | None:
        try:
            # Reading never creates the agent folder (create=False).
            with self._lock.held(fcntl.LOCK_SH, create=False) as dirfd:
                try:
                    data = read_at(dirfd, self._memory_name, self._memory_path)
                except FileNotFoundError:
                    return None
        except FileNotFoundError:
            return None  # no agent folder (or it was removed meanwhile)
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read {self._memory_path}: {exc}") from exc
        return _decode(data, self._memory_path)

    def append(self, block: str) -> None:
        self.append_utf8(block.encode())

    def append_utf8(self, data: bytes) -> None:
        """:meth:`append` for a block already encoded as UTF-8.

        The default-mode ``Conversation.add`` builds its block as bytes: a
        block holds an em dash, so as ``str`` it is stored two bytes per
        character and encoding it costs more than the write.
        """
        lock = self._lock
        mutex = lock.mutex
        mutex.acquire()  # not "with": measurably slower on this path
        unsynced = None
        try:
            armed = self._armed
            if armed is not None and not lock.depth:
                # The hot path of Conversation.add: the lock, one ioctl asking
                # whether anything moved, replaced or removed the file or its
                # folders (see _watch), the write. Inlined: a Python call
                # costs a fair part of a system call here.
                dirfd, fd, ifd, pending, watcher, file_watch = armed
                _flock(dirfd, _LOCK_EX)
                try:
                    _ioctl(ifd, _FIONREAD, pending, True)
                    if pending != _NOTHING or watcher.draining:
                        watcher.drain()  # maybe another file's event: ours?
                    if not file_watch.stale:
                        size = _lseek(fd, 0, _SEEK_END)
                        if size != self._end:  # another writer appended since
                            prefix, size = _tail_fix(fd, size)
                            data = prefix + data
                        written = os.write(fd, data)
                        if written != len(data):
                            write_all(fd, data[written:])
                        self._end = size + len(data)
                        if not self._fsync_appends or self._ident is None:
                            return
                        unsynced = (os.dup(fd), self._ident)  # settled below, unlocked
                finally:
                    _flock(dirfd, _LOCK_UN)
                if unsynced is None:  # something changed: the full check, then a new watch
                    self._disarm()
            if unsynced is None:
                unsynced = self._append_checked(data)
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot append to {self._memory_path}: {exc}") from exc
        finally:
            mutex.release()
        if unsynced is not None:  # fsync_appends: durable before returning, outside the lock
            self._settle(self._syncer, *unsynced)

    def _append_checked(self, data: bytes) -> tuple[int, tuple[int, int]] | None:
        """Append after the full check with ``stat`` (mutex held); arms the fast one.

        With ``fsync_appends`` returns a ``dup`` of the descriptor and the
        file's identity, for :meth:`_settle` once the lock is released.
        """
        lock = self._lock
        lock.acquire(_LOCK_EX)
        try:
            fd = self._memory_fd()
            size = _lseek(fd, 0, _SEEK_END)
            if size != self._end:
                prefix, size = _tail_fix(fd, size)
                data = prefix + data
            write_all(fd, data)
            self._end = size + len(data)
            if self._fsync_appends and self._ident is not None:
                return os.dup(fd), self._ident
            return None
        finally:
            lock.release()

    def compact(self, first_block: str | None) -> str | None:
        with self._compacting():
            dirfd = self._lock.dirfd
            assert dirfd is not None
            archive = self._archive_current(dirfd)
            fresh = self._header() + (first_block or "")
            atomic_write_at(dirfd, self._memory_name, fresh.encode("utf-8"))
            self._close_file()
            return None if archive is None else archive.removesuffix(self.suffix)

    def _archive_current(self, dirfd: int) -> str | None:
        """Archive the current memory (lock held on ``dirfd``); the archive's file name."""
        try:
            current = read_at(dirfd, self._memory_name, self._memory_path)
        except FileNotFoundError:
            return None
        if not has_records(_decode(current, self._memory_path)):
            return None
        archive = open_dir_at(dirfd, ARCHIVE_DIR, self.archive_dir, create=True)
        try:
            names = archive_names(self._clock.now())
            return link_exclusive_at(archive, current, names, self.archive_dir)
        finally:
            os.close(archive)

    # -- files ---------------------------------------------------------------

    def _encode(self, name: str | None, text: str) -> bytes:
        return text.encode("utf-8")

    def _decode(self, data: bytes, path: Path) -> str:
        return _decode(data, path)

    # -- descriptors -------------------------------------------------------

    def _close_file(self) -> None:
        self._disarm()
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._ident, self._end, self._arm_failed = None, None, None, False

    def close(self) -> None:
        with self._lock.mutex:
            if self._lock.depth:  # closed inside lock(): keep the locked folder open
                self._close_file()
            else:
                self._lock.drop()  # closes the file too (on_drop)

    def __del__(self) -> None:
        with suppress(Exception):
            self._lock.drop()


def _tail_fix(fd: int, size: int) -> tuple[bytes, int]:
    """Repair MEMORY.md's tail before a new block; return (prefix, new size).

    The header and every block end in ``\\n\\n``. A file that does not (a block
    torn by a kill in the middle of a large write, a hand edit) would glue
    the next block's header to its last line, and the parser would read the
    new record as part of the torn one: the prefix ends the line and adds the
    blank line. A write torn inside a multi-byte character would leave the
    file undecodable for good, so those few bytes of the unacknowledged
    block are cut first (lock held: no other writer).
    """
    if size == 0:
        return b"", 0
    tail = os.pread(fd, 4, max(0, size - 4))
    cut = _incomplete_utf8(tail)
    if cut:
        os.ftruncate(fd, size - cut)
        size, tail = size - cut, tail[:-cut]
    if tail.endswith(b"\n\n"):
        return b"", size
    return (b"\n" if tail.endswith(b"\n") else b"\n\n"), size


def _incomplete_utf8(tail: bytes) -> int:
    """How many bytes at the end of ``tail`` start a UTF-8 character they do not finish."""
    for back in range(1, min(4, len(tail)) + 1):
        byte = tail[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back
            continue
        if byte >= 0xC0:  # a lead byte: is the character complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back if back < need else 0
        return 0  # ASCII
    return 0


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(
            f"{path} is not valid UTF-8 at byte {exc.start}; it was not written by "
            "governed_memory or the reference, or it is damaged"
        ) from exc


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import AgentStore

    _conforms: type[AgentStore] = PlaintextAgentStore
