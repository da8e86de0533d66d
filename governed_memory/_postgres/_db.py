"""One PostgreSQL database: a connection pool, transactions, and errors that name the server.

Every PostgreSQL class of the backend takes a :class:`Database` and borrows
connections from its pool (psycopg_pool) for one transaction at a time:

* :meth:`Database.transaction` yields a connection inside a transaction that
  commits when the block ends and rolls back when it raises; a call that
  returns after it has committed (an append is acknowledged only then).
* :meth:`Database.dedicated` yields a connection of its own, outside the pool,
  for what lives as long as a session does (a session-level advisory lock:
  leadership).

A refused or lost connection becomes a :class:`~governed_memory.DatabaseError`
naming the server (``host:port/database``, never the password) and the fix;
``retryable`` says whether the same call may succeed later.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._errors import DatabaseError

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["Database", "advisory_key"]


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

    # -- naming the server --------------------------------------------------

    @property
    def where(self) -> str:
        """``host:port/database`` as libpq resolves them (no user, no password)."""
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
                self._pool = psycopg_pool.ConnectionPool(
                    self._url,
                    min_size=self._min_size,
                    max_size=self._max_size,
                    kwargs={
                        "application_name": self._application_name,
                        "connect_timeout": max(1, round(self._connect_timeout)),
                    },
                    check=psycopg_pool.ConnectionPool.check_connection,
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

    @contextmanager
    def transaction(self, doing: str = "a query") -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction: committed at the end, rolled back on error.

        Raises:
            DatabaseError: the server refused the connection or lost it; the
                transaction did not commit.
        """
        psycopg, psycopg_pool = _import_psycopg()
        pool = self._open_pool()
        try:
            with pool.connection() as conn, conn.transaction():
                yield conn
        except psycopg_pool.PoolTimeout as exc:
            raise self._diagnose(exc, doing) from None
        except psycopg.OperationalError as exc:
            raise self._error(exc, doing) from None

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

    def __repr__(self) -> str:
        return f"Database({self.where!r})"


def translate(exc: BaseException, *, where: str, doing: str) -> DatabaseError:
    """A one-line :class:`DatabaseError` for a psycopg error: what failed, on which server, the fix."""
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
