"""The records of a workspace in PostgreSQL: ``RecordPlace`` over the tables of ``_ddl_records``.

Every registry of ``_records`` (consent, holds, erasure records, the request
register, receipts) runs unchanged on a :class:`PgPlace`: the record codec
decides every byte, and the place keeps them, one row per line of a log (with
its per-log ``seq``) and one row per document. Rows hold what the file lines
hold, sealed lines included, so the database only sees ciphertext under
encryption at rest.

Concurrency:

* A writers' lock (:meth:`PgPlace.lock`) is a transaction-scoped advisory lock,
  ``pg_advisory_xact_lock(advisory_key("records", name))``, on a pooled
  connection for the block. The log's or document's own calls in the block run
  in that transaction, so a read-decide-write is one transaction, and an append
  is acknowledged when the block ends, after the commit.
* A call outside a held lock runs in a transaction of its own and returns after
  its commit. Appends also lock the log's row, so two writers never take the
  same ``seq`` even without the writers' lock (an owner-serialised log).
* The "changed?" check (:meth:`PgPlace.read_lines`) is one statement: the log's
  row by key (its ``generation``, changed by every rewrite or removal, and its
  ``last_seq``) joined to the lines after the reader's mark. A consent
  withdrawal committed on one host is seen by the next read on every other.
* A reader that decides on what it read can instead hand a write the guard
  :meth:`PgPlace.unchanged`: that log row's ``generation`` and ``last_seq`` as
  read. The consent gate does, so an allowed add reads nothing first: its write
  commits only if the consent log is as the gate last read it (else it reads
  again and decides again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import SchemaVersionError
from .._protocols import LineBatch, WriteGuard
from ._db import _import_psycopg, advisory_key, translate

if TYPE_CHECKING:
    import psycopg

    from .._protocols import RecordPlace
    from ._db import Database

__all__ = ["PgLock", "PgPlace"]

_S = "governed_memory"
_BACK = 64  # lines fetched at a time when an append reads the log back from its end
# A log as read_lines left it at a mark: no line appended, rewritten or removed since
# (parameters: the name, the mark's generation and last seq).
_UNCHANGED = f"""EXISTS (SELECT FROM {_S}.record_logs
    WHERE name = %s AND present AND generation = %s AND last_seq = %s)"""
T = TypeVar("T")


class _Held:
    """The token of a held writers' lock: its transaction's connection, in its thread."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.thread = threading.get_ident()


class PgLock:
    """A writers' lock of a :class:`PgPlace`: a transaction-scoped advisory lock (``RecordLock``)."""

    def __init__(self, place: PgPlace, name: str) -> None:
        self.place = place
        self.name = name
        self.key = advisory_key("records", name)

    @contextmanager
    def held(self) -> Iterator[_Held]:
        """Hold the lock for a block, in a transaction committed when the block ends.

        Raises:
            DatabaseError: the server refused or lost the connection; what the
                block wrote under the lock was rolled back.
        """
        psycopg, _ = _import_psycopg()
        db = self.place.db
        doing = f"taking the writers' lock {self.name}"
        try:
            with db.transaction(doing, lock=self.key) as conn:
                yield _Held(conn)
        except psycopg.Error as exc:
            raise self.place._error(exc, doing) from None

    def __repr__(self) -> str:
        return f"PgLock({self.name!r})"


class PgPlace:
    """The records of one workspace in the database ``db`` (``RecordPlace``).

    Args:
        db: the database, its schema upgraded (``governed-memory db upgrade``).
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def describe(self, name: str) -> str:
        return f"{name} (PostgreSQL {self.db.where})"

    def lock(self, name: str) -> PgLock:
        return PgLock(self, name)

    def names(self, folder: str, suffix: str, *, hidden: bool = False) -> list[str]:
        prefix = f"{folder}/" if folder else ""

        def query(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                f"SELECT name FROM {_S}.record_logs WHERE present AND starts_with(name, %s) "
                f"UNION SELECT name FROM {_S}.record_documents WHERE starts_with(name, %s)",
                (prefix, prefix),
            ).fetchall()
            return [str(r[0])[len(prefix) :] for r in rows]

        return [
            n
            for n in self._run(None, f"listing {prefix or 'the records'}", query, reads=True)
            if "/" not in n and n.endswith(suffix) and n.startswith(".") == hidden
        ]

    def remove_temps(self, folder: str) -> int:
        return 0  # a transaction leaves nothing behind

    # -- line stores ---------------------------------------------------------

    def read_lines(self, name: str, mark: Any) -> LineBatch | None:
        generation, last = mark if mark is not None else (None, 0)

        def query(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(
                f"SELECT h.generation, h.last_seq, h.present, l.seq, l.line "
                f"FROM {_S}.record_logs h LEFT JOIN {_S}.record_lines l ON l.log = h.name "
                "AND l.seq > (CASE WHEN h.generation = %s THEN %s ELSE 0 END) "
                "WHERE h.name = %s ORDER BY l.seq",
                (generation, last, name),
            ).fetchall()

        rows = self._run(None, f"reading {name}", query, reads=True)
        if not rows or not rows[0][2]:
            return None if mark is None else LineBatch((), None, True, "seq 1")
        new = (int(rows[0][0]), int(rows[0][1]))
        if new == mark:
            return None
        restarted = mark is None or new[0] != generation
        lines = [bytes(r[4]) for r in rows if r[3] is not None]
        start = 1 if restarted else last + 1
        return LineBatch(lines, new, restarted, f"seq {start}")

    def unchanged(self, name: str, mark: Any) -> WriteGuard | None:
        if mark is None:
            return None
        generation, last = mark
        return WriteGuard(self.db, _UNCHANGED, (name, generation, last))

    def stored_lines(self, name: str, *, under: Any = None) -> list[bytes] | None:
        def query(conn: psycopg.Connection[Any]) -> list[bytes] | None:
            return self._lines(conn, name)

        return self._run(under, f"reading {name}", query, reads=True)

    def _lines(self, conn: psycopg.Connection[Any], name: str) -> list[bytes] | None:
        rows = conn.execute(
            f"SELECT l.line FROM {_S}.record_logs h LEFT JOIN {_S}.record_lines l "
            "ON l.log = h.name WHERE h.name = %s AND h.present ORDER BY l.seq",
            (name,),
        ).fetchall()
        if not rows:
            return None
        return [bytes(r[0]) for r in rows if r[0] is not None]

    def append_lines(
        self,
        name: str,
        make: Callable[[Callable[[], Iterator[bytes]]], Sequence[bytes]],
        *,
        under: Any = None,
    ) -> None:
        def write(conn: psycopg.Connection[Any]) -> None:
            row = conn.execute(  # locks the log's row: no other writer takes the same seq
                f"INSERT INTO {_S}.record_logs AS h (name) VALUES (%s) ON CONFLICT (name) "
                "DO UPDATE SET present = true RETURNING h.last_seq",
                (name,),
            ).fetchone()
            assert row is not None  # an upsert returns its row
            last = int(row[0])
            lines = list(make(lambda: self._back(conn, name, last)))
            if not lines:
                return
            self._insert(conn, name, last, lines)

        self._run(under, f"appending to {name}", write)

    def _back(self, conn: psycopg.Connection[Any], name: str, last: int) -> Iterator[bytes]:
        """The log's lines up to ``last``, last first, fetched a few at a time."""
        below = last + 1
        while True:
            rows = conn.execute(
                f"SELECT seq, line FROM {_S}.record_lines WHERE log = %s AND seq < %s "
                "ORDER BY seq DESC LIMIT %s",
                (name, below, _BACK),
            ).fetchall()
            for seq, line in rows:
                below = int(seq)
                yield bytes(line)
            if len(rows) < _BACK:
                return

    @staticmethod
    def _insert(conn: psycopg.Connection[Any], name: str, last: int, lines: list[bytes]) -> None:
        conn.execute(
            f"INSERT INTO {_S}.record_lines (log, seq, line) "
            "SELECT %s, %s + t.n, t.line FROM unnest(%b::bytea[]) WITH ORDINALITY AS t(line, n)",
            (name, last, lines),
        )
        conn.execute(
            f"UPDATE {_S}.record_logs SET last_seq = %s WHERE name = %s",
            (last + len(lines), name),
        )

    def replace_lines(self, name: str, lines: Sequence[bytes], *, under: Any = None) -> bool:
        new = list(lines)

        def write(conn: psycopg.Connection[Any]) -> bool:
            conn.execute(
                f"INSERT INTO {_S}.record_logs (name) VALUES (%s) ON CONFLICT (name) "
                "DO UPDATE SET present = true",
                (name,),
            )
            if self._lines(conn, name) == new:
                return False
            conn.execute(f"DELETE FROM {_S}.record_lines WHERE log = %s", (name,))
            conn.execute(
                f"UPDATE {_S}.record_logs SET last_seq = 0, "
                f"generation = nextval('{_S}.record_generation') WHERE name = %s",
                (name,),
            )
            if new:
                self._insert(conn, name, 0, new)
            return True

        return self._run(under, f"rewriting {name}", write)

    def create_lines(self, name: str) -> None:
        def write(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                f"INSERT INTO {_S}.record_logs AS h (name) VALUES (%s) ON CONFLICT (name) "
                "DO UPDATE SET present = true WHERE NOT h.present",
                (name,),
            )

        self._run(None, f"creating {name}", write)

    def delete_lines(self, name: str) -> None:
        def write(conn: psycopg.Connection[Any]) -> None:
            conn.execute(f"DELETE FROM {_S}.record_lines WHERE log = %s", (name,))
            conn.execute(
                f"UPDATE {_S}.record_logs SET present = false, last_seq = 0, "
                f"generation = nextval('{_S}.record_generation') WHERE name = %s AND present",
                (name,),
            )

        self._run(None, f"removing {name}", write)

    # -- documents -----------------------------------------------------------

    def read_document(self, name: str, mark: Any, *, under: Any = None) -> tuple[Any, bytes | None]:
        def query(conn: psycopg.Connection[Any]) -> tuple[Any, bytes | None]:
            row = conn.execute(
                "SELECT generation, CASE WHEN generation = %s THEN NULL ELSE body END "
                f"FROM {_S}.record_documents WHERE name = %s",
                (mark, name),
            ).fetchone()
            if row is None:
                return None, None
            return int(row[0]), None if row[1] is None else bytes(row[1])

        return self._run(under, f"reading {name}", query, reads=True)

    def write_document(self, name: str, data: bytes, *, under: Any = None) -> None:
        def write(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                f"INSERT INTO {_S}.record_documents (name, body) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET body = excluded.body, "
                "generation = excluded.generation",
                (name, data),
            )

        self._run(under, f"writing {name}", write)

    def delete_document(self, name: str) -> bool:
        def write(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(
                f"DELETE FROM {_S}.record_documents WHERE name = %s RETURNING name", (name,)
            ).fetchone()
            return row is not None

        return self._run(None, f"removing {name}", write)

    # -- transactions ----------------------------------------------------------

    def _run(
        self,
        under: Any,
        doing: str,
        call: Callable[[psycopg.Connection[Any]], T],
        *,
        reads: bool = False,
    ) -> T:
        """``call`` in the held lock's transaction (``under``, this thread's), else in its own.

        ``reads``: ``call`` is one statement that only reads: no transaction is needed.
        """
        psycopg, _ = _import_psycopg()
        try:
            if isinstance(under, _Held) and under.thread == threading.get_ident():
                return call(under.conn)
            if reads:
                return self.db.read(doing, call)
            with self.db.transaction(doing) as conn:
                return call(conn)
        except psycopg.Error as exc:
            raise self._error(exc, doing) from None

    def _error(self, exc: BaseException, doing: str) -> Exception:
        psycopg, _ = _import_psycopg()
        if isinstance(exc, psycopg.errors.UndefinedTable):
            return SchemaVersionError(
                f"the database at {self.db.where} has no governed_memory records tables "
                f"({str(exc).splitlines()[0]}) while {doing}; create them with: "
                "governed-memory db upgrade"
            )
        return translate(exc, where=self.db.where, doing=doing)

    def __repr__(self) -> str:
        return f"PgPlace({self.db!r})"


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    _conforms: type[RecordPlace] = PgPlace
