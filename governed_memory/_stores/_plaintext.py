"""The plaintext agent-folder store: MEMORY.md exactly as the reference writes it.

Locking: an ``flock`` on the agent folder itself (an open descriptor of the
directory), so no lock file appears beside MEMORY.md and the lock survives
MEMORY.md being replaced by a compaction in another process. A
``threading.Lock`` serialises threads sharing one store, since flock locks
belong to the open file description, not the thread. Appends reuse one
O_APPEND descriptor; after taking the lock a ``stat`` tells whether another
process replaced or removed MEMORY.md, in which case it is reopened.

When MEMORY.md's size is not what this store's last append left, another
writer came in between, possibly one killed in the middle of a large write:
the tail is checked and the torn line ended before the new block (see
``_tail_fix``), so a torn block never hides the next record. A forked child
drops the descriptors it inherited, whose flock it would share with the
parent.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .._clock import Clock, SystemClock
from .._errors import StorageError
from .._format import has_records
from .._fsutil import (
    TMP_PREFIX,
    atomic_write,
    ensure_private_dir,
    link_exclusive,
    open_private,
    remove_stale_temps,
    write_all,
)
from .._workspace import ARCHIVE_DIR

__all__ = ["PlaintextAgentStore", "archive_names"]

ARCHIVE_STAMP = "%Y-%m-%d_%H-%M-%S"


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


class PlaintextAgentStore:
    """MEMORY.md and ``archive/`` in the reference's plaintext format.

    Args:
        memory_path: the MEMORY.md file.
        header: builds the header of a new MEMORY.md (called under the lock).
        clock: names archives.
        fsync_appends: fsync after every append. Off by default, as in the
            reference: an acknowledged add survives a crash of the process
            (the kernel holds the write) but not a power cut. Compactions
            always fsync.
    """

    def __init__(
        self,
        memory_path: Path,
        header: Callable[[], str],
        *,
        clock: Clock | None = None,
        fsync_appends: bool = False,
    ) -> None:
        self._memory_path = Path(memory_path)
        self._folder = self._memory_path.parent
        # str forms for the per-append syscalls (pathlib's conversions cost
        # as much as a stat on the add() hot path).
        self._folder_str = os.fspath(self._folder)
        self._memory_name = self._memory_path.name
        self._header = header
        self._clock: Clock = clock or SystemClock()
        self._fsync_appends = fsync_appends
        self._mutex = threading.RLock()
        self._depth = 0  # nesting of _locked() in the thread holding _mutex
        self._dirfd: int | None = None
        self._dir_ident: tuple[int, int] | None = None
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        # Size of MEMORY.md after this store's last append: when the file
        # still has that size, its tail is known to end a block.
        self._end: int | None = None
        _LIVE_STORES.add(self)

    @property
    def folder(self) -> Path:
        return self._folder

    @property
    def memory_path(self) -> Path:
        return self._memory_path

    @property
    def archive_dir(self) -> Path:
        return self._folder / ARCHIVE_DIR

    # -- locking ---------------------------------------------------------

    def _open_dir(self) -> int:
        if self._dirfd is None:
            ensure_private_dir(self._folder)
            dirfd = os.open(self._folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            fst = os.fstat(dirfd)
            self._dirfd, self._dir_ident = dirfd, (fst.st_dev, fst.st_ino)
        return self._dirfd

    def _dir_is_current(self) -> bool:
        try:
            st = os.stat(self._folder_str)
        except FileNotFoundError:
            return False
        if (st.st_dev, st.st_ino) != self._dir_ident:
            return False
        # A folder created at the path after ours was removed may reuse its
        # inode number; a removed folder has no links left.
        return self._dirfd is not None and os.fstat(self._dirfd).st_nlink > 0

    def _acquire(self, mode: int) -> int:
        """Take the folder's flock (mutex held); return the locked descriptor.

        Nested acquisitions by the thread that holds the lock only count
        depth: a second flock would convert (downgrade) the held lock and the
        inner release would drop it while the outer block still relies on it.
        """
        if self._depth:
            assert self._dirfd is not None
            self._depth += 1
            return self._dirfd
        while True:
            dirfd = self._open_dir()
            fcntl.flock(dirfd, mode)
            if self._dir_is_current():
                break
            # The folder was removed (or replaced) while we waited: lock
            # the folder that now stands at the path instead.
            fcntl.flock(dirfd, fcntl.LOCK_UN)
            self._drop_fds()
        self._depth = 1
        return dirfd

    def _release(self, dirfd: int) -> None:
        self._depth -= 1
        if not self._depth:
            fcntl.flock(dirfd, fcntl.LOCK_UN)

    @contextmanager
    def _locked(self, mode: int = fcntl.LOCK_EX) -> Iterator[None]:
        with self._mutex:
            dirfd = self._acquire(mode)
            try:
                yield
            finally:
                self._release(dirfd)

    @contextmanager
    def lock(self) -> Iterator[None]:
        try:
            with self._locked():
                yield
        except OSError as exc:
            raise StorageError(f"cannot lock agent folder {self._folder}: {exc}") from exc

    # -- the active memory ---------------------------------------------

    def _create_memory(self) -> None:
        # Claimed with link(), never renamed over: a MEMORY.md that appeared
        # meanwhile is kept as it is, never replaced by an empty header.
        with suppress(FileExistsError):
            link_exclusive(self._folder, self._header().encode("utf-8"), [self._memory_name])

    def _memory_fd(self) -> int:
        """The append descriptor of the current MEMORY.md (lock held).

        The lock holder has checked that the folder at the path is the locked
        one, so MEMORY.md is looked up relative to the folder's descriptor
        (one path component instead of the whole path).
        """
        try:
            st = os.stat(self._memory_name, dir_fd=self._dirfd)
        except FileNotFoundError:
            st = None
        if st is not None and self._fd is not None and self._ident == (st.st_dev, st.st_ino):
            return self._fd
        self._close_file()
        if st is None:
            self._create_memory()
        # Readable too, so the tail can be checked before an append.
        fd = open_private(self._memory_path, os.O_RDWR | os.O_APPEND)
        fst = os.fstat(fd)
        self._fd, self._ident = fd, (fst.st_dev, fst.st_ino)
        return fd

    def ensure(self) -> None:
        try:
            with self._locked():
                self._memory_fd()
        except OSError as exc:
            raise StorageError(f"cannot create {self._memory_path}: {exc}") from exc

    def read_memory(self) -> str | None:
        if not os.path.isdir(self._folder_str):
            return None  # reading never creates the agent folder
        try:
            with self._locked(fcntl.LOCK_SH):
                try:
                    data = self._memory_path.read_bytes()
                except FileNotFoundError:
                    return None
        except StorageError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read {self._memory_path}: {exc}") from exc
        return _decode(data, self._memory_path)

    def append(self, block: str) -> None:
        data = block.encode("utf-8")
        try:
            with self._mutex:
                if self._depth or not self._append_fast(data):
                    dirfd = self._acquire(fcntl.LOCK_EX)
                    try:
                        fd = self._memory_fd()
                        size = os.fstat(fd).st_size
                        if size != self._end:
                            prefix, size = _tail_fix(fd, size)
                            data = prefix + data
                        self._write(fd, data)
                        self._end = size + len(data)
                    finally:
                        self._release(dirfd)
        except OSError as exc:
            raise StorageError(f"cannot append to {self._memory_path}: {exc}") from exc

    def _append_fast(self, data: bytes) -> bool:
        """Append through the cached descriptors if both are still current.

        The hot path of Conversation.add, with the same lock and the same
        checks as :meth:`_acquire` + :meth:`_memory_fd` (the folder at the
        path is the locked one; MEMORY.md in it is the open file), inlined
        because each Python call here costs a fair part of a syscall. Returns
        False, with nothing written and the lock released, when a check fails
        (another process compacted, or the folder was replaced): the caller
        then takes the general path, which reopens.
        """
        dirfd, fd = self._dirfd, self._fd
        if dirfd is None or fd is None:
            return False
        fcntl.flock(dirfd, fcntl.LOCK_EX)
        try:
            st = os.stat(self._folder_str)
            if (st.st_dev, st.st_ino) != self._dir_ident:
                return False
            st = os.stat(self._memory_name, dir_fd=dirfd)
            if (st.st_dev, st.st_ino) != self._ident:
                return False
            size = st.st_size
            if size != self._end:  # another writer appended since
                prefix, size = _tail_fix(fd, size)
                data = prefix + data
            written = os.write(fd, data)
            if written != len(data) or self._fsync_appends:
                self._write(fd, data[written:])
            self._end = size + len(data)
            return True
        except FileNotFoundError:
            return False
        finally:
            fcntl.flock(dirfd, fcntl.LOCK_UN)

    def _write(self, fd: int, data: bytes) -> None:
        """Write all of ``data`` (an os.write may be short), then fsync if configured."""
        write_all(fd, data)
        if self._fsync_appends:
            os.fsync(fd)

    def compact(self, first_block: str | None) -> Path | None:
        try:
            with self._locked():
                remove_stale_temps(self._folder)
                remove_stale_temps(self.archive_dir)
                archive = self._archive_current()
                fresh = self._header() + (first_block or "")
                atomic_write(self._memory_path, fresh.encode("utf-8"))
                self._close_file()
                return archive
        except StorageError:
            raise
        except OSError as exc:
            raise StorageError(
                f"compaction of {self._memory_path} failed, memory left unchanged: {exc}"
            ) from exc

    def _archive_current(self) -> Path | None:
        try:
            current = self._memory_path.read_bytes()
        except FileNotFoundError:
            return None
        if not has_records(_decode(current, self._memory_path)):
            return None
        ensure_private_dir(self.archive_dir)
        return link_exclusive(self.archive_dir, current, archive_names(self._clock.now()))

    # -- rewriting (erasure) -----------------------------------------------

    def rewrite(self, path: Path, text: str) -> None:
        target = Path(path)
        if target != self._memory_path and target.parent != self.archive_dir:
            raise StorageError(
                f"rewrite of {target} refused: only {self._memory_path} and files in "
                f"{self.archive_dir} belong to this store"
            )
        try:
            with self._locked():
                if not target.exists():
                    raise StorageError(f"rewrite of {target} refused: the file does not exist")
                # A crashed writer's temp file may hold the text being removed.
                remove_stale_temps(target.parent)
                atomic_write(target, text.encode("utf-8"))
                if target == self._memory_path:
                    self._close_file()
        except StorageError:
            raise
        except OSError as exc:
            raise StorageError(f"rewrite of {target} failed, file left unchanged: {exc}") from exc

    # -- archives ----------------------------------------------------------

    def list_archives(self) -> list[Path]:
        try:
            names = os.listdir(self.archive_dir)
        except FileNotFoundError:
            return []
        return [
            self.archive_dir / name
            for name in sorted(names)
            if name.startswith("history_")
            and name.endswith(".md")
            and not name.startswith(TMP_PREFIX)
        ]

    def read_archive(self, path: Path) -> str:
        try:
            return _decode(Path(path).read_bytes(), Path(path))
        except OSError as exc:
            raise StorageError(f"cannot read archive {path}: {exc}") from exc

    # -- descriptors -------------------------------------------------------

    def _close_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._ident, self._end = None, None, None

    def _drop_fds(self) -> None:
        self._close_file()
        if self._dirfd is not None:
            os.close(self._dirfd)
            self._dirfd = None

    def close(self) -> None:
        with self._mutex:
            if self._depth:  # closed inside lock(): keep the locked folder open
                self._close_file()
            else:
                self._drop_fds()

    def __del__(self) -> None:
        with suppress(Exception):
            self._drop_fds()

    def _after_fork(self) -> None:
        """Forget what a forked child inherited.

        The inherited folder descriptor shares the parent's open file
        description, and so its flock: parent and child would both "hold"
        the lock at once. The child closes its copies (the parent's lock and
        descriptors are unaffected) and reopens on next use. The mutex is
        replaced because a parent thread may have held it at fork time.
        """
        self._mutex = threading.RLock()
        self._depth = 0
        self._drop_fds()


# Every live store, so a forked child can drop inherited lock descriptors
# (multiprocessing forks by default on Linux). Weak: it keeps no store alive.
_LIVE_STORES: weakref.WeakSet[PlaintextAgentStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_LIVE_STORES):
        with suppress(Exception):
            store._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


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
