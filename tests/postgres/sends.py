"""What the tests of one-round-trip transactions (``Database.pipelined`` and
``pipelined_rows``) share: a spy on the transactions a database runs, and a connection
lost after a send."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from governed_memory._postgres import Database


def lose_the_next_send(db: Database, monkeypatch: pytest.MonkeyPatch, *, committed: bool) -> None:
    """The next one-round-trip transaction runs (``committed``) or not, then reports the
    connection lost after the send, so that its outcome is unknown to the caller."""
    calls: list[int] = []

    def losing(real: Any) -> Any:
        def lost(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) > 1:
                return real(*args, **kwargs)
            if committed:
                real(*args, **kwargs)
            return None

        return lost

    monkeypatch.setattr(db, "pipelined", losing(db.pipelined))
    monkeypatch.setattr(db, "pipelined_rows", losing(db.pipelined_rows))


class Spy:
    """The transactions ``db`` runs: each one-round-trip one (its row counts, and the locks
    it held) and how many ordinary ones took a lock.

    A ``pipelined_rows`` (audited appends, one statement each) is counted as the numbers
    of each row: through group chaining, whether the store's own end held, then the
    waiting entries and the rows it inserted; joined, whether the chain's end and the
    store's held, then the heads and the rows it wrote.
    """

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[list[int] | None] = []  # each one-round-trip transaction's row counts
        self.locks: list[Any] = []  # the lock (or locks) each held, in the same order
        self.locked = 0
        self._pipelined = db.pipelined
        self._pipelined_rows = db.pipelined_rows
        self._transaction = db.transaction
        monkeypatch.setattr(db, "pipelined", self.pipelined)
        monkeypatch.setattr(db, "pipelined_rows", self.pipelined_rows)
        monkeypatch.setattr(db, "transaction", self.transaction)

    def pipelined(self, *args: Any, **kwargs: Any) -> list[int] | None:
        counts = self._pipelined(*args, **kwargs)
        self.sent.append(counts)
        self.locks.append(kwargs.get("lock"))
        return counts

    def pipelined_rows(self, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]] | None:
        rows = self._pipelined_rows(*args, **kwargs)
        statements = args[1] if len(args) > 1 else kwargs["statements"]
        for n in range(len(statements)):
            self.sent.append(None if rows is None else [int(value) for value in rows[n]])
            self.locks.append(kwargs.get("lock"))
        return rows

    def transaction(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("lock") is not None:
            self.locked += 1
        return self._transaction(*args, **kwargs)

    @property
    def joined(self) -> list[list[int] | None]:
        """The counts of the joined writes (the agents' locks, then the chain's)."""
        return [
            counts
            for lock, counts in zip(self.locks, self.sent, strict=True)
            if isinstance(lock, tuple) and len(lock) >= 2
        ]

    def reset(self) -> None:
        self.sent, self.locks, self.locked = [], [], 0


class HeldBatches:
    """Hold the first batch of ``batcher`` (a ``_batching.Batcher``) until released, so
    that the requests of other threads queue behind it and are written together, in order."""

    def __init__(self, batcher: Any) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.sizes: list[int] = []  # each batch's requests
        self._batcher = batcher
        real = batcher._write

        def held(batch: Any) -> None:
            self.sizes.append(len(batch))
            if len(self.sizes) == 1:
                self.entered.set()
                self.release.wait(60)
            real(batch)

        self._batcher._write = held

    def at_once(self, calls: list[Callable[[], Any]]) -> list[Any]:
        """Run each call in a thread of its own: the first leads a batch, held; the others
        queue behind it in the order given. Each call's result, or its exception."""
        got: list[Any] = [None] * len(calls)

        def run(n: int) -> None:
            try:
                got[n] = calls[n]()
            except Exception as exc:  # (the caller checks what each raised)
                got[n] = exc

        threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
        threads[0].start()
        assert self.entered.wait(60)
        for n, thread in enumerate(threads[1:], start=1):
            thread.start()
            for _ in range(12000):  # queued in the order given (at most a minute)
                if len(self._batcher._queue) >= n or not thread.is_alive():
                    break
                threading.Event().wait(0.005)
        self.release.set()
        for thread in threads:
            thread.join(60)
        return got


class HeldJoins(HeldBatches):
    """:class:`HeldBatches` of ``log``'s joins (``PgAuditStorage.join``)."""

    def __init__(self, log: Any) -> None:
        super().__init__(log._joiner)
