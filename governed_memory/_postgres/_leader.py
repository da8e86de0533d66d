"""Single-holder locks across hosts: :class:`PgLeadership`, a :class:`Leadership` on PostgreSQL.

The lock is a session-level ``pg_try_advisory_lock`` on a connection of its own
(:meth:`Database.dedicated`), kept open while held: the session is the lease. A
holder killed by any means loses it as soon as the server sees its connection
close (at once for kill -9 on a live host: the kernel closes the socket; for a
host that vanishes, when TCP keepalive or the server's
``tcp_keepalives_*`` / ``idle_session_timeout`` settings end the session). Two
instances in one process use two sessions, so they exclude each other too.

A connection the server dropped (restart, ``pg_terminate_backend``, a network
cut) no longer holds the lock, and the instance must not believe it leads:
:attr:`PgLeadership.held` and :meth:`PgLeadership.try_acquire` ask the session
whether it is alive (one round trip) before answering True.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack, suppress
from typing import TYPE_CHECKING, Any

from ._db import advisory_key, translate

if TYPE_CHECKING:
    import psycopg

    from .._protocols import Leadership
    from ._db import Database

__all__ = ["PgLeadership"]


class PgLeadership:
    """The lock called ``name`` (the scheduler's ``"scheduler"``, the purge's ``"purge"``) in ``db``.

    Args:
        db: the deployment's database (no table is needed: advisory locks live
            in the server's memory, scoped to the database).
        name: which lock; every host that must exclude the others uses the same.
    """

    def __init__(self, db: Database, name: str) -> None:
        self.db = db
        self.name = name
        self.key = advisory_key("leader", name)
        self._session: ExitStack | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._mutex = threading.Lock()

    def _alive(self) -> bool:
        """Whether the holding session still exists (and so still holds the lock)."""
        import psycopg

        conn = self._conn
        if conn is None or conn.closed:
            return False
        try:
            conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def _drop(self) -> None:
        session, self._session, self._conn = self._session, None, None
        if session is not None:
            import psycopg

            with suppress(psycopg.Error):  # a broken connection is closed anyway
                session.close()

    def try_acquire(self) -> bool:
        """Take the lock if free; True when this instance holds it (a live session).

        Raises:
            DatabaseError: the server cannot be reached (``retryable``).
        """
        import psycopg

        with self._mutex:
            if self._conn is not None:
                if self._alive():
                    return True
                self._drop()  # the server ended the session: the lock went with it
            session = ExitStack()
            conn = session.enter_context(self.db.dedicated(f"taking the lock {self.name!r}"))
            try:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            except psycopg.Error as exc:
                session.close()
                raise translate(
                    exc, where=self.db.where, doing=f"taking the lock {self.name!r}"
                ) from None
            if row is None or not row[0]:
                session.close()
                return False
            self._session, self._conn = session, conn
            return True

    def release(self) -> None:
        """Give the lock up: unlock and end the session (nothing when not held)."""
        import psycopg

        with self._mutex:
            conn = self._conn
            if conn is None:
                return
            with suppress(psycopg.Error):  # the session is gone, and the lock with it
                conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            self._drop()

    @property
    def held(self) -> bool:
        """Whether this instance holds the lock: its session is alive (one round trip)."""
        with self._mutex:
            if self._conn is None:
                return False
            if self._alive():
                return True
            self._drop()
            return False

    def __repr__(self) -> str:
        return f"PgLeadership({self.db.where!r}, {self.name!r})"


if TYPE_CHECKING:
    _conforms: type[Leadership] = PgLeadership
