"""Group commit inside one process: concurrent requests served by one transaction.

The audit chain has one end, so every append takes the log's advisory lock and
holds it until its commit, WAL flush included: appends are serialised, and the
server's own group commit (one flush for the commits of many sessions) never
gets two of them at once. :class:`Batcher` lets the threads of one process share
a transaction instead: a thread that finds no batch being written becomes the
*leader* and writes every request queued so far (its own among them) in one
transaction; threads arriving meanwhile queue and wait, and when the leader is
done the first of them leads the next batch. Each request still returns only
after the transaction holding it committed, and fails if it did not.

Processes and hosts are still serialised by the database's lock, one batch at a
time each. A forked child starts with no batch: the parent's queue and leader
are not its own.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["Batcher", "Request"]

Q = TypeVar("Q")
R = TypeVar("R")


class Request(Generic[Q, R]):
    """One caller's request (``item``), and its outcome once its batch was written."""

    __slots__ = ("_done", "_lead", "error", "item", "result")

    def __init__(self, item: Q) -> None:
        self.item = item
        self.result: R | None = None
        self.error: BaseException | None = None
        # Held until the request's batch was written (or it is to lead the next one):
        # a waiter blocks acquiring it. Each request is woken once, by one thread,
        # and a bare lock does that at a third of the cost of an Event's condition.
        self._done = threading.Lock()
        self._done.acquire()
        self._lead = False

    def _wake(self) -> None:
        self._done.release()

    def _wait(self) -> None:
        self._done.acquire()


class Batcher(Generic[Q, R]):
    """Serve concurrent :meth:`submit` calls by batches handed to ``write`` (see the module docstring).

    ``write(batch)`` writes the requests in one transaction and sets each
    request's ``result`` (or ``error``, for a request refused on its own); an
    exception it raises fails every request of the batch.
    """

    def __init__(self, write: Callable[[Sequence[Request[Q, R]]], None]) -> None:
        self._write = write
        self._reset()
        _LIVE.add(self)  # (weakly: one fork hook for all, none left behind by a dead one)

    def _reset(self) -> None:
        self._mutex = threading.Lock()
        self._queue: list[Request[Q, R]] = []
        self._leading = False

    @property
    def idle(self) -> bool:
        """Whether no batch is being written or waiting (a moment's view: threads move on)."""
        with self._mutex:
            return not self._leading and not self._queue

    def alone(self, item: Q) -> R:
        """``item``'s result, written in a transaction of its own, queued behind no batch.

        For a caller that holds one of the pool's connections (inside its own
        transaction): as a follower it would wait for a leader that may itself be
        waiting for that pool, for ever once every connection is held so.
        """
        request: Request[Q, R] = Request(item)
        self._write([request])
        return _outcome(request)

    def submit(self, item: Q) -> R:
        """``item``'s result, once the transaction that wrote it committed; its error else."""
        request: Request[Q, R] = Request(item)
        with self._mutex:
            self._queue.append(request)
            lead = not self._leading
            self._leading = True
        if not lead:
            request._wait()
        if not request._lead and not lead:
            return _outcome(request)
        try:
            with self._mutex:
                batch, self._queue = self._queue, []
            try:
                self._write(batch)
            except BaseException as exc:
                for each in batch:
                    each.result, each.error = None, exc
            for each in batch:
                if each is not request:
                    each._wake()
        finally:
            with self._mutex:
                if self._queue:  # arrived during the write: the first of them leads next
                    self._queue[0]._lead = True
                    self._queue[0]._wake()
                else:
                    self._leading = False
        return _outcome(request)


_LIVE: weakref.WeakSet[Batcher[Any, Any]] = weakref.WeakSet()


def _reset_in_child() -> None:
    """In a forked child (its only thread): no batch, and a mutex no parent thread holds."""
    for batcher in list(_LIVE):
        batcher._reset()


os.register_at_fork(after_in_child=_reset_in_child)


def _outcome(request: Request[Q, R]) -> R:
    if request.error is not None:
        raise request.error
    assert request.result is not None
    return request.result
