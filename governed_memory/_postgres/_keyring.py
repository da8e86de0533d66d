"""The keyring's wrapped keys in PostgreSQL: :class:`PgKeyStorage`, a :class:`WrappedKeyStorage`.

Only what :class:`~governed_memory._crypto.Keyring` serialises passes through: the
``keyring.json`` bytes (workspace id, the index key wrapped by the master key) and
one entry per ref (an HMAC, never a subject id) whose generations are all wrapped.
Key material never reaches the database, so a ``pg_dump`` holds what a copy of the
keyring folder holds.

* Exclusive creation is ``INSERT ... ON CONFLICT DO NOTHING``: of two hosts
  creating one entry, exactly one row is inserted and the other host reads it.
* :meth:`PgKeyStorage.locked` is a transaction-scoped advisory lock held by one
  pooled connection for the block (every host using the database waits on it);
  the writes inside it commit on their own, each before its call returns.
* The change counter is one row, advanced by its own committed ``UPDATE`` after
  the write it announces has committed: a host that reads the new value reads
  that write. Nothing is cached across calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import DatabaseError
from ._db import advisory_key, translate
from ._schema import SCHEMA

if TYPE_CHECKING:
    import psycopg

    from .._protocols import WrappedKeyStorage
    from ._db import Database

__all__ = ["PgKeyStorage"]

T = TypeVar("T")


def run(db: Database, doing: str, call: Callable[[psycopg.Connection[Any]], T]) -> T:
    """``call(conn)`` in one committed transaction; any server error as one-line DatabaseError."""
    import psycopg

    try:
        with db.transaction(doing) as conn:
            return call(conn)
    except psycopg.errors.UndefinedTable:
        raise DatabaseError(
            f"the database at {db.where} has no governed_memory tables (while {doing}); "
            "create them with: governed-memory db upgrade"
        ) from None
    except psycopg.Error as exc:
        raise translate(exc, where=db.where, doing=doing) from None


class PgKeyStorage:
    """The keyring of the deployment in the database ``db`` (tables ``governed_memory.keyring_*``).

    Every host of the deployment opens one on the same database and sees the
    same keys; create the tables first (``governed-memory db upgrade``).
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._key = advisory_key("keyring", SCHEMA)
        self._local = threading.local()  # this thread's depth in locked()
        self._mutex = threading.Lock()  # one waiting connection per process, not one per thread

    # -- the metadata document ---------------------------------------------------

    def read_meta(self) -> bytes | None:
        row = run(
            self.db,
            "reading the keyring",
            lambda conn: conn.execute(
                f"SELECT data FROM {SCHEMA}.keyring_meta WHERE singleton"
            ).fetchone(),
        )
        return None if row is None else bytes(row[0])

    def create_meta(self, data: bytes) -> bool:
        row = run(
            self.db,
            "creating the keyring",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.keyring_meta (singleton, data) VALUES (true, %s) "
                "ON CONFLICT DO NOTHING RETURNING singleton",
                (data,),
            ).fetchone(),
        )
        return row is not None

    def write_meta(self, data: bytes) -> None:
        run(
            self.db,
            "replacing the keyring's metadata",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.keyring_meta (singleton, data) VALUES (true, %s) "
                "ON CONFLICT (singleton) DO UPDATE SET data = EXCLUDED.data, updated_at = now()",
                (data,),
            ),
        )

    # -- entries -----------------------------------------------------------------

    def read_entry(self, ref: bytes) -> bytes | None:
        row = run(
            self.db,
            "reading a keyring entry",
            lambda conn: conn.execute(
                f"SELECT data FROM {SCHEMA}.keyring_entries WHERE ref = %s", (ref,)
            ).fetchone(),
        )
        return None if row is None else bytes(row[0])

    def create_entry(self, ref: bytes, data: bytes) -> bool:
        row = run(
            self.db,
            "creating a keyring entry",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.keyring_entries (ref, data) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING RETURNING ref",
                (ref, data),
            ).fetchone(),
        )
        return row is not None

    def write_entry(self, ref: bytes, data: bytes) -> None:
        run(
            self.db,
            "replacing a keyring entry",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.keyring_entries (ref, data) VALUES (%s, %s) "
                "ON CONFLICT (ref) DO UPDATE SET data = EXCLUDED.data, updated_at = now()",
                (ref, data),
            ),
        )

    def list_refs(self) -> list[bytes]:
        # bytea sorts byte by byte, which is the order of the refs' hex forms.
        rows = run(
            self.db,
            "listing the keyring",
            lambda conn: conn.execute(
                f"SELECT ref FROM {SCHEMA}.keyring_entries ORDER BY ref"
            ).fetchall(),
        )
        return [bytes(row[0]) for row in rows]

    # -- the change counter ------------------------------------------------------

    def counter(self) -> int:
        row = run(
            self.db,
            "reading the keyring's change counter",
            lambda conn: conn.execute(
                f"SELECT value FROM {SCHEMA}.keyring_counter WHERE singleton"
            ).fetchone(),
        )
        return 0 if row is None else int(row[0])

    def bump_counter(self) -> None:
        run(
            self.db,
            "advancing the keyring's change counter",
            lambda conn: conn.execute(
                f"UPDATE {SCHEMA}.keyring_counter SET value = value + 1 WHERE singleton"
            ),
        )

    # -- the lock ----------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The keyring's exclusive lock across every host on the database (re-entrant in a thread).

        Held by one pooled connection in an open transaction (released at its
        end, or when the connection drops: a killed holder frees it).
        """
        depth: int = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        import psycopg

        with self._mutex:
            try:
                with self.db.transaction("locking the keyring") as conn:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                    self._local.depth = 1
                    try:
                        yield
                    finally:
                        self._local.depth = 0
            except psycopg.Error as exc:
                raise translate(exc, where=self.db.where, doing="locking the keyring") from None

    def __repr__(self) -> str:
        return f"PgKeyStorage({self.db.where!r})"


if TYPE_CHECKING:
    _conforms: type[WrappedKeyStorage] = PgKeyStorage
