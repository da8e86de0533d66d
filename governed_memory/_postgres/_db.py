"""One PostgreSQL database: a connection pool, transactions, and errors that name the server.

Every PostgreSQL class of the backend takes a :class:`Database` and borrows
connections from its pool (psycopg_pool) for one transaction at a time:

* :meth:`Database.transaction` yields a connection inside a transaction that
  commits when the block ends and rolls back when it raises; a call that
  returns after it has committed (an append is acknowledged only then). With
  ``lock=``, the transaction-scoped advisory lock is taken by the statement that
  begins it (one round trip for both).
* :meth:`Database.read` yields a connection for statements that only read, each
  its own snapshot: one round trip a statement, no BEGIN / COMMIT.
* :meth:`Database.pipelined` sends a whole transaction known in advance (the
  lock, its statements, one Sync: an implicit transaction) in one round trip
  (``_guarded``), one network write and prepared statements (``_wire``).
* :meth:`Database.dedicated` yields a connection of its own, outside the pool,
  for what lives as long as a session does (a session-level advisory lock:
  leadership).

No thread ever waits on the pool while it holds one of its connections (the
pool would run dry with as many threads as connections, each waiting for its
second): inside a transaction, :meth:`Database.read` runs on the connection the
thread holds (:meth:`Database.held`), and a nested :meth:`Database.transaction`,
which must commit on its own, opens a connection outside the pool.

A refused or lost connection becomes a :class:`~governed_memory.DatabaseError`
naming the server (``host:port/database``, never the password) and the fix;
``retryable`` says whether the same call may succeed later. A connection found
dead before the transaction began (a server restarted since it was pooled) is
replaced once, transparently; one lost while committing leaves the outcome
unknown, and the error says so.
"""

from __future__ import annotations

import functools
import hashlib
import select
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import DatabaseError
from . import _wire
from ._wire import Sent

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["Binding", "Database", "advisory_key"]

T = TypeVar("T")
_ACTIVE = 1  # psycopg.pq.TransactionStatus.ACTIVE: a statement in progress (a COPY)
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE, without importing psycopg here


@functools.cache
def _locks(count: int) -> str:
    """The statement taking ``count`` transaction-scoped advisory locks, left to right.

    One statement, not one a lock: each statement of a pipeline costs the client
    its own round of psycopg's work. A target list is evaluated in order, so the
    locks are taken in the order given (every writer takes them in one order).
    """
    return "SELECT " + ", ".join(["pg_advisory_xact_lock(%s)"] * count)


def _ended(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server already ended the session of ``conn``, an idle pooled connection.

    An idle session is sent nothing it did not ask for, so anything to read means the
    server closed it, or said why before closing (a restart, ``pg_terminate_backend``).
    Checked before a transaction sent whole, whose outcome would otherwise be unknown
    from the first byte sent: a connection found ended so has sent nothing, and the
    transaction goes on another one. One ``select`` call, no round trip.
    """
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):  # (a closed descriptor)
        return True
    return bool(readable)


def _close_in(pid: int, conn: psycopg.Connection[Any]) -> None:
    """Close ``conn`` if this is the process that opened it (a forked child's copy is left alone:
    closing it would end the parent's session)."""
    import os

    if os.getpid() == pid and not conn.closed:
        conn.close()


def _begin(lock: int | None) -> str:
    """The statement that begins a transaction (and takes the advisory lock ``lock``: an int)."""
    return "BEGIN" if lock is None else f"BEGIN; SELECT pg_advisory_xact_lock({int(lock)})"


def _open(conn: psycopg.Connection[Any], lock: int | None, opening: str | None) -> list[Any] | None:
    """Begin a transaction on ``conn`` (its lock, its opening query); the opening query's rows."""
    begin = _begin(lock)
    if opening is None:
        conn.execute(begin)
        return None
    cursor = conn.execute(f"{begin}; {opening}")
    while cursor.nextset():
        pass
    return cursor.fetchall()


class Binding:
    """The connection a thread holds in an open transaction, and what may be kept for its length.

    ``memo`` holds what a reader may reuse until the transaction ends (the
    keyring's change counter, read once under an agent's lock); ``opened`` the
    rows of the query the transaction was opened with.
    """

    __slots__ = ("conn", "deferred", "memo", "opened")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.memo: dict[object, Any] = {}
        self.opened: list[Any] = []
        self.deferred: list[tuple[str, Any]] = []

    def defer(self, sql: str, params: Any) -> None:
        """Send the write ``sql`` with the ``COMMIT`` (one round trip for both).

        For the last statement of a transaction, whose result nobody reads: the
        transaction's own later statements would not see what it writes.
        """
        self.deferred.append((sql, params))


def advisory_key(namespace: str, name: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_*`` locks on ``name`` within ``namespace``."""
    digest = hashlib.sha256(f"governed_memory\0{namespace}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _import_psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise DatabaseError(
            "the PostgreSQL backend needs psycopg 3 and psycopg_pool, which are not installed; "
            "install them with: pip install 'governed-memory[postgres]'"
        ) from exc
    return psycopg, psycopg_pool


class Database:
    """The database at ``url`` (a libpq URL or key=value string; ``PG*`` variables fill the rest).

    Opening connects nothing: the pool opens its first connection on first use,
    so a wrong URL is reported by the first call, as a :class:`DatabaseError`.
    ``verify(connection, where)``, when given, runs on that first connection before
    the pool opens (the deployment storage checks the schema version there) and
    again after :meth:`close`; what it raises is the first call's error.
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        application_name: str = "governed_memory",
        connect_timeout: float = 10.0,
        verify: Callable[[psycopg.Connection[Any], str], None] | None = None,
    ) -> None:
        self._url = url
        self._verify = verify
        self._min_size = min_size
        self._max_size = max_size
        self._application_name = application_name
        self._connect_timeout = connect_timeout
        self._pool: ConnectionPool[Any] | None = None
        self._lock = threading.Lock()
        self._local = threading.local()  # .binding: the connection this thread holds
        self._aside: tuple[int, psycopg.Connection[Any]] | None = None  # (pid, connection)
        self._aside_mutex = threading.Lock()
        self._where: str | None = None

    # -- naming the server --------------------------------------------------

    @property
    def where(self) -> str:
        """``host:port/database`` as libpq resolves them (no user, no password)."""
        if self._where is None:  # (messages name it on every call: parsed once)
            self._where = self._resolve_where()
        return self._where

    def _resolve_where(self) -> str:
        psycopg, _ = _import_psycopg()
        try:
            info = psycopg.conninfo.conninfo_to_dict(self._url)
        except psycopg.ProgrammingError:
            return "<an invalid database URL>"
        import os

        host = info.get("host") or os.environ.get("PGHOST") or "localhost"
        port = info.get("port") or os.environ.get("PGPORT") or "5432"
        dbname = info.get("dbname") or os.environ.get("PGDATABASE") or info.get("user") or ""
        return f"{host}:{port}/{dbname}"

    def _error(self, exc: BaseException, doing: str) -> DatabaseError:
        return translate(exc, where=self.where, doing=doing)

    def _diagnose(self, exc: BaseException, doing: str) -> DatabaseError:
        """The reason behind a pool timeout: libpq's own error from one direct connection."""
        try:
            self.connect().close()
        except DatabaseError as real:
            return real
        return self._error(exc, doing)

    # -- connections ----------------------------------------------------------

    def _open_pool(self) -> ConnectionPool[Any]:
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self._pool is None:
                psycopg, psycopg_pool = _import_psycopg()
                try:
                    psycopg.conninfo.conninfo_to_dict(self._url)
                except psycopg.ProgrammingError as exc:
                    raise DatabaseError(
                        "the database URL is not a valid libpq URL or key=value string "
                        f"({exc}); set GOVERNED_MEMORY_DATABASE_URL to "
                        "postgresql://user@host:5432/dbname"
                    ) from None
                # One direct connection first: the pool retries in the background and
                # reports only a timeout, where libpq says what is wrong (refused,
                # wrong password, no such database).
                first = self.connect()
                try:
                    if self._verify is not None:
                        self._verify(first, self.where)
                finally:
                    first.close()
                # Autocommit: a read is one statement, and a transaction's BEGIN goes
                # with its first statement. No check on checkout (a round trip per
                # call): a connection found dead by its first statement is replaced.
                self._pool = psycopg_pool.ConnectionPool(
                    self._url,
                    min_size=self._min_size,
                    max_size=self._max_size,
                    kwargs={
                        "application_name": self._application_name,
                        "connect_timeout": max(1, round(self._connect_timeout)),
                        "autocommit": True,
                    },
                    open=False,
                    timeout=self._connect_timeout,
                )
                self._pool.open(wait=False)
            return self._pool

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection outside the pool (autocommit off); the caller closes it."""
        psycopg, _ = _import_psycopg()
        try:
            return psycopg.connect(  # type: ignore[no-any-return]
                self._url,
                application_name=self._application_name,
                connect_timeout=max(1, round(self._connect_timeout)),
            )
        except psycopg.Error as exc:
            raise self._error(exc, "connecting") from None

    def held(self) -> Binding | None:
        """The connection this thread holds in an open transaction of this database, if any."""
        binding: Binding | None = getattr(self._local, "binding", None)
        return binding

    @contextmanager
    def bound(self, conn: psycopg.Connection[Any]) -> Iterator[Binding]:
        """Make ``conn`` (inside a transaction) this thread's :meth:`held` connection for the block."""
        outer = self.held()
        binding = self._local.binding = Binding(conn)
        try:
            yield binding
        finally:
            self._local.binding = outer

    @contextmanager
    def _checkout(self, doing: str) -> Iterator[psycopg.Connection[Any]]:
        psycopg, psycopg_pool = _import_psycopg()
        pool = self._open_pool()
        try:
            conn = pool.getconn()
        except psycopg_pool.PoolTimeout as exc:
            raise self._diagnose(exc, doing) from None
        try:
            yield conn
        finally:
            if not conn.closed and conn.info.transaction_status != _IDLE:
                with suppress(psycopg.Error):  # a broken connection is discarded by the pool
                    conn.execute("ROLLBACK")
            pool.putconn(conn)

    def _recheck(self) -> None:
        """After a connection was found dead: test the pooled ones, replacing the dead (a restart)."""
        pool = self._pool
        if pool is not None:
            pool.check()

    @contextmanager
    def _opened(
        self, doing: str, first: Callable[[psycopg.Connection[Any]], Any]
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection on which ``first`` (the opening statement) ran.

        A connection the server dropped while it sat in the pool (a restart)
        fails that statement without having done anything: it is replaced once.
        """
        psycopg, _ = _import_psycopg()
        for attempt in (1, 2):
            with self._checkout(doing) as conn:
                try:
                    first(conn)
                except psycopg.OperationalError as exc:
                    if attempt == 2 or not (conn.closed or conn.broken):
                        raise self._error(exc, doing) from None
                    self._recheck()
                    continue
                yield conn
                return

    def read(
        self, doing: str, call: Callable[[psycopg.Connection[Any]], T], *, aside: bool = False
    ) -> T:
        """``call(conn)``, which only reads: each statement runs on its own, in one round trip.

        Inside a transaction of this thread, on that transaction's connection
        (unless it is busy with a statement that consumes what ``call`` is part
        of, a COPY fed by a generator: then on :meth:`aside`'s). Elsewhere on a
        pooled one (``aside``: on :meth:`aside`'s); a connection the server dropped
        while pooled is replaced and ``call`` run again (once: it changed nothing).

        Raises:
            DatabaseError: the server refused the connection or lost it.
        """
        psycopg, _ = _import_psycopg()
        try:
            return self._read(doing, call, aside=aside)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise self._error(exc, doing) from None

    def _read(self, doing: str, call: Callable[[psycopg.Connection[Any]], T], *, aside: bool) -> T:
        binding = self.held()
        if binding is not None:
            if binding.conn.info.transaction_status != _ACTIVE:
                return call(binding.conn)
            aside = True
        if aside:
            return self.aside(doing, call, again=True)
        psycopg, _ = _import_psycopg()
        for attempt in (1, 2):
            with self._checkout(doing) as conn:
                try:
                    return call(conn)
                except psycopg.OperationalError as exc:
                    if attempt == 2 or not (conn.closed or conn.broken):
                        raise self._error(exc, doing) from None
            self._recheck()
        raise AssertionError("unreachable")  # pragma: no cover

    def aside(self, doing: str, call: Callable[[psycopg.Connection[Any]], T], *, again: bool) -> T:
        """``call(conn)`` on this database's one connection aside the pool, one call at a time.

        For a caller that may hold a lock of its own process while it waits
        (the keyring's mutex): waiting on the pool then could wait for ever for
        connections held by threads waiting on that lock. ``again``: ``call`` only
        reads, so it runs once more on a new connection when the server dropped
        the old one (a restart). ``conn`` is in autocommit.
        """
        import os

        psycopg, _ = _import_psycopg()
        with self._aside_mutex:
            for attempt in (1, 2):
                own = self._aside
                if own is None or own[0] != os.getpid() or own[1].closed:
                    # One inherited from a parent process is left alone, not closed:
                    # closing it would end the parent's session.
                    conn = self.connect()
                    conn.autocommit = True
                    own = self._aside = (os.getpid(), conn)
                    # Closed with this object when nobody called close() (as a pool is).
                    weakref.finalize(self, _close_in, os.getpid(), conn)
                try:
                    return call(own[1])
                except psycopg.OperationalError as exc:
                    if not own[1].broken:
                        raise
                    own[1].close()
                    self._aside = None
                    if not again or attempt == 2:
                        raise self._error(exc, doing) from None
            raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def transaction(
        self, doing: str = "a query", *, lock: int | None = None, opening: str | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction: committed at the end, rolled back on error.

        ``lock``: the transaction-scoped advisory lock taken first, by the
        statement that begins the transaction. ``opening``: a query without
        parameters sent with that statement (one round trip for all three); its
        rows are :attr:`Binding.opened`. Inside another transaction of this
        thread, a connection outside the pool (this one commits on its own).

        Raises:
            DatabaseError: the server refused the connection or lost it. Lost
                before the commit, the transaction did not commit (``retryable``);
                lost while committing, the outcome is unknown (not ``retryable``:
                check before repeating the call).
        """
        if self.held() is not None:
            with (
                self.dedicated(doing) as conn,
                self.transaction_on(conn, doing, lock=lock, opening=opening),
            ):
                yield conn
            return
        opened: list[list[Any] | None] = []
        with (
            self._opened(doing, lambda conn: opened.append(_open(conn, lock, opening))) as conn,
            self.transaction_on(conn, doing, begun=opened[-1] if opening else True),
        ):
            yield conn

    @contextmanager
    def transaction_on(
        self,
        conn: psycopg.Connection[Any],
        doing: str,
        *,
        lock: int | None = None,
        opening: str | None = None,
        begun: bool | list[Any] | None = False,
    ) -> Iterator[psycopg.Connection[Any]]:
        """:meth:`transaction` on ``conn``, an autocommit connection of the caller's.

        ``begun``: the caller ran the BEGIN (and the lock) already; the opening
        query's rows when it ran one.

        The statements deferred with :meth:`Binding.defer` are sent with the
        ``COMMIT`` (a pipeline: one round trip).
        """
        psycopg, _ = _import_psycopg()
        try:
            opened = _open(conn, lock, opening) if begun is False else begun
            with self.bound(conn) as binding:
                if isinstance(opened, list):
                    binding.opened = opened
                try:
                    yield conn
                except BaseException:
                    if not conn.closed:
                        with suppress(psycopg.Error):
                            conn.execute("ROLLBACK")
                    raise
        except (psycopg.OperationalError, psycopg.errors.InsufficientPrivilege) as exc:
            raise self._error(exc, doing) from None
        try:
            if binding.deferred:
                with conn.pipeline():
                    for sql, params in binding.deferred:
                        conn.execute(sql, params)
                    conn.execute("COMMIT")
            else:
                conn.execute("COMMIT")
        except psycopg.OperationalError as exc:
            raise translate(exc, where=self.where, doing=doing, committing=True) from None
        except BaseException:
            if not conn.closed and conn.info.transaction_status != _IDLE:
                with suppress(psycopg.Error):  # a deferred statement failed: COMMIT was skipped
                    conn.execute("ROLLBACK")
            raise

    def pipelined(
        self,
        doing: str,
        statements: Sequence[tuple[str, Any]],
        *,
        lock: int | Sequence[int] | None = None,
    ) -> list[int] | None:
        """One whole transaction in one round trip: ``lock``, ``statements``, committed at once.

        ``lock``: the transaction-scoped advisory lock (or locks, taken in the
        order given) held from before the first statement to the commit.

        For a writer that knows every statement in advance (its guards in the
        statements' own ``WHERE``: see ``_memory`` and ``_audit``). Returns each
        statement's row count once the transaction committed, or None when the
        connection was lost after it was sent: the outcome is then unknown, and
        the caller settles it under its lock (what it wrote is either all there
        or not at all). Inside another transaction of this thread, none of it
        runs (None): that transaction's connection is the caller's to use.

        Raises:
            DatabaseError: the server refused a statement (nothing was committed).
        """
        sent = self._pipelined(doing, statements, lock)
        return None if sent is None else [each.rowcount for each in sent]

    def pipelined_rows(
        self,
        doing: str,
        statements: Sequence[tuple[str, Any]],
        *,
        lock: int | Sequence[int] | None = None,
    ) -> list[tuple[Any, ...]] | None:
        """:meth:`pipelined` of statements returning one row each: those rows once committed.

        None as for :meth:`pipelined` (the connection was lost after the send, or
        inside another transaction of this thread).
        """
        sent = self._pipelined(doing, statements, lock)
        if sent is None:
            return None
        rows = [each.row for each in sent]
        assert all(row is not None for row in rows)  # (the callers' statements return one row)
        return [row for row in rows if row is not None]

    def _pipelined(
        self, doing: str, statements: Sequence[tuple[str, Any]], lock: int | Sequence[int] | None
    ) -> list[Sent] | None:
        """:meth:`pipelined`, what each statement returned."""
        if self.held() is not None:
            return None
        pg, _ = _import_psycopg()
        locks = () if lock is None else (lock,) if isinstance(lock, int) else tuple(lock)
        # No BEGIN or COMMIT: on a connection in autocommit (the pool's are), the statements
        # up to the one Sync are one implicit transaction, committed by that Sync, and rolled
        # back whole if any of them fails. One statement takes the locks, in the order given.
        queued = [(_locks(len(locks)), locks)] if locks else []
        queued.extend(statements)

        for first in (True, False):
            with self._checkout(doing) as conn:
                ended = first and _ended(conn)
                if ended:  # nothing was sent: the pool discards it, and another is taken
                    conn.close()
                else:
                    try:
                        sent = _wire.send(conn, queued)
                        return sent[1:] if locks else sent
                    except pg.OperationalError as exc:
                        if not (conn.closed or conn.broken):
                            raise self._error(exc, doing) from None
                    except pg.errors.InsufficientPrivilege as exc:
                        raise self._error(exc, doing) from None
            self._recheck()  # a restart: the other pooled connections are likely dead too
            if not ended:
                return None
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def dedicated(self, doing: str = "a session") -> Iterator[psycopg.Connection[Any]]:
        """A connection of its own, in autocommit, closed at the end of the block."""
        conn = self.connect()
        conn.autocommit = True
        try:
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        """Close the pool's connections; using the database again reopens them."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        with self._aside_mutex:
            aside, self._aside = self._aside, None
        if aside is not None:
            _close_in(*aside)

    def __repr__(self) -> str:
        return f"Database({self.where!r})"


def translate(
    exc: BaseException, *, where: str, doing: str, committing: bool = False
) -> DatabaseError:
    """A one-line :class:`DatabaseError` for a psycopg error: what failed, on which server, the fix.

    ``committing``: ``exc`` came from the ``COMMIT`` itself. A connection lost then
    leaves the outcome unknown (the server may have committed before the loss),
    so the error says so and is not ``retryable``: repeating the call could
    repeat what it did. Lost at any other moment, the transaction did not commit.
    """
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = str(exc).lower()
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        return DatabaseError(
            f"PostgreSQL at {where} refused the login while {doing}: {text}; check the user "
            "and password in GOVERNED_MEMORY_DATABASE_URL (or PGPASSWORD / ~/.pgpass)"
        )
    if "does not exist" in lowered and "database" in lowered:
        return DatabaseError(
            f"PostgreSQL at {where} has no such database ({text}); create it "
            "(createdb) or fix the database name in GOVERNED_MEMORY_DATABASE_URL"
        )
    if getattr(exc, "sqlstate", None) == "42501":  # insufficient_privilege: a missing grant
        return DatabaseError(
            f"PostgreSQL at {where} refused {doing} to the connecting role: {text}; grant "
            "the application role what docs/postgres.md lists under 'Roles and least "
            "privilege' (or run `governed-memory db upgrade` as the owner role)"
        )
    if committing and _lost(exc):
        return DatabaseError(
            f"PostgreSQL at {where} lost the connection while committing ({doing}): {text}; "
            "the outcome of the last statement is unknown (it may have committed): check "
            "what is stored before retrying the call"
        )
    if (
        "connection refused" in lowered
        or "could not translate host name" in lowered
        or "no such file or directory" in lowered
        or "timeout" in lowered
        or "timed out" in lowered
    ):
        return DatabaseError(
            f"cannot reach PostgreSQL at {where} while {doing} ({text}); check that the "
            "server is running and that host and port in GOVERNED_MEMORY_DATABASE_URL are "
            "right; retry once it is up",
            retryable=True,
        )
    return DatabaseError(
        f"PostgreSQL at {where} failed while {doing}: {text}; nothing was committed, "
        "retry the call",
        retryable=True,
    )


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (as opposed to a refused statement)."""
    psycopg, _ = _import_psycopg()
    if not isinstance(exc, psycopg.OperationalError):
        return False
    # A statement the server refused carries its SQLSTATE; a lost connection none,
    # or class 57P (the server ended the session: shutdown, pg_terminate_backend)
    # or 08 (connection exception).
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(("57P", "08"))
