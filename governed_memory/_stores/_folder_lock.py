"""The agent folder's inter-process lock, shared in shape with the plaintext store.

An ``flock`` on an open descriptor of the agent folder itself: no lock file
beside the memory, and the lock survives the memory file being replaced. The
plaintext and encrypted stores lock the same way, so they exclude each other
(a migration and a running agent never interleave). A re-entrant
``threading.RLock`` serialises the threads of one store; nested acquisitions
by the holder only count depth, since a second ``flock`` on the same
descriptor would convert and then release the outer lock. Not safe on
network filesystems with weaker flock semantics (NFS, SMB).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .._fsutil import ensure_private_dir

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

    def _open(self) -> int:
        if self.dirfd is None:
            ensure_private_dir(self.folder)
            fd = os.open(self._folder_str, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            st = os.fstat(fd)
            self.dirfd, self._ident = fd, (st.st_dev, st.st_ino)
        return self.dirfd

    def _current(self) -> bool:
        try:
            st = os.stat(self._folder_str)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == self._ident

    def acquire(self, mode: int = fcntl.LOCK_EX) -> int:
        """Take the lock (hold :attr:`mutex`); return the locked folder descriptor."""
        if self.depth:
            assert self.dirfd is not None
            self.depth += 1
            return self.dirfd
        while True:
            fd = self._open()
            fcntl.flock(fd, mode)
            if self._current():
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
    def held(self, mode: int = fcntl.LOCK_EX) -> Iterator[int]:
        """Hold the lock for a block; yields the folder descriptor."""
        with self.mutex:
            fd = self.acquire(mode)
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
