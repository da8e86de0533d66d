"""The PostgreSQL agent store: an agent's memory and archives as rows, plaintext or encrypted.

:class:`PgAgentStore` implements the storage seam's ``AgentStore`` over the tables of
``_ddl_memory``. The agent is named by its name; nothing is written to the local disk.

* Text-exact: the memory is its pieces in order (position 0 the header text, then one
  row per append); reading joins them. Plaintext rows hold the UTF-8 bytes; encrypted
  ones hold the frames of the file backend's format (``_crypto``'s ``AgentCodec``), so
  the memory's header (in ``memories.header``) and its rows are, joined, exactly a
  ``MEMORY.md.gmenc`` file, and an archive's ``data`` exactly an archive file. Each
  frame's associated data binds the workspace, the agent, the memory's random file id,
  its source name (which names the partition) and its position: rows moved to another
  agent, subject, memory or place do not decrypt. The per-agent and per-subject data
  keys are the keyring's, so ``shred_subject`` / ``shred_agent`` erase rows too.
* Atomic: every operation is one transaction; a compaction writes the archive and
  replaces the memory in the same one.
* Acknowledged only after commit: each method returns once its transaction committed.
* Serialised: every writing transaction first takes the agent's transaction-scoped
  advisory lock, and :meth:`PgAgentStore.lock` holds it at session level across a
  block (the choice and its reasons: ``_memory_locks``).
* One round trip for a plaintext append: the agent's lock and the INSERT (at the
  position the server finds, into a memory that exists and is plaintext), shared
  with the appends of the process's other threads (``LockSessions.append``);
  otherwise, and for a first append, the locked transaction.
* One round trip for an encrypted append after this store's own: the frames are
  sealed at the position and under the keys remembered from that append, and the
  INSERT is guarded by the memory's header, last position and the keyring's
  change counter (``_Prepared.write``, ``_guarded``); otherwise the tail is read under
  the lock.
* Joined with its audit entry (:meth:`PgAgentStore.append_audited`, which the consent
  gate uses when the audit chain is in the same database): the block and its
  ``persist`` entry in one statement, one round trip, both writes guarded by both
  ends (read once), so both commit or neither is written; and by the consent
  log's row as the gate last read it (``WriteGuard``), so an allowed add reads nothing
  before its one round trip. The statements of the adds of several threads share
  one transaction (``PgAuditStorage.join``).

What is kept is named as the file backend names it (``MEMORY.md``,
``archive/history_<ts>.md``, ``subjects/<p>/...``; ``.gmenc`` when encrypted), so
receipts and exports read the same on both backends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from .._base import ARCHIVE_DIR, MEMORY_FILE
from .._crypto import (
    KIND_ARCHIVE,
    KIND_MEMORY,
    SUBJECT,
    AgentCodec,
    lone_subject,
    split_segments,
)
from .._errors import ConfigurationError, DatabaseError, StorageError
from .._format import has_records
from .._protocols import StoredInfo, WriteGuard
from .._stores import (
    ENCRYPTED_SUFFIX,
    SUBJECTS_DIR,
    archive_names,
    is_partition_name,
    plain_partition_name,
)
from ._audit import JoinedEntry, PgAuditStorage, WaitingEntry
from ._db import _import_psycopg
from ._guarded import Guess
from ._keyring import PgKeyStorage
from ._memory_locks import Append, agent_key

if TYPE_CHECKING:
    import psycopg

    from .._audit import AuditEntry
    from ._memory_backend import PgStores

__all__ = ["PgAgentStore"]

_ARCHIVE_PREFIX = "history_"
_STAMP_LEN = len("2026-01-31_12-00-00")
_T = "governed_memory"

_READ = f"""
    SELECT -1, header FROM {_T}.memories WHERE agent = %(a)s AND partition = %(p)s
    UNION ALL
    SELECT b.position, b.data FROM {_T}.memory_blocks b
        JOIN {_T}.memories m ON m.id = b.memory_id
        WHERE m.agent = %(a)s AND m.partition = %(p)s
    ORDER BY 1"""
# One row, the position found by the server under the agent's lock (plaintext memories).
_APPEND_PLAIN = f"""
    INSERT INTO {_T}.memory_blocks (memory_id, position, data)
    SELECT m.id, coalesce((SELECT max(b.position) FROM {_T}.memory_blocks b
                            WHERE b.memory_id = m.id), -1) + 1, %(d)s
    FROM {_T}.memories m WHERE m.agent = %(a)s AND m.partition = %(p)s AND m.header IS NULL"""
# The end of an encrypted memory, read under the agent's lock, in one row (the memory's
# columns NULL when it has none): its id, header, first frame and last position, the
# keyring's change counter, and whether ``{guard}`` holds (parameters: the guard's, then
# the agent and the partition).
_TAIL = f"""
    SELECT m.id, m.header, b.data,
           (SELECT max(c.position) FROM {_T}.memory_blocks c WHERE c.memory_id = m.id),
           (SELECT value FROM {_T}.keyring_counter WHERE singleton), ({{guard}})
    FROM (SELECT 1) AS one
    LEFT JOIN {_T}.memories m ON m.agent = %s AND m.partition = %s
    LEFT JOIN {_T}.memory_blocks b ON b.memory_id = m.id AND b.position = 0"""
# The guard of an encrypted append guessed (``_guarded``): the memory's header, its last
# position and the keyring's change counter are the ones this store last wrote under
# (parameters: the memory's id, its last position, its id, its header, the counter).
_GUARD = f"""(SELECT coalesce(max(position), -1) FROM {_T}.memory_blocks
           WHERE memory_id = %s) = %s
      AND EXISTS (SELECT FROM {_T}.memories WHERE id = %s AND header = %s)
      AND (SELECT value FROM {_T}.keyring_counter WHERE singleton) = %s"""
# The frames of an encrypted append if ``also`` holds: with _GUARD in it (_Prepared.write),
# or in a statement that checks _GUARD itself (parameters: the memory's id, the positions,
# the frames, ``also``'s).
_INSERT_WHERE = f"""
    INSERT INTO {_T}.memory_blocks (memory_id, position, data)
    SELECT %s, t.p, t.d FROM unnest(%b::integer[], %b::bytea[]) AS t(p, d) WHERE {{also}}"""
# _INSERT_WHERE for one frame, the usual append (parameters: the memory's id, the position,
# the frame, ``also``'s): psycopg dumps arrays in Python, scalars in C.
_INSERT_ONE_WHERE = f"""
    INSERT INTO {_T}.memory_blocks (memory_id, position, data)
    SELECT %s::bigint, %s::integer, %s::bytea WHERE {{also}}"""
# A plaintext memory to append to (parameters: the agent, the partition).
_PLAIN_GUARD = f"""EXISTS (SELECT FROM {_T}.memories
    WHERE agent = %s AND partition = %s AND header IS NULL)"""
# _APPEND_PLAIN if ``also`` holds (parameters: the block, the agent, the partition, ``also``'s).
_APPEND_PLAIN_IF = f"""
    INSERT INTO {_T}.memory_blocks (memory_id, position, data)
    SELECT m.id, coalesce((SELECT max(b.position) FROM {_T}.memory_blocks b
                            WHERE b.memory_id = m.id), -1) + 1, %s
    FROM {_T}.memories m WHERE m.agent = %s AND m.partition = %s AND m.header IS NULL
        AND {{also}}"""
_ROWS_AT = f"""
    SELECT data FROM {_T}.memory_blocks WHERE memory_id = %s AND position = ANY(%b::integer[])
    ORDER BY position"""
_INSERT_ROWS = f"""
    INSERT INTO {_T}.memory_blocks (memory_id, position, data)
    SELECT %s, t.p, t.d FROM unnest(%b::integer[], %b::bytea[]) AS t(p, d)"""


class _Tail(NamedTuple):
    """The end of an encrypted memory as this store last wrote it (see ``_guarded``)."""

    memory_id: int
    header: bytes
    next: int  # the position of the next frame
    epoch: int  # the keyring's change counter the frames were sealed under


class _Unsure(NamedTuple):
    """Frames sent in a transaction whose outcome is unknown (the connection was lost)."""

    memory_id: int
    first: int
    frames: list[bytes]


class _Prepared(NamedTuple):
    """An append prepared after the end this store knows (``_guarded``), not yet sent."""

    guard: tuple[str, tuple[Any, ...]]  # SQL true while that end is still the end
    rows: int  # the rows it inserts when it writes
    made: _Tail | None  # the end it makes (encrypted: the next append is guessed after it)
    unsure: _Unsure | None  # what to look for when its outcome is unknown (encrypted)
    bare: str  # the INSERT guarded by ``{also}`` only (for a statement checking ``guard``)
    bare_params: tuple[Any, ...]  # its parameters, ``also``'s after them

    def write(self, also: tuple[str, tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
        """The INSERT, if ``guard`` and ``also`` (SQL, its parameters) hold."""
        both = f"({self.guard[0]}) AND ({also[0]})"
        return self.bare.format(also=both), (*self.bare_params, *self.guard[1], *also[1])


_TRUE: tuple[str, tuple[Any, ...]] = ("true", ())


def _condition(guard: WriteGuard | None) -> tuple[str, tuple[Any, ...]]:
    """``guard`` as SQL and its parameters (true when there is none)."""
    return _TRUE if guard is None else (guard.sql, guard.params)


# Inside the statement of ``_append_waiting``: its guards (the CTE ``g``) both held.
_BOTH_HOLD = "(SELECT mine AND allowed FROM g)"
# Inside the statement of a joined append: its three guards held.
_ALL_HOLD = "(SELECT chain AND mine AND allowed FROM g)"


class PgAgentStore:
    """One agent's memory (or one subject's memory of the agent) in the database.

    Built by :class:`~._memory_backend.PgStores`; see the module docstring for what it keeps and how.
    """

    accepts_utf8_blocks: ClassVar[bool] = True

    def __init__(
        self,
        stores: PgStores,
        agent: str,
        header: Callable[[], str],
        *,
        partition: str | None = None,
    ) -> None:
        self._stores = stores
        self._agent = agent
        self._header = header
        self._partition = partition
        self._key = agent_key(agent, partition)
        self._codec: AgentCodec | None = None
        self._encrypted = stores.keyring is not None
        self._suffix = ENCRYPTED_SUFFIX if self._encrypted else ".md"
        self._where = {"a": agent, "p": partition or ""}
        self._memory = (agent, partition or "")  # (agent, partition): its locks' order
        self._guess: Guess[_Tail] = Guess()
        # (id, header, first frame, keyring counter) last authenticated (see _tail)
        self._authenticated: tuple[int, bytes, bytes, int | None] | None = None
        self._subjects: dict[bytes, str | None] = {}  # metadata lines read (see _segments)

    # -- naming --------------------------------------------------------------

    @property
    def agent(self) -> str:
        return self._agent

    @property
    def partition(self) -> str | None:
        return self._partition

    def source(self, archive_id: str | None = None) -> str:
        prefix = "" if self._partition is None else f"{SUBJECTS_DIR}/{self._partition}/"
        if archive_id is None:
            return prefix + MEMORY_FILE + (ENCRYPTED_SUFFIX if self._encrypted else "")
        return f"{prefix}{ARCHIVE_DIR}/{self._archive_id(archive_id)}{self._suffix}"

    def _label(self, archive_id: str | None = None) -> Path:
        """How errors name a memory or archive: the server, the agent, the source."""
        return Path(f"{self._stores.db.where}:agents/{self._agent}/{self.source(archive_id)}")

    def _archive_id(self, archive_id: str) -> str:
        """``archive_id`` if it is a bare archive id as :meth:`list_archives` gives them."""
        if (
            not isinstance(archive_id, str)
            or not archive_id.startswith(_ARCHIVE_PREFIX)
            or any(c in archive_id for c in "/\\\0")
            or archive_id.endswith((".md", ENCRYPTED_SUFFIX))
        ):
            raise StorageError(
                f"archive id {archive_id!r} refused: only bare names like "
                "'history_2026-01-31_12-00-00', as list_archives() returns them, name the "
                f"archives of agent {self._agent!r}"
            )
        return archive_id

    @property
    def codec(self) -> AgentCodec:
        """The agent's codec (encrypted stores only)."""
        if self._codec is None:
            keyring = self._stores.keyring
            if keyring is None:
                raise StorageError(f"the store of agent {self._agent!r} is not encrypted")
            self._codec = AgentCodec(keyring(), self._agent)
        return self._codec

    # -- subject memories ------------------------------------------------------

    def subject_store(self, subject_id: str) -> PgAgentStore:
        if self._partition is not None:
            raise StorageError(
                f"subject_store({subject_id!r}) called on subject memory {self.source()} of "
                f"agent {self._agent!r}; ask the agent's own store"
            )
        if not isinstance(subject_id, str) or not subject_id:
            raise StorageError(f"subject id {subject_id!r} must be a non-empty string")
        if self._encrypted:  # the keyring's keyed reference, as the encrypted file store
            partition = self.codec.keyring.ref(SUBJECT, subject_id, create=True).hex()
        else:
            partition = plain_partition_name(subject_id)
        return self._open(partition)

    def partition_store(self, partition: str) -> PgAgentStore:
        """The subject memory named ``partition`` (as :attr:`partition` gave it), creating nothing.

        For a migration, which knows a subject memory by its stored name only.
        """
        if self._partition is not None or not is_partition_name(partition):
            raise StorageError(
                f"partition_store({partition!r}) refused: ask the agent's own store for a "
                "name of 32 hex digits, as a subject store's partition gives it"
            )
        return self._open(partition)

    def _open(self, partition: str) -> PgAgentStore:
        return PgAgentStore(self._stores, self._agent, self._header, partition=partition)

    def subject_stores(self) -> Sequence[PgAgentStore]:
        if self._partition is not None:
            return []
        with self._tx("listing subject memories", lock=False) as conn:
            return self._partitions(conn)

    # -- transactions ------------------------------------------------------------

    @contextmanager
    def _tx(self, doing: str, *, lock: bool = True) -> Iterator[psycopg.Connection[Any]]:
        what = f"{doing} ({self._agent!r}, {self.source()})"
        if lock:  # a write: the end it makes is remembered by the caller, if anyone
            self._guess.forget()
        with self._stores.sessions.transaction(what, self._key if lock else None) as conn:
            yield conn

    @contextmanager
    def lock(self) -> Iterator[None]:
        with self._stores.sessions.hold(self._key, f"locking agent {self._agent!r}"):
            yield

    # -- the active memory -------------------------------------------------------

    def _rows(self, conn: psycopg.Connection[Any]) -> list[tuple[int, bytes | None]]:
        return conn.execute(_READ, self._where, binary=True).fetchall()

    def _refuse_mode(self, header: bytes | None) -> None:
        if self._encrypted and header is None:
            raise ConfigurationError(
                f"the memory of agent {self._agent!r} ({self.source()}) in the database at "
                f"{self._stores.db.where} is plaintext but the policy enables encryption; "
                "encrypt it (migrate it to files, encrypt-workspace, migrate back) or disable "
                "encryption in the policy"
            )
        if not self._encrypted and header is not None:
            raise ConfigurationError(
                f"the memory of agent {self._agent!r} ({self.source()}) in the database at "
                f"{self._stores.db.where} is encrypted but the policy does not enable "
                "encryption; enable it (with the same master key) to read it"
            )

    def _text(self, rows: list[tuple[int, bytes | None]]) -> str | None:
        if not rows:
            return None
        header = rows[0][1]
        self._refuse_mode(header)
        data = b"".join(bytes(row[1]) for row in rows[1:] if row[1] is not None)
        if header is None:
            return data.decode("utf-8")
        return self.codec.decode(
            bytes(header) + data, self._label(), KIND_MEMORY, self.source(), torn_ok=False
        ).text()

    def read_memory(self) -> str | None:
        with self._tx("reading the memory", lock=False) as conn:
            rows = self._rows(conn)
        return self._text(rows)

    def _pieces(self, text: str, first: int) -> tuple[bytes | None, list[bytes]]:
        """The header (encrypted) and the rows of ``text`` for a memory whose rows start at ``first``."""
        if not self._encrypted:
            return None, [piece.encode("utf-8") for piece, _ in split_segments(text)]
        codec = self.codec
        header = codec.new_header(KIND_MEMORY)
        context = codec.context(header, self.source())
        frames = [
            codec.frame(context, first + n, piece, subject)
            for n, (piece, subject) in enumerate(split_segments(text))
        ]
        return header, frames

    def _insert(
        self, conn: psycopg.Connection[Any], memory_id: int, first: int, rows: list[bytes]
    ) -> None:
        if rows:
            positions = list(range(first, first + len(rows)))
            conn.execute(_INSERT_ROWS, (memory_id, positions, rows))

    def _create(self, conn: psycopg.Connection[Any], text: str) -> int:
        """Create the memory holding ``text`` (lock held); its id."""
        header, rows = self._pieces(text, 0)
        row = conn.execute(
            f"INSERT INTO {_T}.memories (agent, partition, header) VALUES (%(a)s, %(p)s, %(h)s)"
            " RETURNING id",
            {**self._where, "h": header},
        ).fetchone()
        assert row is not None
        self._insert(conn, row[0], 0, rows)
        return int(row[0])

    def _replace(self, conn: psycopg.Connection[Any], memory_id: int, text: str) -> None:
        """Replace the memory's text by ``text`` (lock held; a fresh file id when encrypted)."""
        header, rows = self._pieces(text, 0)
        conn.execute(f"DELETE FROM {_T}.memory_blocks WHERE memory_id = %s", (memory_id,))
        conn.execute(f"UPDATE {_T}.memories SET header = %s WHERE id = %s", (header, memory_id))
        self._insert(conn, memory_id, 0, rows)

    def _memory_id(self, conn: psycopg.Connection[Any]) -> tuple[int, bytes | None] | None:
        row = conn.execute(
            f"SELECT id, header FROM {_T}.memories WHERE agent = %(a)s AND partition = %(p)s",
            self._where,
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def ensure(self) -> None:
        with self._tx("creating the memory") as conn:
            found = self._memory_id(conn)
            if found is None:
                self._create(conn, self._header())
            else:
                self._refuse_mode(found[1])

    def append(self, block: str) -> None:
        if block:
            self._append(block, block.encode("utf-8"))

    def append_utf8(self, data: bytes) -> None:
        """:meth:`append` for one block already encoded as UTF-8."""
        if data:
            self._append(None, data)

    def append_guarded(self, block: str, guard: WriteGuard) -> bool | None:
        """:meth:`append` only while ``guard`` holds, checked in the append's own transaction.

        For a decision taken on a cached read (the consent gate's, when no
        audit entry is written with the block): True once appended, False when
        the guard no longer held (nothing was written: read again and decide
        again), None when ``guard`` is another database's (it cannot be checked
        here: append the usual way).
        """
        if guard.database is not self._stores.db:
            return None
        if not block:
            return True
        return self._append(block, block.encode("utf-8"), guard)

    def _append(self, block: str | None, data: bytes, guard: WriteGuard | None = None) -> bool:
        unsure = None
        if self._encrypted:
            done, unsure = self._append_guessed(block, data, guard)
            if done:
                return True
        elif self._joinable():  # (plaintext) one round trip, shared with other threads'
            also = _condition(guard)
            statement = (_APPEND_PLAIN_IF.format(also=also[0]), (data, *self._memory, *also[1]))
            doing = f"appending to the memory ({self._agent!r}, {self.source()})"
            if self._stores.sessions.append(Append(self._memory, self._key, statement, doing)):
                return True
            # (no memory yet, one of the other mode, or the guard failed: nothing was written)
        with self._tx("appending to the memory") as conn:
            if not self._encrypted:
                if guard is not None and not self._holds(conn, guard):
                    return False
                if conn.execute(_APPEND_PLAIN, {**self._where, "d": data}).rowcount == 1:
                    return True
                found = self._memory_id(conn)
                if found is not None:
                    self._refuse_mode(found[1])
                memory_id = self._create(conn, self._header())
                self._insert(conn, memory_id, 1, [data])
                return True
            memory_id, header, count, held = self._tail(conn, guard)
            if unsure is not None and self._stored(conn, unsure, memory_id, count):
                return True  # the guessed append did commit
            if not held:
                return False
            tail = self._seal_deferred(memory_id, header, count, block, data)
        self._guess.wrote(tail)
        return True

    def _seal_deferred(
        self, memory_id: int, header: bytes, count: int, block: str | None, data: bytes
    ) -> _Tail:
        """Seal the frames of ``data`` after the ``count`` rows of the memory (its lock held in
        this thread's transaction) and send them with the COMMIT; the end they make."""
        codec = self.codec
        context = codec.context(header, self.source())
        frames = [
            codec.frame(context, count + n, piece, subject)
            for n, (piece, subject) in enumerate(_segments(block, data, self._subjects))
        ]
        binding = self._stores.db.held()
        assert binding is not None  # (this transaction's)
        # The last statement: sent with the COMMIT, one round trip for both.
        positions = list(range(count, count + len(frames)))
        binding.defer(_INSERT_ROWS, (memory_id, positions, frames))
        # (the counter the frames' keys were read under: remembered in this transaction)
        return _Tail(memory_id, header, count + len(frames), codec.keyring.epoch())

    @staticmethod
    def _holds(conn: psycopg.Connection[Any], guard: WriteGuard) -> bool:
        """Whether ``guard`` holds, read in the append's transaction (the agent's lock held)."""
        held = conn.execute(f"SELECT {guard.sql}", guard.params).fetchone()
        return held is not None and bool(held[0])

    def _append_guessed(
        self, block: str | None, data: bytes, guard: WriteGuard | None = None
    ) -> tuple[bool, _Unsure | None]:
        """Append to the end this store last wrote, in one round trip (``_guarded``).

        (Whether it committed, the frames sent when the connection was lost after
        sending them, so that the outcome is unknown.) ``guard`` is checked in
        the same statement; when it or the end fails nothing is written, and the
        caller's locked append tells which. Not inside this thread's lock session
        or transaction: those run on their own connection.
        """
        prepared = self._prepare_encrypted(block, data)
        if prepared is None:
            return False, None
        doing = f"appending to the memory ({self._agent!r}, {self.source()})"
        psycopg, _ = _import_psycopg()
        try:
            write = prepared.write(_condition(guard))
            counts = self._stores.db.pipelined(doing, [write], lock=self._key)
        except DatabaseError:
            self._guess.forget()
            raise
        except psycopg.Error as exc:
            self._guess.forget()
            raise self._stores.sessions.error(exc, doing) from None
        if counts is not None and counts[0] == prepared.rows:
            assert prepared.made is not None  # (encrypted)
            self._guess.hit(prepared.made)
            return True, None
        self._guess.forget(missed=counts is not None)
        return False, None if counts is not None else prepared.unsure

    def append_audited(
        self,
        block: str,
        log: object,
        event: str,
        attrs: Mapping[str, Any],
        *,
        also: WriteGuard | None = None,
    ) -> AuditEntry | WaitingEntry | None:
        """Append ``block`` and its audit entry in one transaction, in one round trip.

        The entry (``event``, ``attrs``) goes to ``log``, the deployment's audit
        chain in this store's database: sealed after the end this process last
        wrote (``_audit.JoinedEntry``) when it knows that end, the write guarded
        by it, and sent with the joins of the process's other threads in one
        transaction (``PgAuditStorage.join``); else, or when another writer moved
        it, into ``audit_pending``, to be chained soon after
        (:meth:`_append_waiting`). One statement checks every end once and writes
        both under them: both commit, or neither is written. An encrypted memory
        whose end another writer moved is read under the agent's lock, and the
        block written with its waiting entry in that transaction
        (:meth:`_append_audited_locked`). ``also`` (the consent
        gate's: the consent log as it read it) guards both as well. Returns the
        entry, committed (a waiting one has no ``seq`` yet); None when they cannot
        be joined here (another database's log or guard, inside a lock session
        or transaction of this thread, a guard that failed): nothing was written
        then, and the caller appends and records the usual way, one after the
        other (reading consent again first).

        Raises:
            DatabaseError: the server refused (nothing was committed).
            AuditWriteError: the connection was lost after the send, and whether
                the transaction committed could not be read back.
        """
        db = self._stores.db
        if not block or not isinstance(log, PgAuditStorage) or log.db is not db:
            return None
        if also is not None and also.database is not db:
            return None
        data = block.encode("utf-8")
        prepared = (
            self._prepare_encrypted(block, data) if self._encrypted else self._prepare_plain(data)
        )
        if prepared is None:
            if self._encrypted and self._guess.contended and self._joinable():
                # Another writer on the memory keeps moving its end: read it under the lock.
                return self._append_audited_locked(block, data, log, event, attrs, also)
            return None
        allowed = _condition(also)
        rows = prepared.bare.format(also=_ALL_HOLD)

        def statement(entry: JoinedEntry) -> tuple[str, tuple[Any, ...]]:
            # One statement: the three guards read once, the entry, the head and the rows
            # written under all three (so all are written or none), and which end held.
            add, add_params, head, head_params = entry.parts(_ALL_HOLD)
            sql = f"""
                WITH g AS (SELECT ({entry.guard[0]}) AS chain, ({prepared.guard[0]}) AS mine,
                                  ({allowed[0]}) AS allowed),
                e AS ({add} RETURNING 1), h AS ({head} RETURNING 1), r AS ({rows} RETURNING 1)
                SELECT g.chain, g.mine, (SELECT count(*) FROM h), (SELECT count(*) FROM r)
                FROM g"""
            params = (
                *entry.guard[1],
                *prepared.guard[1],
                *allowed[1],
                *add_params,
                *head_params,
                *prepared.bare_params,
            )
            return sql, params

        with self._sending():
            joined = log.join(event, attrs, self._key, statement, memory=self._memory)
        if joined is None:  # the chain's end is not this process's to guess: chained after
            return self._append_waiting(prepared, log, event, attrs, also, block=block)
        if joined.row is None:  # lost after the send: committed whole, or not at all
            self._guess.forget()
            return joined.entry if joined.committed() else None
        chain, mine, heads, count = (int(value) for value in joined.row)
        if heads == 1 and count == prepared.rows:
            if prepared.made is not None:
                self._guess.hit(prepared.made)
            return joined.entry
        # A guard failed: nothing was written. Both ends still there (1, 1) means ``also``
        # failed: the store's guess is kept for the write the caller decides anew.
        if mine != 1:
            if prepared.made is None:
                return None  # (plaintext: no memory yet, or one of the other mode)
            self._guess.forget(missed=True)
            self._guess.skipped()  # (this add reads the end instead)
            return self._append_audited_locked(block, data, log, event, attrs, also)
        if chain != 1:  # another writer moved the chain's end: its rows still fit
            return self._append_waiting(prepared, log, event, attrs, also, block=block)
        return None

    def _append_waiting(
        self,
        prepared: _Prepared,
        log: PgAuditStorage,
        event: str,
        attrs: Mapping[str, Any],
        also: WriteGuard | None,
        *,
        block: str,
    ) -> WaitingEntry | None:
        """:meth:`append_audited` through group chaining: the rows and a waiting entry.

        One transaction holding only the agent's lock writes the block and the
        entry into ``audit_pending``, so writers of other agents and hosts commit
        together (PostgreSQL's group commit); the entry is then chained in the
        background with every other one waiting (``_chaining``), and by any read
        of the log. The entry returned has no ``seq`` yet. When the encrypted
        memory's end had moved, ``block`` is sealed again after the end read under
        the lock (:meth:`_append_audited_locked`). None when a guard failed
        (nothing was written).
        """
        waiting = log.waiting(event, attrs)
        allowed = _condition(also)
        entry_sql, entry_params = waiting.write(also=(_BOTH_HOLD, ()))
        rows_sql, rows_params = prepared.bare.format(also=_BOTH_HOLD), prepared.bare_params
        # One statement: both guards read once, both inserts under them (so both are
        # written or neither), and whether this store's own end still held.
        sql = f"""
            WITH g AS (SELECT ({prepared.guard[0]}) AS mine, ({allowed[0]}) AS allowed),
            w AS ({entry_sql} RETURNING 1), r AS ({rows_sql} RETURNING 1)
            SELECT g.mine, (SELECT count(*) FROM w), (SELECT count(*) FROM r) FROM g"""
        params = (*prepared.guard[1], *allowed[1], *entry_params, *rows_params)
        with self._sending():
            sent = self._stores.db.pipelined_rows(
                self._appending(), [(sql, params)], lock=self._key
            )
        row = None if sent is None else sent[0]
        if row is None:  # lost after the send: committed whole, or not at all
            self._guess.forget()
            if not log.waiting_committed(waiting.token):
                return None
        elif row[1] == 1 and row[2] == prepared.rows:
            if prepared.made is not None:
                self._guess.hit(prepared.made)
        else:
            if not row[0] and prepared.made is not None:
                self._guess.forget(missed=True)
                self._guess.skipped()  # (this add reads the end instead)
                return self._append_audited_locked(
                    block, block.encode("utf-8"), log, event, attrs, also
                )
            return None
        log.chain_soon()
        return waiting

    def _append_audited_locked(
        self,
        block: str,
        data: bytes,
        log: PgAuditStorage,
        event: str,
        attrs: Mapping[str, Any],
        also: WriteGuard | None,
    ) -> WaitingEntry | None:
        """:meth:`append_audited` of an encrypted block while another writer on the same
        memory keeps moving its end (this store's guesses missed: ``Guess.contended``).

        One transaction under the agent's lock: its first statement reads the end,
        the keyring's change counter and ``also``; the frames sealed after that end
        and the entry, waiting to be chained (:meth:`_append_waiting`), are sent
        with the COMMIT. Three round trips, two while the lock is held, where an
        append and an entry one after the other take six or more. None when
        ``also`` failed (nothing was written). The entry is committed with the
        block or not at all; a connection lost while committing is settled by the
        entry's token (its error raised when neither was committed).
        """
        waiting = log.waiting(event, attrs)  # (made before the lock is taken)
        sealed = False
        try:
            with self._tx("appending to the memory and the audit log") as conn:
                memory_id, header, count, held = self._tail(conn, also)
                if not held:
                    return None
                tail = self._seal_deferred(memory_id, header, count, block, data)
                binding = self._stores.db.held()
                assert binding is not None  # (this transaction's)
                binding.defer(*waiting.write(also=_TRUE))
                sealed = True
        except DatabaseError as exc:
            if not sealed or exc.retryable:
                raise
            try:  # lost while committing (the outcome unknown): the entry's token tells
                committed = log.waiting_committed(waiting.token)
            except DatabaseError:
                raise exc from None
            if not committed:
                raise
        else:
            self._guess.wrote(tail)
        log.chain_soon()
        return waiting

    @contextmanager
    def _sending(self) -> Iterator[None]:
        """Around the send of an audited append: on an error the store's end guess is
        forgotten, and a database error becomes the session's clear, retryable one."""
        psycopg, _ = _import_psycopg()
        try:
            yield
        except BaseException as exc:
            self._guess.forget()
            if isinstance(exc, psycopg.Error):
                raise self._stores.sessions.error(exc, self._appending()) from None
            raise

    def _appending(self) -> str:
        return f"appending to the memory ({self._agent!r}, {self.source()}) and the audit log"

    def _joinable(self) -> bool:
        """Whether a write of its own connection may run now (not inside this thread's
        lock session or transaction: those hold the agent's lock, or a connection)."""
        return not self._stores.sessions.active() and self._stores.db.held() is None

    def _prepare_plain(self, data: bytes) -> _Prepared | None:
        """A plaintext append of ``data`` at the memory's end, wherever that is."""
        if not self._joinable():
            return None
        where = self._memory
        return _Prepared((_PLAIN_GUARD, where), 1, None, None, _APPEND_PLAIN_IF, (data, *where))

    def _prepare_encrypted(self, block: str | None, data: bytes) -> _Prepared | None:
        """The frames of an encrypted append sealed after the end this store last wrote.

        None when that end is not known (or guesses back off), when a subject's
        keys are not remembered, or when the keyring is kept outside the database.
        """
        end = self._guess.get()
        if end is None or not self._joinable() or not self._keys_in_database():
            return None
        codec = self.codec
        context = codec.context(end.header, self.source())
        frames = []
        for n, (piece, subject) in enumerate(_segments(block, data, self._subjects)):
            frame = codec.frame_at_epoch(
                end.epoch, context, end.next + n, piece.encode("utf-8"), subject
            )
            if frame is None:  # (a subject whose keys this store has not used yet)
                return None
            frames.append(frame)
        guard = (end.memory_id, end.next - 1, end.memory_id, end.header, end.epoch)
        if len(frames) == 1:
            rows: tuple[Any, ...] = (end.memory_id, end.next, frames[0])
            bare = _INSERT_ONE_WHERE
        else:
            rows = (end.memory_id, list(range(end.next, end.next + len(frames))), frames)
            bare = _INSERT_WHERE
        return _Prepared(
            (_GUARD, guard),
            len(frames),
            end._replace(next=end.next + len(frames)),
            _Unsure(end.memory_id, end.next, frames),
            bare,
            rows,
        )

    def _keys_in_database(self) -> bool:
        """Whether the keyring's change counter is this database's (the guard checks that one).

        A keyring kept elsewhere (a folder) changes without it: every append then
        reads its end, and the counter, under the agent's lock.
        """
        return self._key_storage is not None

    @cached_property
    def _key_storage(self) -> PgKeyStorage | None:
        """The keyring's storage when it is kept in this database (see :meth:`_keys_in_database`)."""
        storage = getattr(self.codec.keyring, "storage", None)
        mine = isinstance(storage, PgKeyStorage) and storage.db is self._stores.db
        return storage if mine else None

    @staticmethod
    def _stored(conn: psycopg.Connection[Any], unsure: _Unsure, memory_id: int, count: int) -> bool:
        """Whether the frames of ``unsure`` are in the memory (read under its lock: that
        transaction has ended either way, and it committed whole or not at all)."""
        if memory_id != unsure.memory_id or count < unsure.first + len(unsure.frames):
            return False
        positions = list(range(unsure.first, unsure.first + len(unsure.frames)))
        rows = conn.execute(_ROWS_AT, (memory_id, positions), binary=True).fetchall()
        return [bytes(row[0]) for row in rows] == unsure.frames

    def _tail(
        self, conn: psycopg.Connection[Any], guard: WriteGuard | None = None
    ) -> tuple[int, bytes, int, bool]:
        """(id, header, row count) of the encrypted memory to append to (lock held), and
        whether ``guard`` holds: read in one statement.

        Created when missing; started afresh when its first frame's key was shredded
        (the memory is erased data), as the encrypted file store does. Its header and
        first frame are authenticated first, so nothing is appended to a memory of
        another workspace or keyring; the same header and first frame under the same
        keyring change counter are authenticated once (a shredding bumps the counter).
        The counter read here is the transaction's (``PgKeyStorage.remember_counter``),
        so the frames are sealed without reading it again.
        """
        cond = _condition(guard)
        row = conn.execute(
            _TAIL.format(guard=cond[0]), (*cond[1], *self._memory), binary=True
        ).fetchone()
        assert row is not None  # (one row: the memory's columns are NULL when there is none)
        found, header, first, last, counter, held = row
        storage = self._key_storage
        if storage is not None and counter is not None:
            storage.remember_counter(int(counter))
        else:
            counter = None  # (a keyring kept elsewhere: its own counter is the one to go by)
        if found is None:
            memory_id = self._create(conn, self._header())
        else:
            memory_id = int(found)
            self._refuse_mode(header)
            assert header is not None
            count = 0 if last is None else int(last) + 1
            seen = (memory_id, bytes(header), bytes(first or b""), counter)
            if counter is not None and seen == self._authenticated:
                return memory_id, seen[1], count, bool(held)
            checked = self.codec.decode(
                seen[1] + seen[2], self._label(), KIND_MEMORY, self.source(), torn_ok=False
            )
            if not checked.first_shredded:  # (no row at all: a memory rewritten to "")
                self._authenticated = seen
                return memory_id, seen[1], count, bool(held)
            self._replace(conn, memory_id, self._header())
        found = conn.execute(
            f"SELECT m.header, (SELECT count(*) FROM {_T}.memory_blocks b WHERE b.memory_id = m.id)"
            f" FROM {_T}.memories m WHERE m.id = %s",
            (memory_id,),
            binary=True,
        ).fetchone()
        assert found is not None
        return memory_id, bytes(found[0]), int(found[1]), bool(held)

    # -- compaction and archives ------------------------------------------------

    def compact(self, first_block: str | None) -> str | None:
        with self._tx("compacting the memory") as conn:
            rows = self._rows(conn)
            fresh = self._header() + (first_block or "")
            if not rows:
                self._create(conn, fresh)
                return None
            header = rows[0][1]
            self._refuse_mode(header)
            data = b"".join(bytes(row[1]) for row in rows[1:] if row[1] is not None)
            archive_id = None
            if header is None:
                if has_records(data.decode("utf-8")):
                    archive_id = self._write_archive(conn, data)
            else:
                codec = self.codec
                keys = codec.keyring.snapshot()
                decoded = codec.decode(
                    bytes(header) + data,
                    self._label(),
                    KIND_MEMORY,
                    self.source(),
                    torn_ok=False,
                    keys=keys,
                )
                if has_records(decoded.text()):
                    archive_id = self._next_archive_id(conn)
                    sealed = b"".join(
                        codec.encode_stream(
                            KIND_ARCHIVE,
                            self.source(archive_id),
                            ((p.data, p.key) for p in decoded.frames),
                            keys=keys,
                        )
                    )
                    self._write_archive(conn, sealed, archive_id)
            found = self._memory_id(conn)
            assert found is not None
            self._replace(conn, found[0], fresh)
            return archive_id

    def _next_archive_id(self, conn: psycopg.Connection[Any]) -> str:
        """The file backend's name for an archive made now, after every archive already there.

        ``history_<stamp>``, or with a counter after the newest id when that is not
        older (a second compaction in the same second, or a host whose clock is behind
        the one that wrote the newest): ids stay unique and sorted oldest first.
        """
        row = conn.execute(
            f"SELECT max(archive_id) FROM {_T}.memory_archives"
            " WHERE agent = %(a)s AND partition = %(p)s",
            self._where,
        ).fetchone()
        newest = None if row is None else row[0]
        first = next(archive_names(self._stores.clock.now())).removesuffix(".md")
        if newest is None or first > newest:
            return first
        base = newest[: len(_ARCHIVE_PREFIX) + _STAMP_LEN]
        counter = newest[len(base) :]
        if len(counter) == 7 and counter[0] == "_" and counter[1:].isdigit():
            return f"{base}_{int(counter[1:]) + 1:06d}"
        return f"{newest}_000001"

    def _write_archive(
        self, conn: psycopg.Connection[Any], data: bytes, archive_id: str | None = None
    ) -> str:
        archive_id = archive_id or self._next_archive_id(conn)
        conn.execute(
            f"INSERT INTO {_T}.memory_archives (agent, partition, archive_id, data)"
            " VALUES (%(a)s, %(p)s, %(i)s, %(d)s)",
            {**self._where, "i": archive_id, "d": data},
        )
        return archive_id

    def list_archives(self) -> list[str]:
        with self._tx("listing the archives", lock=False) as conn:
            rows = conn.execute(
                f"SELECT archive_id FROM {_T}.memory_archives"
                " WHERE agent = %(a)s AND partition = %(p)s ORDER BY archive_id",
                self._where,
            ).fetchall()
        return [row[0] for row in rows]

    def read_archive(self, archive_id: str) -> str:
        archive_id = self._archive_id(archive_id)
        with self._tx("reading an archive", lock=False) as conn:
            row = conn.execute(
                f"SELECT data FROM {_T}.memory_archives"
                " WHERE agent = %(a)s AND partition = %(p)s AND archive_id = %(i)s",
                {**self._where, "i": archive_id},
                binary=True,
            ).fetchone()
        if row is None:
            raise StorageError(
                f"agent {self._agent!r} has no archive {archive_id!r}; use one of list_archives()"
            )
        data = bytes(row[0])
        if not self._encrypted:
            return data.decode("utf-8")
        return self.codec.decode(
            data, self._label(archive_id), KIND_ARCHIVE, self.source(archive_id), torn_ok=False
        ).text()

    # -- rewriting (erasure, rectification) ----------------------------------------

    def rewrite_memory(self, text: str) -> None:
        with self._tx("rewriting the memory") as conn:
            found = self._memory_id(conn)
            if found is None:
                raise StorageError(
                    f"rewrite of the memory of agent {self._agent!r} ({self.source()}) refused: "
                    "it has no memory"
                )
            self._refuse_mode(found[1])
            self._replace(conn, found[0], text)

    def rewrite_archive(self, archive_id: str, text: str) -> None:
        archive_id = self._archive_id(archive_id)
        if self._encrypted:
            data = self.codec.encode_text(KIND_ARCHIVE, self.source(archive_id), text)
        else:
            data = text.encode("utf-8")
        with self._tx("rewriting an archive") as conn:
            done = conn.execute(
                f"UPDATE {_T}.memory_archives SET data = %(d)s, written_at = now()"
                " WHERE agent = %(a)s AND partition = %(p)s AND archive_id = %(i)s",
                {**self._where, "i": archive_id, "d": data},
            ).rowcount
            if done != 1:
                raise StorageError(
                    f"rewrite of {self.source(archive_id)} of agent {self._agent!r} refused: "
                    "there is no such archive; use one of list_archives()"
                )

    def delete_archive(self, archive_id: str) -> bool:
        """Remove one archive (a retention purge); whether there was one.

        Takes the agent's lock like every writer, so it never races a compaction
        or a rewrite of the archive.
        """
        archive_id = self._archive_id(archive_id)
        with self._tx("deleting an archive") as conn:
            done = conn.execute(
                f"DELETE FROM {_T}.memory_archives"
                " WHERE agent = %(a)s AND partition = %(p)s AND archive_id = %(i)s",
                {**self._where, "i": archive_id},
            ).rowcount
        return done == 1

    def delete_memory(self) -> bool:
        """Remove the active memory only, keeping the archives (a purge of idle memory).

        What deleting ``MEMORY.md`` is in the file backend: the next append
        starts a fresh memory. Whether there was one.
        """
        with self._tx("deleting the idle memory") as conn:
            done = conn.execute(
                f"DELETE FROM {_T}.memories WHERE agent = %(a)s AND partition = %(p)s",
                self._where,
            ).rowcount
        return done == 1

    def import_archive(self, archive_id: str, text: str) -> None:
        """Store ``text`` as archive ``archive_id``, created or replaced in one transaction (a migration).

        Keeps the id the source gave it, so a receipt citing :meth:`source` stays
        true; an encrypted store seals it under the keyring's keys as :meth:`rewrite_archive` does.
        """
        archive_id = self._archive_id(archive_id)
        if self._encrypted:
            data = self.codec.encode_text(KIND_ARCHIVE, self.source(archive_id), text)
        else:
            data = text.encode("utf-8")
        with self._tx("importing an archive") as conn:
            conn.execute(
                f"INSERT INTO {_T}.memory_archives (agent, partition, archive_id, data)"
                " VALUES (%(a)s, %(p)s, %(i)s, %(d)s) ON CONFLICT (agent, partition, archive_id)"
                " DO UPDATE SET data = EXCLUDED.data, written_at = now()",
                {**self._where, "i": archive_id, "d": data},
            )

    # -- what is stored --------------------------------------------------------------

    def stat(self, archive_id: str | None = None) -> StoredInfo | None:
        with self._tx("reading the memory's size", lock=False) as conn:
            if archive_id is None:
                row = conn.execute(
                    f"""SELECT coalesce(octet_length(m.header), 0)
                               + coalesce(sum(octet_length(b.data)), 0),
                               extract(epoch FROM coalesce(max(b.written_at), m.created_at))
                        FROM {_T}.memories m
                        LEFT JOIN {_T}.memory_blocks b ON b.memory_id = m.id
                        WHERE m.agent = %(a)s AND m.partition = %(p)s
                        GROUP BY m.id""",
                    self._where,
                ).fetchone()
            else:
                if not isinstance(archive_id, str) or not archive_id.startswith(_ARCHIVE_PREFIX):
                    return None
                row = conn.execute(
                    f"SELECT octet_length(data), extract(epoch FROM written_at)"
                    f" FROM {_T}.memory_archives"
                    " WHERE agent = %(a)s AND partition = %(p)s AND archive_id = %(i)s",
                    {**self._where, "i": archive_id},
                ).fetchone()
        return None if row is None else StoredInfo(int(row[0]), float(row[1]))

    def remove_temps(self) -> int:
        """0: a transaction that did not commit leaves nothing behind."""
        return 0

    def delete(self) -> None:
        """Remove the memory and archives (the agent's own store: with every subject memory).

        The subject memories' locks are taken too (agent first, then subjects by name:
        the order every walk takes them in), so no subject writer is cut short.
        """
        with self._tx("deleting the agent") as conn:
            if self._partition is not None:
                conn.execute(
                    f"DELETE FROM {_T}.memories WHERE agent = %(a)s AND partition = %(p)s",
                    self._where,
                )
                conn.execute(
                    f"DELETE FROM {_T}.memory_archives WHERE agent = %(a)s AND partition = %(p)s",
                    self._where,
                )
                return
            locked: set[str] = set()
            while True:
                partitions = {s.partition or "" for s in self._partitions(conn)} - locked
                if not partitions:
                    break
                for partition in sorted(partitions):
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(%s)", (agent_key(self._agent, partition),)
                    )
                locked |= partitions
            conn.execute(f"DELETE FROM {_T}.memories WHERE agent = %(a)s", self._where)
            conn.execute(f"DELETE FROM {_T}.memory_archives WHERE agent = %(a)s", self._where)

    def _partitions(self, conn: psycopg.Connection[Any]) -> list[PgAgentStore]:
        rows = conn.execute(
            f"SELECT partition FROM {_T}.memories WHERE agent = %(a)s AND partition <> ''"
            f" UNION SELECT partition FROM {_T}.memory_archives"
            " WHERE agent = %(a)s AND partition <> '' ORDER BY 1",
            self._where,
        ).fetchall()
        return [self._open(row[0]) for row in rows]

    def close(self) -> None:
        """Nothing to release: connections are the pool's, between calls."""

    def __repr__(self) -> str:
        return f"PgAgentStore({self._stores.db.where!r}, {self._agent!r}, {self.source()!r})"


def _segments(
    block: str | None, data: bytes, known: dict[bytes, str | None]
) -> list[tuple[str, str | None]]:
    """A block's text in the pieces it is sealed in: one frame per record (its subject's keys).

    The one block of a ``Conversation.add`` is found as it is, its subject read
    from its metadata line without parsing the block (``lone_subject``, which
    remembers the lines it read in ``known``); other text is split.
    """
    text = data.decode("utf-8") if block is None else block
    lone, subject = lone_subject(data, known)
    return [(text, subject)] if lone else split_segments(text)


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import AgentStore

    _conforms: type[AgentStore] = PgAgentStore
