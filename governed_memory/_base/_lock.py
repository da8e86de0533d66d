"""The agent folder's inter-process lock, the one every store and the purge take.

An ``flock`` on an open descriptor of the agent folder itself: no lock file
beside the memory, and the lock survives the memory file being replaced. The
plaintext and encrypted stores both use this class, so they exclude each
other (a migration and a running agent never interleave). A re-entrant
``threading.RLock`` serialises the threads of one store; nested acquisitions
by the holder only count depth, since a second ``flock`` on the same
descriptor would convert and then release the outer lock. Not safe on
network filesystems with weaker flock semantics (NFS, SMB).
"""

from __future__ import annotations

import fcntl
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ._fsutil import ensure_private_dir

__all__ = ["FolderLock"]


class FolderLock:
    """Exclusive (or shared) lock of one folder, across threads and processes.

    Args:
        folder: the folder to lock (created 0700 when missing).
        on_drop: called when the descriptor is dropped because the folder
            was removed or replaced while waiting, so the owner can drop the
            descriptors it holds into the old folder.
    """

    def __init__(self, folder: Path, on_drop: Callable[[], None] | None = None) -> None:
        self.folder = Path(folder)
        self._folder_str = os.fspath(self.folder)
        self._on_drop = on_drop
        self.mutex = threading.RLock()
        self.depth = 0
        self.dirfd: int | None = None
        self._ident: tuple[int, int] | None = None
        _LIVE.add(self)

    def _open(self, create: bool) -> int:
        if self.dirfd is None:
            if create:
                ensure_private_dir(self.folder)
            fd = os.open(self._folder_str, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            st = os.fstat(fd)
            self.dirfd, self._ident = fd, (st.st_dev, st.st_ino)
        return self.dirfd

    def current(self) -> bool:
        """Whether the locked folder is still the one at the path (descriptor open)."""
        try:
            st = os.stat(self._folder_str)
        except FileNotFoundError:
            return False
        # A removed folder keeps its descriptor but has no links; a new folder
        # may reuse its inode number, which alone would look like ours.
        assert self.dirfd is not None
        return (st.st_dev, st.st_ino) == self._ident and os.fstat(self.dirfd).st_nlink > 0

    def acquire(self, mode: int = fcntl.LOCK_EX, *, create: bool = True) -> int:
        """Take the lock (hold :attr:`mutex`); return the locked folder descriptor.

        With ``create=False`` a missing folder raises ``FileNotFoundError``
        instead of being created (reads never create an agent).
        """
        if self.depth:
            assert self.dirfd is not None
            self.depth += 1
            return self.dirfd
        while True:
            fd = self._open(create)
            fcntl.flock(fd, mode)
            if self.current():
                break
            # The folder was removed or replaced while we waited: lock the
            # folder that now stands at the path instead.
            fcntl.flock(fd, fcntl.LOCK_UN)
            self.drop()
        self.depth = 1
        return fd

    def release(self) -> None:
        self.depth -= 1
        if not self.depth and self.dirfd is not None:
            fcntl.flock(self.dirfd, fcntl.LOCK_UN)

    @contextmanager
    def held(self, mode: int = fcntl.LOCK_EX, *, create: bool = True) -> Iterator[int]:
        """Hold the lock for a block; yields the folder descriptor."""
        with self.mutex:
            fd = self.acquire(mode, create=create)
            try:
                yield fd
            finally:
                self.release()

    def drop(self) -> None:
        """Close the folder descriptor (not while held)."""
        if self._on_drop is not None:
            self._on_drop()
        if self.dirfd is not None:
            os.close(self.dirfd)
            self.dirfd = None

    def _after_fork(self) -> None:
        """In a forked child: forget the inherited descriptor.

        It shares the parent's open file description, and so its flock:
        parent and child would both "hold" the lock. The mutex is replaced
        because a parent thread may have held it at fork time.
        """
        self.mutex = threading.RLock()
        self.depth = 0
        self.drop()


# Every live lock, so a forked child drops inherited lock descriptors
# (multiprocessing forks by default on Linux). Weak: it keeps nothing alive.
_LIVE: weakref.WeakSet[FolderLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for lock in list(_LIVE):
        with suppress(Exception):
            lock._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
