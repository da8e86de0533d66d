"""The file backend of single-holder leadership: an ``flock`` on a lock file, holder's pid inside.

Here, below the scheduler and the composition root, so that the file storage
(``governed_memory._governance.FileStorage``) can open it for any name;
``governed_memory._scheduler`` re-exports it under its old name.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ._lock import FileLock

__all__ = ["LeaderLock"]


class LeaderLock:
    """The scheduler's leadership: an ``flock`` on ``leader.lock``, the file backend of :class:`Leadership`.

    The holder writes its pid into the file, for admins (see :func:`schedule_status`).
    Each instance takes its own descriptor, so two instances in one process
    exclude each other; the kernel drops the lock when the holder dies.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = FileLock(self.path)
        self._fd: int | None = None
        self._mutex = threading.Lock()

    def try_acquire(self) -> bool:
        """Take leadership if free (without waiting); whether this instance leads now.

        Raises:
            OSError: the lock file cannot be created or written.
        """
        with self._mutex:
            if self._fd is not None:
                return True
            fd = self._lock.acquire(blocking=False)
            if fd is None:
                return False
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())  # who leads, for admins
            except BaseException:
                self._lock.release(fd)
                raise
            self._fd = fd
            return True

    def release(self) -> None:
        """Step down (nothing when not leading)."""
        with self._mutex:
            if self._fd is not None:
                self._lock.release(self._fd)
                self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __repr__(self) -> str:
        return f"LeaderLock({str(self.path)!r}, held={self.held})"
