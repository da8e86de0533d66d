"""The keyring's wrapped keys in PostgreSQL: :class:`PgKeyStorage`, a :class:`WrappedKeyStorage`.

Only what :class:`~governed_memory._crypto.Keyring` serialises passes through: the
``keyring.json`` bytes (workspace id, the index key wrapped by the master key) and
one entry per ref (an HMAC, never a subject id) whose generations are all wrapped.
Key material never reaches the database, so a ``pg_dump`` holds what a copy of the
keyring folder holds.

* Exclusive creation is ``INSERT ... ON CONFLICT DO NOTHING``: of two hosts
  creating one entry, exactly one row is inserted and the other host reads it.
* :meth:`PgKeyStorage.locked` is a session-level advisory lock held for the block
  by a connection of its own, outside the pool (every host using the database
  waits on it); the storage's calls inside it run on that connection, each
  write committed on its own before its call returns.
* The change counter is one row, advanced by its own committed ``UPDATE`` after
  the write it announces has committed: a host that reads the new value reads
  that write.
* No call waits on the pool while its thread holds one of the pool's
  connections (an agent store's transaction encrypting an append): reads run on
  that connection, under the lock its transaction holds, and a write (a key
  created by the first write of an agent or subject) commits on a connection
  outside the pool (:meth:`Database.transaction` nested).
* Outside a transaction and the lock, the storage's calls run on the database's
  connection aside the pool (:meth:`Database.aside`), one call at a time. The keyring holds its own mutex
  while it reads an entry, and a thread inside an agent's transaction (holding a
  pooled connection) may wait for that mutex: a reader waiting on the pool while
  it held the mutex could wait for ever for connections held by such threads.
* Entries are cached per process, each with the counter value read before it:
  an entry is read again once the counter moved (every change of an entry
  advances it; an entry is never cached as absent). Inside a transaction the
  counter is read once, so an encrypted append under its agent's lock costs one
  counter read and no entry read. An entry changed in the database by hand,
  without advancing the counter, is seen once the counter next moves.
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
_MAX_CACHED = 4096  # entries kept per process: one per agent and subject in use
_COUNTER = f"SELECT value FROM {SCHEMA}.keyring_counter WHERE singleton"


def failed(db: Database, doing: str, exc: Exception) -> DatabaseError:
    """A psycopg error while ``doing`` as a one-line DatabaseError (no tables: the upgrade)."""
    import psycopg

    if isinstance(exc, psycopg.errors.UndefinedTable):
        return DatabaseError(
            f"the database at {db.where} has no governed_memory tables (while {doing}); "
            "create them with: governed-memory db upgrade"
        )
    return translate(exc, where=db.where, doing=doing)


def run(db: Database, doing: str, call: Callable[[psycopg.Connection[Any]], T]) -> T:
    """``call(conn)`` in one committed transaction; any server error as one-line DatabaseError."""
    import psycopg

    try:
        with db.transaction(doing) as conn:
            return call(conn)
    except psycopg.Error as exc:
        raise failed(db, doing, exc) from None


class PgKeyStorage:
    """The keyring of the deployment in the database ``db`` (tables ``governed_memory.keyring_*``).

    Every host of the deployment opens one on the same database and sees the
    same keys; create the tables first (``governed-memory db upgrade``).
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._key = advisory_key("keyring", SCHEMA)
        self._local = threading.local()  # .conn, .depth: this thread's hold of locked()
        self._mutex = threading.Lock()  # one waiting connection per process, not one per thread
        self._entries: dict[bytes, tuple[int, bytes]] = {}  # ref -> (counter read before, data)
        self._memo_key = ("keyring-counter", id(self))

    # -- where a call runs ------------------------------------------------------

    def _locked_conn(self) -> psycopg.Connection[Any] | None:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        return conn

    def _read(self, doing: str, call: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``call(conn)``, which only reads: on this thread's lock or transaction, if any."""
        import psycopg

        try:
            conn = self._locked_conn()
            if conn is not None:
                return call(conn)
            return self.db.read(doing, call, aside=True)
        except psycopg.Error as exc:
            raise failed(self.db, doing, exc) from None

    def _write(self, doing: str, call: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``call(conn)`` in a transaction of its own, committed before this returns."""
        import psycopg

        try:
            conn = self._locked_conn()
            if conn is not None:
                with self.db.transaction_on(conn, doing) as held:
                    return call(held)
            if self.db.held() is not None:
                return run(self.db, doing, call)  # nested: outside the pool, committed on its own

            def write(own: psycopg.Connection[Any]) -> T:
                with self.db.transaction_on(own, doing) as held:
                    return call(held)

            return self.db.aside(doing, write, again=False)
        except psycopg.Error as exc:
            raise failed(self.db, doing, exc) from None
        finally:
            self._forget_counter()

    def _forget_counter(self) -> None:
        """Read the counter again in this thread's transaction: this process changed the keyring."""
        binding = self.db.held()
        if binding is not None:
            binding.memo.pop(self._memo_key, None)

    # -- the metadata document ---------------------------------------------------

    def read_meta(self) -> bytes | None:
        row = self._read(
            "reading the keyring",
            lambda conn: conn.execute(
                f"SELECT data FROM {SCHEMA}.keyring_meta WHERE singleton"
            ).fetchone(),
        )
        return None if row is None else bytes(row[0])

    def create_meta(self, data: bytes) -> bool:
        row = self._write(
            "creating the keyring",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.keyring_meta (singleton, data) VALUES (true, %s) "
                "ON CONFLICT DO NOTHING RETURNING singleton",
                (data,),
            ).fetchone(),
        )
        return row is not None

    def write_meta(self, data: bytes) -> None:
        self._write(
            "replacing the keyring's metadata",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.keyring_meta (singleton, data) VALUES (true, %s) "
                "ON CONFLICT (singleton) DO UPDATE SET data = EXCLUDED.data, updated_at = now()",
                (data,),
            ),
        )

    # -- entries -----------------------------------------------------------------

    def read_entry(self, ref: bytes) -> bytes | None:
        counter = self.counter()  # before the entry: a change in between is seen next time
        cached = self._entries.get(ref)
        if cached is not None and cached[0] == counter:
            return cached[1]
        row = self._read(
            "reading a keyring entry",
            lambda conn: conn.execute(
                f"SELECT data FROM {SCHEMA}.keyring_entries WHERE ref = %s", (ref,)
            ).fetchone(),
        )
        if row is None:
            self._entries.pop(ref, None)
            return None
        data = bytes(row[0])
        if len(self._entries) >= _MAX_CACHED:
            self._entries.clear()
        self._entries[ref] = (counter, data)
        return data

    def create_entry(self, ref: bytes, data: bytes) -> bool:
        row = self._write(
            "creating a keyring entry",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.keyring_entries (ref, data) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING RETURNING ref",
                (ref, data),
            ).fetchone(),
        )
        return row is not None

    def write_entry(self, ref: bytes, data: bytes) -> None:
        self._entries.pop(ref, None)
        try:
            self._write(
                "replacing a keyring entry",
                lambda conn: conn.execute(
                    f"INSERT INTO {SCHEMA}.keyring_entries (ref, data) VALUES (%s, %s) "
                    "ON CONFLICT (ref) DO UPDATE SET data = EXCLUDED.data, updated_at = now()",
                    (ref, data),
                ),
            )
        finally:
            self._entries.pop(ref, None)  # (a read meanwhile, in another thread, cached the old)

    def list_refs(self) -> list[bytes]:
        # bytea sorts byte by byte, which is the order of the refs' hex forms.
        rows = self._read(
            "listing the keyring",
            lambda conn: conn.execute(
                f"SELECT ref FROM {SCHEMA}.keyring_entries ORDER BY ref"
            ).fetchall(),
        )
        return [bytes(row[0]) for row in rows]

    # -- the change counter ------------------------------------------------------

    def counter(self) -> int:
        """The change counter; inside a transaction of this thread, the value first read in it.

        A transaction of an agent store reads it after taking the agent's lock,
        so a change committed before the lock is seen, as on files.
        """
        binding = self.db.held() if self._locked_conn() is None else None
        if binding is not None:
            memo = binding.memo.get(self._memo_key)
            if memo is not None:
                return int(memo)
        row = self._read(
            "reading the keyring's change counter",
            lambda conn: conn.execute(_COUNTER).fetchone(),
        )
        value = 0 if row is None else int(row[0])
        if binding is not None:
            binding.memo[self._memo_key] = value
        return value

    def remember_counter(self, value: int) -> None:
        """Take ``value`` as :meth:`counter` for the rest of this thread's transaction.

        For a store that read the counter in its own statement, after taking
        the agent's lock (a change committed before the lock is seen, as when
        :meth:`counter` reads it), so that sealing under the keys reads it no
        more. Outside a transaction of this thread, nothing is kept.
        """
        binding = self.db.held() if self._locked_conn() is None else None
        if binding is not None:
            binding.memo[self._memo_key] = int(value)

    def bump_counter(self) -> None:
        self._write(
            "advancing the keyring's change counter",
            lambda conn: conn.execute(
                f"UPDATE {SCHEMA}.keyring_counter SET value = value + 1 WHERE singleton"
            ),
        )

    # -- the lock ----------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The keyring's exclusive lock across every host on the database (re-entrant in a thread).

        A session-level advisory lock on a connection of its own, outside the
        pool, closed at the block's end (which releases the lock; so does a
        killed holder's dropped connection). The storage's calls in the block
        run on it.
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

        with self._mutex, self.db.dedicated("locking the keyring") as conn:
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (self._key,))
            except psycopg.Error as exc:
                raise translate(exc, where=self.db.where, doing="locking the keyring") from None
            self._local.conn, self._local.depth = conn, 1
            try:
                yield
            finally:
                self._local.conn, self._local.depth = None, 0

    def __repr__(self) -> str:
        return f"PgKeyStorage({self.db.where!r})"


if TYPE_CHECKING:
    _conforms: type[WrappedKeyStorage] = PgKeyStorage
