"""Chaining in the background: the waiting audit entries of a process, chained soon after.

A memory store that cannot join its audit entry to the chain's end (another
writer, thread, process or host moved it) commits the entry with its rows into
``audit_pending`` instead, taking no lock of the log (``_audit``'s group
chaining). The add is then done: its block and its entry are committed, the
entry MACed under the audit key and kept by a trigger until the chain holds it.
:class:`Chainer` chains it: one thread per process, woken by each such commit,
chains every entry waiting, from every host, in one transaction under the
log's lock, and again while more arrived meanwhile. Entries committed while a
chaining runs go into the next, so the chain's writes cost one commit per
batch, not per entry.

Nothing depends on this thread for correctness: every read of the log chains
what is waiting first, a killed process's entries are chained by the next
chaining of any host, and at exit the thread's last entries are chained once
more (best effort; not when its last chaining failed: an exit does not wait out
the connection timeout of a server that is away). A chaining that fails (the
server away) is retried with a growing delay and logged.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Callable

__all__ = ["Chainer"]

logger = logging.getLogger("governed_memory")

_RETRY_FIRST = 0.05  # seconds before the first retry of a failed chaining, doubled up to
_RETRY_MOST = 5.0


class Chainer:
    """Run ``chain()`` in a background thread soon after each :meth:`soon` (see the module docstring).

    ``chain()`` chains every waiting entry; an exception it raises is logged and
    the call retried. Safe across threads; a forked child starts its own thread.
    """

    def __init__(self, chain: Callable[[], object], where: str) -> None:
        self._chain = chain
        self._where = where
        self._mutex = threading.Lock()
        self._wake = threading.Condition(self._mutex)
        self._asked = False  # a chaining was asked for since the last one began
        self._busy = False  # the thread is chaining
        self._failing = False  # the thread's last chaining failed (the server away)
        self._thread: tuple[int, threading.Thread] | None = None
        self._closed = False
        _live(self)

    def soon(self) -> None:
        """Chain what is waiting now, in the background (a commit just added to it)."""
        with self._mutex:
            if self._closed:
                return
            self._asked = True
            running = self._thread
            if running is None or running[0] != os.getpid() or not running[1].is_alive():
                thread = threading.Thread(
                    target=self._run, name="governed-memory-audit-chaining", daemon=True
                )
                self._thread = (os.getpid(), thread)
                thread.start()
            else:
                self._wake.notify()

    @property
    def idle(self) -> bool:
        """Whether no chaining is running or asked for (a moment's view: threads move on)."""
        with self._mutex:
            return not self._asked and not self._busy

    def _run(self) -> None:
        delay = _RETRY_FIRST
        while True:
            with self._mutex:
                self._busy = False
                while not self._asked and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                self._asked = False
                self._busy = True
            try:
                self._chain()
            except Exception as exc:  # logged, retried: the entries stay waiting meanwhile
                logger.warning(
                    "chaining the waiting audit entries into %s failed (%s); retrying in "
                    "%.2f s (they stay committed in governed_memory.audit_pending)",
                    self._where,
                    exc,
                    delay,
                )
                with self._mutex:
                    self._failing = True
                    self._asked = True
                    self._wake.wait(delay)
                delay = min(delay * 2, _RETRY_MOST)
            else:
                self._failing = False
                delay = _RETRY_FIRST

    def flush(self) -> bool:
        """Chain what is waiting now, in this thread (before the process exits).

        False, without trying, when the background chaining's last try failed
        (the server away): trying again here would hold the exit for the
        connection timeout, so the entries are left waiting. True otherwise.
        """
        with self._mutex:
            running, failing, closed = self._thread, self._failing, self._closed
        if closed or running is None or running[0] != os.getpid():
            return True  # flushed when closed, or nothing of this process's was handed to it
        if failing:
            return False
        self._chain()
        return True

    def finish(self, when: str) -> None:
        """:meth:`flush`, then :meth:`close`: best effort, a failure logged (``when``: for it).

        Entries a failed flush leaves are committed and waiting: the next
        chaining of any host, or the next read of the log, chains them.
        """
        try:
            if not self.flush():
                logger.warning(
                    "audit entries left waiting %s (the last chaining into %s failed, so it "
                    "is not retried now): chained by the next append",
                    when,
                    self._where,
                )
        except Exception as exc:  # best effort: the next chaining of any host takes them
            logger.warning(
                "audit entries left waiting %s (%s): chained by the next append", when, exc
            )
        self.close()

    def close(self) -> None:
        """Stop the thread once its chaining in progress is done (entries left wait)."""
        with self._mutex:
            self._closed = True
            self._wake.notify_all()


_LIVE: weakref.WeakSet[Chainer] = weakref.WeakSet()
_hook = threading.Lock()
_hooked = False


def _live(chainer: Chainer) -> None:
    """Flush ``chainer`` at exit: one hook for every chainer, registered with the first,
    holding none of them (a chainer dropped leaves nothing behind)."""
    global _hooked
    with _hook:
        if not _hooked:
            atexit.register(_at_exit)
            _hooked = True
        _LIVE.add(chainer)


def _at_exit() -> None:
    for chainer in list(_LIVE):
        chainer.finish("at exit")
