"""The agent locks of the PostgreSQL memory: advisory locks, and the connection a lock holder uses.

Every writing transaction of an agent's memory takes
``pg_advisory_xact_lock(advisory_key("agent", name))`` (a subject's memory: its own
key, ``advisory_key("agent-subject", "<agent>/<partition>")``), so writers on every
host are serialised by the server and nothing is written that another writer has
not seen; the lock goes with the transaction, a killed writer's too.

``AgentStore.lock()`` must hold the agent across a read and a rewrite, with each
write inside still committed (acknowledged) when it returns. A transaction held
for the block could not commit its writes one by one, so the lock is the
session-level ``pg_advisory_lock`` on a connection of its own
(:meth:`Database.dedicated`), which the thread then uses for every statement of
the stores of one :class:`LockSessions` until its last lock is released: the
writes' ``pg_advisory_xact_lock`` on the same session is granted at once (the
re-entrancy the protocol asks for), and stores of other threads, processes and
hosts wait. One connection per locking thread holds all its locks, however many
subject memories an erasure locks at once. A lost connection releases its locks
on the server; the holder's next statement then fails (it never reconnects
inside a lock).

:meth:`LockSessions.append` writes plaintext appends of several threads in one
transaction (``_batching``): each thread's ``INSERT`` guarded in its own
statement, every agent's lock taken first, in one order, and the whole sent in
one round trip.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from .._errors import DatabaseError, GovernedMemoryError
from ._batching import Batcher, Request
from ._db import _import_psycopg, advisory_key, translate

if TYPE_CHECKING:
    import psycopg

    from ._db import Database

__all__ = ["Append", "LockSessions", "agent_key", "in_lock_order", "memory_error"]


def agent_key(agent: str, partition: str | None) -> int:
    """The advisory lock key of an agent's own memory (``partition`` None) or one subject's."""
    if partition is None:
        return advisory_key("agent", agent)
    return advisory_key("agent-subject", f"{agent}/{partition}")


def in_lock_order(locks: Iterable[tuple[tuple[str, str], int]]) -> list[int]:
    """The advisory keys of ``locks`` ((agent, partition), key), each once, in memory order.

    The order every writer holding several memories' locks takes them in: by
    agent, an agent's own memory (partition "") before its subjects'. Batches
    of several threads' appends take theirs so too, and cannot meet an erasure
    each waiting for a lock the other holds.
    """
    return list(dict.fromkeys(key for _, key in sorted(locks, key=lambda lock: lock[0])))


def memory_error(db: Database, exc: BaseException, doing: str) -> DatabaseError:
    """A one-line :class:`DatabaseError` for a psycopg error while ``doing``: the server, the fix."""
    psycopg, _ = _import_psycopg()
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
        return DatabaseError(
            f"the database at {db.where} has no governed_memory memory tables "
            f"({str(exc).strip().splitlines()[0]}) while {doing}; create them with: "
            "governed-memory db upgrade"
        )
    return translate(exc, where=db.where, doing=doing)


Statement = tuple[str, tuple[Any, ...]]
"""SQL and its parameters."""


class Append(NamedTuple):
    """A plaintext append to write with other threads' (:meth:`LockSessions.append`)."""

    memory: tuple[str, str]  # (agent, partition: "" for the agent's own): the lock order
    key: int  # the memory's advisory lock
    statement: Statement  # the one-row INSERT, guarded in its own WHERE
    doing: str  # what it is, for messages


@dataclass
class _Session:
    conn: psycopg.Connection[Any]
    stack: ExitStack
    held: dict[int, int] = field(default_factory=dict)


class LockSessions:
    """Transactions of one database's memory stores, through this thread's lock session if any.

    One per database (:meth:`of`): every store of the database sees the lock
    session of the thread, whichever set of stores opened it. With one per set
    (the gate's stores and a memory backend's), a thread holding an agent's lock
    through one would wait for ever on itself when writing through the other.
    """

    _of: ClassVar[weakref.WeakKeyDictionary[Database, LockSessions]] = weakref.WeakKeyDictionary()
    _of_mutex: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, db: Database) -> LockSessions:
        """The lock sessions of ``db``'s memory stores."""
        with cls._of_mutex:
            sessions = cls._of.get(db)
            if sessions is None:
                sessions = cls._of[db] = cls(db)
            return sessions

    def __init__(self, db: Database) -> None:
        # Weak: the registry of :meth:`of` must not keep its key alive (the stores do).
        self._db = weakref.ref(db)
        self._local = threading.local()
        self._appends: Batcher[Append, bool] = Batcher(self._write_appends)

    @property
    def db(self) -> Database:
        """The database (alive while any of its stores is)."""
        db = self._db()
        assert db is not None  # (a store holding these sessions holds the database)
        return db

    def _session(self) -> _Session | None:
        session: _Session | None = getattr(self._local, "session", None)
        return session

    def active(self) -> bool:
        """Whether this thread holds a lock session (its transactions then run on that session)."""
        return self._session() is not None

    def error(self, exc: BaseException, doing: str) -> DatabaseError:
        """A one-line :class:`DatabaseError` for a psycopg error while ``doing``."""
        return memory_error(self.db, exc, doing)

    @contextmanager
    def transaction(self, doing: str, key: int | None = None) -> Iterator[psycopg.Connection[Any]]:
        """One transaction, committed when the block ends; with ``key``, that advisory lock taken first.

        Raises:
            DatabaseError: the server failed or was lost; nothing was committed.
        """
        psycopg, _ = _import_psycopg()
        session = self._session()
        try:
            if session is None:
                with self.db.transaction(doing, lock=key) as conn:
                    yield conn
            else:
                with self.db.transaction_on(session.conn, doing, lock=key) as conn:
                    yield conn
        except GovernedMemoryError:
            raise
        except psycopg.Error as exc:
            raise self.error(exc, doing) from None

    def append(self, append: Append) -> bool:
        """Run ``append``'s one-row ``INSERT`` under its memory's lock, batched.

        Concurrent calls of this process's threads share one transaction and its
        commit (``_batching``): one round trip for the locks and every statement.
        The locks are taken in the order of the memories (agent, then its own
        memory before its subjects'), the order in which a thread holding
        several (an erasure, a key rotation) takes them. Returns whether the
        statement wrote its row, once committed; False also when it was in a
        batch the server refused (nothing of it was written: the caller appends
        the usual way, which reports its own error). Only for a caller outside
        any lock session or transaction of its thread.

        Raises:
            DatabaseError: the server refused this statement alone (nothing was
                committed), or the connection was lost after the send (whether
                it committed is unknown: not ``retryable``).
        """
        psycopg, _ = _import_psycopg()
        try:
            return self._appends.submit(append)
        except GovernedMemoryError:
            raise
        except psycopg.Error as exc:
            raise self.error(exc, append.doing) from None

    def _write_appends(self, batch: Sequence[Request[Append, bool]]) -> None:
        appends = [request.item for request in batch]
        doing = appends[0].doing if len(batch) == 1 else "appending to the memories"
        locks = in_lock_order((a.memory, a.key) for a in appends)
        try:
            counts = self.db.pipelined(doing, [a.statement for a in appends], lock=locks)
        except Exception:
            if len(batch) == 1:
                raise  # (this statement's own failure)
            for request in batch:  # each appends the usual way, and reports its own failure
                request.result = False
            return
        if counts is None:  # lost after the send: committed whole, or not at all
            for request in batch:
                request.error = DatabaseError(
                    f"PostgreSQL at {self.db.where} lost the connection while "
                    f"{request.item.doing}: the outcome is unknown (it may have committed): "
                    "check what is stored before retrying the call"
                )
            return
        for request, count in zip(batch, counts, strict=True):
            request.result = count == 1

    @contextmanager
    def hold(self, key: int, doing: str) -> Iterator[None]:
        """Hold the session-level advisory lock ``key`` for the block (re-entrant in this thread)."""
        psycopg, _ = _import_psycopg()
        session = self._session()
        if session is None:
            stack = ExitStack()
            conn = stack.enter_context(self.db.dedicated(doing))
            session = self._local.session = _Session(conn, stack)
        try:
            if not session.held.get(key):
                try:
                    session.conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                except psycopg.Error as exc:
                    raise self.error(exc, doing) from None
            session.held[key] = session.held.get(key, 0) + 1
        except BaseException:
            self._end_if_idle(session)
            raise
        try:
            yield
        finally:
            session.held[key] -= 1
            if not session.held[key]:
                del session.held[key]
                with suppress(psycopg.Error):  # a lost session has released it already
                    session.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            self._end_if_idle(session)

    def _end_if_idle(self, session: _Session) -> None:
        if not session.held:
            self._local.session = None
            session.stack.close()
