"""The two inter-process locks: an agent folder's, and a lock file's.

:class:`FolderLock` is the agent folder's lock, the one every store and the
purge take. An ``flock`` on an open descriptor of the agent folder itself: no lock file
beside the memory, and the lock survives the memory file being replaced. The
plaintext and encrypted stores both use this class, so they exclude each
other (a migration and a running agent never interleave). A re-entrant
``threading.RLock`` serialises the threads of one store; nested acquisitions
by the holder only count depth, since a second ``flock`` on the same
descriptor would convert and then release the outer lock. Not safe on
network filesystems with weaker flock semantics (NFS, SMB).

:class:`FileLock` is an ``flock`` on a lock file beside the data it guards
(``consent.lock``, ``holds.lock``, an erasure's ``.<id>.lock``, the purge
and scheduler locks): the one way governance records are locked.

A forked child forgets the descriptors of both that it inherited (they share
the parent's open file description, and so its lock).
"""

from __future__ import annotations

import fcntl
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ._fsutil import ensure_private_dir, open_private
from ._nofollow import open_beneath

__all__ = ["FileLock", "FolderLock", "held_if_any"]


class FolderLock:
    """Exclusive (or shared) lock of one folder, across threads and processes.

    Args:
        folder: the folder to lock (created 0700 when missing).
        on_drop: called when the descriptor is dropped because the folder
            was removed or replaced while waiting, so the owner can drop the
            descriptors it holds into the old folder.
        nofollow: how many of the folder's last path components are the
            library's own and must not be symbolic links (an agent folder: 1;
            a subject's, ``<agent>/subjects/<p>``: 3). They are opened one by
            one with ``O_NOFOLLOW | O_DIRECTORY`` (:func:`._nofollow.open_beneath`),
            so a link there raises :class:`UnsafePathError`; the folders above
            may be links. 0 (the keyring's folder, which an operator may point
            anywhere): the path is opened as given.
    """

    def __init__(
        self, folder: Path, on_drop: Callable[[], None] | None = None, *, nofollow: int = 0
    ) -> None:
        self.folder = Path(folder)
        self._folder_str = os.fspath(self.folder)
        self._on_drop = on_drop
        self._nofollow = nofollow
        self.mutex = threading.RLock()
        self.depth = 0
        self.dirfd: int | None = None
        self._ident: tuple[int, int] | None = None
        _LIVE.add(self)

    def _open(self, create: bool) -> int:
        if self.dirfd is None:
            fd = self.open_folder(create=create)
            st = os.fstat(fd)
            self.dirfd, self._ident = fd, (st.st_dev, st.st_ino)
        return self.dirfd

    def open_folder(self, *, create: bool = False) -> int:
        """A new descriptor of the folder, opened as :meth:`acquire` opens it (close it).

        For a look without the lock (listing archives): with ``nofollow`` no
        link among the library's own components is followed.
        """
        own = self._nofollow
        if own:
            folder = self.folder if len(self.folder.parts) > own else self.folder.absolute()
            return open_beneath(folder.parents[own - 1], folder.parts[-own:], create=create)
        if create:
            ensure_private_dir(self.folder)
        return os.open(self._folder_str, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def current(self) -> bool:
        """Whether the locked folder is still the one at the path (descriptor open)."""
        try:
            # A link put in the folder's place is not the folder (nofollow).
            st = os.stat(self._folder_str, follow_symlinks=not self._nofollow)
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


class FileLock:
    """An ``flock`` on one lock file, across threads and processes.

    Every acquisition opens its own descriptor, so two threads (or two lock
    objects in one process) exclude each other as two processes do, and a
    lock taken by one thread may be released by another (a scheduler keeps
    its leadership across threads). It is therefore not re-entrant: callers
    that nest hold their own mutex around it. The kernel drops the lock when
    the holder's process dies, even by ``kill -9``.

    Args:
        path: the lock file (created 0600, its folder 0700, on the first
            acquisition that may create it). It carries no data of its own;
            a holder may write a note into it (the scheduler writes its pid).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._held: set[int] = set()
        self._guard = threading.Lock()
        _LIVE.add(self)

    def acquire(
        self, *, shared: bool = False, blocking: bool = True, create: bool = True
    ) -> int | None:
        """Take the lock on a new descriptor and return it (pass it to :meth:`release`).

        Args:
            shared: a shared lock (several holders) instead of an exclusive one.
            blocking: wait for the lock; without, None is returned at once
                when another descriptor holds it.
            create: create the lock file when missing; without, a missing
                file raises ``FileNotFoundError`` (a probe creates nothing).
        """
        if create:
            ensure_private_dir(self.path.parent)
            fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        else:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode if blocking else mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        with self._guard:
            self._held.add(fd)
        return fd

    def release(self, fd: int) -> None:
        """Release the lock taken on ``fd`` (closing the descriptor releases the flock).

        A no-op in a forked child for a descriptor inherited from the parent:
        the child forgot it, and the parent still holds the lock.
        """
        with self._guard:
            if fd not in self._held:
                return
            self._held.discard(fd)
        os.close(fd)

    @contextmanager
    def held(self, *, shared: bool = False) -> Iterator[int]:
        """Hold the lock (waiting for it) for a block; yields the descriptor."""
        fd = self.acquire(shared=shared)
        assert fd is not None  # a blocking acquisition returns a descriptor
        try:
            yield fd
        finally:
            self.release(fd)

    def _after_fork(self) -> None:
        """In a forked child: close the inherited descriptors without unlocking them."""
        self._guard = threading.Lock()
        held, self._held = self._held, set()
        for fd in held:
            with suppress(OSError):
                os.close(fd)

    def __repr__(self) -> str:
        return f"FileLock({str(self.path)!r})"


# Every live lock, so a forked child drops inherited lock descriptors
# (multiprocessing forks by default on Linux). Weak: it keeps nothing alive.
_LIVE: weakref.WeakSet[FolderLock | FileLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for lock in list(_LIVE):
        with suppress(Exception):
            lock._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def held_if_any(lock: FileLock | None) -> Iterator[None]:
    """Hold ``lock`` for a block; None holds nothing (the owner serialises writers itself)."""
    if lock is None:
        yield
        return
    with lock.held():
        yield
