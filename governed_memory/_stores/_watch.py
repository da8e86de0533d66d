"""Notice, in one ``ioctl``, that a file held open was moved, replaced or removed.

The plaintext store keeps MEMORY.md open and must not append to it once
another process has replaced it (compaction and erasure rename a new file
over it), deleted it (retention, migration, the reference's reset), or
removed or moved the agent folder (erasure of an agent, an operator's
``mv``/``rm -r``). Checking with ``stat`` on every append costs two path
lookups; instead the store asks the kernel to report those changes through
inotify, and each append only asks whether anything was reported: a
``FIONREAD`` ioctl on the inotify descriptor (one cheap system call, no
object building). Every such change is reported before the process that
made it releases the folder lock, so an append that holds the lock and
finds nothing pending writes to the right file.

What is watched, per open MEMORY.md:

* the file itself (through ``/proc/self/fd``, so exactly the open inode):
  ``IN_ATTRIB`` (its link count changed: renamed over or unlinked, which
  holds even when a backup made with ``cp -al`` keeps another link),
  ``IN_MOVE_SELF`` (renamed away);
* the agent folder and every folder above it: ``IN_MOVE_SELF``,
  ``IN_DELETE_SELF``. A folder cannot be removed before MEMORY.md in it, so
  removal is seen on the file; a move anywhere up the path on the folder.
  Folders above the agent folder that the process may not read cannot be
  watched and are skipped: renaming those while an agent runs goes unseen
  until the next full check.

Anything else reported (a chmod, a hard link made, a queue overflow, an
event for a store closed since) only sends the next append through the full
check, which re-verifies with ``stat``. One inotify instance serves the
whole process (the kernel allows 128 per user by default); each open store
holds a handful of watches, shared when stores share folders. Without
inotify (not Linux, no procfs, limits reached) :func:`watch` returns None
and the store checks with ``stat`` on every append, as correct and slower.
A forked child never reads or changes its parent's instance (they share
it): it opens its own.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any

__all__ = ["Armed", "Watch", "Watcher", "arm", "disarm", "watch"]

IN_ATTRIB = 0x4
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
FILE_MASK = IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF
FOLDER_MASK = IN_MOVE_SELF | IN_DELETE_SELF
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, name length (name follows)


class Watch:
    """The watches of one open file and the folders above it.

    ``stale`` turns True when any of them reports a change; the owner then
    re-checks with ``stat`` and makes a new watch.
    """

    __slots__ = ("__weakref__", "stale", "wds")

    def __init__(self) -> None:
        self.stale = False
        self.wds: list[int] = []


class Watcher:
    """This process's inotify instance and which :class:`Watch` each watch serves.

    Args:
        fd: the inotify descriptor (non-blocking).
        add_watch: ``inotify_add_watch(fd, path, mask) -> wd``, -1 on error.
        rm_watch: ``inotify_rm_watch(fd, wd)``.
    """

    def __init__(
        self, fd: int, add_watch: Callable[[bytes, int], int], rm_watch: Callable[[int], int]
    ) -> None:
        self.fd = fd
        self.pid = os.getpid()
        # True while events are being read and not yet marked: an append that
        # found the queue empty meanwhile must wait for the marks (drain()).
        self.draining = False
        self._add_watch = add_watch
        self._rm_watch = rm_watch
        self._lock = threading.Lock()
        self._served: dict[int, weakref.WeakSet[Watch]] = {}
        self._released: list[Watch] = []  # to unregister at the next locked call

    def watch(self, fd: int, dirfd: int, folders: list[str]) -> Watch | None:
        """Watch open file ``fd``, open folder ``dirfd`` and the ``folders`` above it.

        None when the file or its folder cannot be watched.
        """
        watch = Watch()
        with self._lock:
            if os.getpid() != self.pid:
                return None
            self._reap()
            targets = [(f"/proc/self/fd/{fd}", FILE_MASK, True)]
            targets.append((f"/proc/self/fd/{dirfd}", FOLDER_MASK, True))
            targets.extend((path, FOLDER_MASK, False) for path in folders)
            for path, mask, required in targets:
                wd = self._add_watch(os.fsencode(path), mask)
                if wd < 0:
                    if required:
                        self._released.append(watch)
                        self._reap()
                        return None
                    continue  # a folder above we may not read: skipped (see module doc)
                watch.wds.append(wd)
                self._served.setdefault(wd, weakref.WeakSet()).add(watch)
        return watch

    def release(self, watch: Watch) -> None:
        """Stop serving ``watch``; remove the kernel watches nobody else uses.

        Never waits: a store's ``__del__`` calls this, and the garbage
        collector may run it inside this class's own locked sections (the
        lock is then taken, by this very thread). The watch is queued and
        unregistered now if the lock is free, else by the next locked call.
        """
        watch.stale = True
        self._released.append(watch)  # atomic: no lock needed
        if self._lock.acquire(blocking=False):
            try:
                self._reap()
            finally:
                self._lock.release()

    def _reap(self) -> None:
        """Unregister the released watches (lock held)."""
        if os.getpid() != self.pid:  # a forked child: the instance is the parent's
            self._released.clear()
            return
        while self._released:
            watch = self._released.pop()
            for wd in watch.wds:
                served = self._served.get(wd)
                if served is None:
                    continue
                served.discard(watch)
                if not served:
                    del self._served[wd]
                    self._rm_watch(wd)
            watch.wds = []

    def drain(self) -> None:
        """Read every pending event and mark the watches it concerns stale."""
        with self._lock:
            if os.getpid() != self.pid:
                return
            self._reap()
            self.draining = True
            try:
                while True:
                    try:
                        data = os.read(self.fd, 65536)
                    except BlockingIOError:
                        break
                    self._mark(data)
            finally:
                self.draining = False

    def _mark(self, data: bytes) -> None:
        pos = 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
            pos += _EVENT.size + length
            if mask & IN_Q_OVERFLOW:  # events were lost: any watch may have fired
                for served in self._served.values():
                    for watch in served:
                        watch.stale = True
                continue
            for watch in self._served.get(wd, ()):  # none: removed since (IN_IGNORED)
                watch.stale = True


_guard = threading.Lock()
_watcher: Watcher | None = None
_unavailable = False


def watcher() -> Watcher | None:
    """This process's :class:`Watcher`, created on first use; None without inotify."""
    global _watcher, _unavailable
    with _guard:
        if _watcher is None and not _unavailable:
            try:
                _watcher = _open_watcher()
            except OSError:
                _unavailable = True  # not Linux, or the per-user instance limit
        return _watcher


def watch(fd: int, dirfd: int, folder: str) -> tuple[Watcher, Watch] | None:
    """Watch open file ``fd`` in the open agent folder ``dirfd`` found at ``folder``."""
    found = watcher()
    if found is None:
        return None
    above = []
    path = os.path.realpath(folder)
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            break
        above.append(parent)
        path = parent
    made = found.watch(fd, dirfd, above)
    return None if made is None else (found, made)


Armed = tuple[int, int, int, bytearray, "Watcher", "Watch"]
"""What an append checks with one ioctl: (folder fd, file fd, inotify fd, ioctl
buffer, the watcher, the file's watch)."""


def arm(
    fd: int,
    dirfd: int,
    folder: str,
    name: str,
    ident: tuple[int, int] | None,
    folder_current: Callable[[], bool],
) -> tuple[Armed | None, bool]:
    """Watch the open memory file ``fd`` (lock held, ``fd`` just checked).

    Returns ``(armed, unavailable)``: ``armed`` is None when inotify cannot be
    had (``unavailable`` True: keep the full check for this file) or when the
    file changed while the watches were set (try again on the next append).
    """
    made = watch(fd, dirfd, folder)
    if made is None:
        return None, True
    found, file_watch = made
    # Check again now that the watches exist: a change made between the
    # caller's check and the watches would never be reported.
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        current = ident == (st.st_dev, st.st_ino) and folder_current()
    except FileNotFoundError:
        current = False
    if not current:
        found.release(file_watch)
        return None, False
    return (dirfd, fd, found.fd, bytearray(4), found, file_watch), False


def disarm(armed: Armed | None) -> None:
    """Release the watch of :func:`arm` (None: nothing to release)."""
    if armed is not None:
        armed[4].release(armed[5])


def _open_watcher() -> Watcher:
    import ctypes  # only when a store first appends, not at import

    libc: Any = ctypes.CDLL(None, use_errno=True)
    init = libc.inotify_init1
    add = libc.inotify_add_watch
    rm = libc.inotify_rm_watch
    init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
    add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
    rm.argtypes, rm.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"inotify_init1: {os.strerror(code) if code else 'failed'}")
    if not os.path.isdir("/proc/self/fd"):  # the file is watched through procfs
        os.close(fd)
        raise OSError(errno.ENOENT, "no /proc/self/fd")
    return Watcher(fd, lambda path, mask: int(add(fd, path, mask)), lambda wd: int(rm(fd, wd)))


def _after_fork_in_child() -> None:
    # The inherited descriptor is the parent's instance: reading it would
    # steal the parent's events. Close our copy (the parent keeps its own)
    # and open a new instance on first use.
    global _guard, _watcher, _unavailable
    _guard = threading.Lock()
    if _watcher is not None:
        with suppress(OSError):
            os.close(_watcher.fd)
    _watcher, _unavailable = None, False


os.register_at_fork(after_in_child=_after_fork_in_child)
