"""Guarded writes: a transaction in one round trip while this process wrote last.

An append must know the end of what it appends to (the audit chain's newest
entry, a memory's last position and keys) before it can seal its rows. Read
under the lock, that end costs a round trip before the write. A process that
wrote the last rows already knows it, so it sends the whole transaction at once
(:meth:`~._db.Database.pipelined`): the advisory lock, then writes
guarded by ``WHERE`` clauses that hold only if the end is still the one
remembered. Another writer in between (another process or host), a change of
the keyring, a tampered head row: the guard fails, nothing is written, and the
writer reads the end under the lock and writes as before.

:class:`Guess` remembers that end, per process, and backs off while guesses keep
failing (several processes taking turns on one end): after each miss the next
``2**misses - 1`` appends (at most 63) skip the guess, so a contended end costs
at most one wasted round trip in many appends.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Guess"]

E = TypeVar("E")
_MAX_MISSES = 6


class Guess(Generic[E]):
    """The end this process last wrote (``E``), while it may still be the end.

    ``order``: for ends that only grow (the audit chain's seq), so that a
    writer reporting an end after another thread reported a later one leaves
    the later one remembered.
    """

    def __init__(self, order: Callable[[E], int] | None = None) -> None:
        self._order = order
        self._mutex = threading.Lock()
        self._end: tuple[int, E] | None = None  # (pid, end)
        self._misses = 0
        self._skip = 0

    def get(self) -> E | None:
        """The remembered end to guard a write on, or None (not known, or backing off)."""
        with self._mutex:
            if self._skip:
                self._skip -= 1
                return None
            end = self._end
        # A forked child knows nothing its parent wrote after the fork.
        return end[1] if end is not None and end[0] == os.getpid() else None

    def take(self) -> E | None:
        """:meth:`get`, and the end is no longer remembered until the taker says what it wrote.

        For writers of one process that must not both write after the same end
        (the audit chain's batches and its joined writes, ``_joined``): the one
        that took it writes after it, and the others read the end under the lock.
        """
        with self._mutex:
            if self._skip:
                self._skip -= 1
                return None
            end, self._end = self._end, None
        return end[1] if end is not None and end[0] == os.getpid() else None

    @property
    def contended(self) -> bool:
        """Whether a guess missed since the last hit (another writer moves this end too)."""
        with self._mutex:
            return self._misses > 0

    def skipped(self) -> None:
        """An append that did not guess (it read the end under the lock) after a miss: it
        counts as one of the appends that skip the guess, as if it had asked."""
        with self._mutex:
            if self._skip:
                self._skip -= 1

    def wrote(self, end: E) -> None:
        """Remember ``end``: this process just committed the write that made it."""
        with self._mutex:
            self._keep(end)

    def hit(self, end: E) -> None:
        """A guarded write committed, making ``end``."""
        with self._mutex:
            self._keep(end)
            self._misses = 0

    def _keep(self, end: E) -> None:
        held, pid = self._end, os.getpid()
        if (
            self._order is not None
            and held is not None
            and held[0] == pid
            and self._order(held[1]) > self._order(end)
        ):
            return  # another thread committed a later end meanwhile
        self._end = (pid, end)

    def forget(self, *, missed: bool = False) -> None:
        """The end is no longer known (``missed``: a guarded write found another end)."""
        with self._mutex:
            self._end = None
            if missed:
                self._misses = min(self._misses + 1, _MAX_MISSES)
                self._skip = 2**self._misses - 1
