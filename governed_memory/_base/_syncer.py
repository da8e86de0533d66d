"""Group commit: the threads that wrote to one file share its ``fdatasync``.

A writer appends under its file's lock, releases the lock, then calls
:meth:`GroupSync.sync`. The first caller becomes the file's leader and runs
one ``fdatasync``; callers that arrive meanwhile wait for the next round,
whose single ``fdatasync`` covers every write that finished before it
started. So N concurrent writers cost about two ``fdatasync`` calls per
round instead of N, and no lock that writers need is held while the disk
flushes.

Across processes the page cache is shared: one process's ``fdatasync``
covers another's completed writes too, and the kernel joins concurrent
calls on one journal commit (ext4, XFS). Each process runs its own rounds.

A failed ``fdatasync`` fails the callers of its round; the next caller
starts a new round. (The kernel may have dropped the failed pages: a write
reported as not durable may be lost, never one reported durable.)

A forked child starts with no rounds (the parent's may be mid-flight).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress

__all__ = ["GroupSync"]

_IDLE_KEPT = 256  # files remembered without a waiter before idle ones are forgotten


class _Rounds:
    """The sync rounds of one file: started, finished, the last that succeeded, the failure."""

    __slots__ = ("failure", "finished", "ok", "running", "started", "waiting", "wake")

    def __init__(self) -> None:
        self.wake = threading.Condition(threading.Lock())
        self.started = 0
        self.finished = 0
        self.ok = 0
        self.running = False
        self.waiting = 0
        self.failure: OSError | None = None


class GroupSync:
    """Leader/follower ``fdatasync`` per file, shared by the threads of a process.

    Args:
        sync: the call that makes a descriptor's data durable (default
            ``os.fdatasync``, looked up on each call; a test passes a
            recording double).
    """

    def __init__(self, sync: Callable[[int], None] | None = None) -> None:
        self._sync = sync
        self._guard = threading.Lock()
        self._files: dict[tuple[int, int], _Rounds] = {}
        _LIVE.add(self)

    def sync(self, fd: int, ident: tuple[int, int]) -> None:
        """Return once every write to the file that finished before this call is durable.

        Args:
            fd: an open descriptor of the file (kept open by the caller until
                this returns; any descriptor of the file serves).
            ident: the file's ``(st_dev, st_ino)``, which names its rounds.

        Raises:
            OSError: the ``fdatasync`` of the round that was to cover this
                call failed.
        """
        rounds = self._rounds(ident)
        with rounds.wake:
            rounds.waiting += 1
            try:
                need = rounds.started + 1  # the first round to start after this call
                while rounds.ok < need:
                    if rounds.finished >= need:  # every round since ``need`` failed
                        assert rounds.failure is not None
                        raise OSError(
                            rounds.failure.errno, rounds.failure.strerror
                        ) from rounds.failure
                    if rounds.running:
                        rounds.wake.wait()
                        continue
                    self._lead(rounds, fd)
            finally:
                rounds.waiting -= 1

    def _lead(self, rounds: _Rounds, fd: int) -> None:
        """Run one round (``rounds.wake`` held, released during the call)."""
        rounds.running = True
        rounds.started += 1
        this = rounds.started
        rounds.wake.release()
        failure: OSError | None = None
        try:
            (self._sync or os.fdatasync)(fd)
        except OSError as exc:
            failure = exc
        finally:
            rounds.wake.acquire()
            rounds.running = False
            rounds.finished = this
            if failure is None:
                rounds.ok = this
            else:
                rounds.failure = failure
            rounds.wake.notify_all()

    def _rounds(self, ident: tuple[int, int]) -> _Rounds:
        with self._guard:
            rounds = self._files.get(ident)
            if rounds is None:
                if len(self._files) >= _IDLE_KEPT:
                    # Replaced files (compaction, rollover) leave idle entries.
                    for key in [
                        k for k, r in self._files.items() if not r.running and not r.waiting
                    ]:
                        del self._files[key]
                rounds = self._files[ident] = _Rounds()
            return rounds

    def _after_fork(self) -> None:
        self._guard = threading.Lock()
        self._files = {}


_LIVE: weakref.WeakSet[GroupSync] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for syncer in list(_LIVE):
        with suppress(Exception):
            syncer._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
