"""What the tests of one-round-trip transactions (``Database.pipelined`` and
``pipelined_row``) share: a spy on the transactions a database runs, and a connection
lost after a send."""

from __future__ import annotations

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
    monkeypatch.setattr(db, "pipelined_row", losing(db.pipelined_row))


class Spy:
    """The transactions ``db`` runs: each one-round-trip one (its row counts, and the locks
    it held) and how many ordinary ones took a lock.

    A ``pipelined_row`` (an audited append in one statement) is counted as the numbers of
    its row: through group chaining, whether the store's own end held, then the waiting
    entries and the rows it inserted; joined, whether the chain's end and the store's held,
    then the heads and the rows it wrote.
    """

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[list[int] | None] = []  # each one-round-trip transaction's row counts
        self.locks: list[Any] = []  # the lock (or locks) each held, in the same order
        self.locked = 0
        self._pipelined = db.pipelined
        self._pipelined_row = db.pipelined_row
        self._transaction = db.transaction
        monkeypatch.setattr(db, "pipelined", self.pipelined)
        monkeypatch.setattr(db, "pipelined_row", self.pipelined_row)
        monkeypatch.setattr(db, "transaction", self.transaction)

    def pipelined(self, *args: Any, **kwargs: Any) -> list[int] | None:
        counts = self._pipelined(*args, **kwargs)
        self.sent.append(counts)
        self.locks.append(kwargs.get("lock"))
        return counts

    def pipelined_row(self, *args: Any, **kwargs: Any) -> tuple[Any, ...] | None:
        row = self._pipelined_row(*args, **kwargs)
        self.sent.append(None if row is None else [int(value) for value in row])
        self.locks.append(kwargs.get("lock"))
        return row

    def transaction(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("lock") is not None:
            self.locked += 1
        return self._transaction(*args, **kwargs)

    @property
    def joined(self) -> list[list[int] | None]:
        """The counts of the joined writes (two locks: the agent's, then the chain's)."""
        return [
            counts
            for lock, counts in zip(self.locks, self.sent, strict=True)
            if isinstance(lock, tuple) and len(lock) == 2
        ]

    def reset(self) -> None:
        self.sent, self.locks, self.locked = [], [], 0
