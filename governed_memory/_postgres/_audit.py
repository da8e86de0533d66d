"""The audit log in PostgreSQL: one hash-chained log for the whole deployment.

Every host appends to the same chain (tables in ``_ddl_audit``). An append is one
transaction:

1. take the transaction-scoped advisory lock of the log
   (``pg_advisory_xact_lock``): appends from every thread, process and host are
   totally ordered, and the lock goes with the transaction (a writer killed
   mid-append holds nothing);
2. read the newest entry and the head row under it;
3. record what is wrong first, exactly as the file log does: an ``audit.rekey``
   when the newest entry is signed by a previous key, an ``audit.discontinuity``
   when the head names an entry the table no longer holds (rows removed behind
   the trigger's back);
4. start a new segment with its ``audit.segment`` anchor when the period changed
   (the file log's ids: ``audit-2026-11.jsonl``);
5. seal the entry with the file log's :func:`~governed_memory._audit.seal`,
   insert it, rewrite the head, commit. The entry is acknowledged only then.

The threads of one process append in batches (``_batching``): the entries
queued while a batch is written are sealed in order and written with one head
update and one commit, each acknowledged after that commit.

A process that wrote the chain's end skips steps 2-4: it seals the batch after
the end it remembers and sends the lock and the write as one transaction at once,
the write guarded by that end (``_WRITE_IF``, ``_guarded``). A guard that fails
writes nothing, and the batch takes the steps above; a connection lost after the
send is settled under the lock by the entries' own lines.

A memory store in the same database writes an entry in its own statement
(:meth:`PgAuditStorage.join`, :class:`JoinedEntry`, used by the store's
``append_audited``): the entry is sealed after the end this process wrote and
written only if that end still holds and the store's rows are written too. The
joins of a process's threads are batched the same way: the leader seals each
entry after the one before, and sends every store's statement, the locks first
(every agent's, in order, then the chain's), as one transaction. The end is
*taken* while that write is in flight (``Guess.take``), so a batch of the
process's other threads reads the end under the lock rather than guess the same.

Entries are stored as their canonical line, byte for byte the file log's, so
:func:`~governed_memory._audit.verify_storage` checks them with the same code.
There is no torn entry to repair: a transaction commits whole or not at all.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .._audit import (
    GENESIS,
    SEGMENT_PREFIX,
    SEGMENT_SUFFIX,
    AuditEntry,
    AuditEvent,
    AuditKey,
    Head,
    Period,
    as_audit_key,
    canonical,
    format_ts,
    parse_entry,
    rekey_endorsement,
    seal,
    segments_to_purge,
    validate_event,
)
from .._base import Clock, SystemClock
from .._errors import (
    AuditWriteError,
    ConfigurationError,
    DatabaseError,
    EntryFormatError,
    NotFoundError,
)
from ._batching import Batcher, Request
from ._chaining import Chainer
from ._db import advisory_key, translate
from ._guarded import Guess
from ._memory_locks import in_lock_order

if TYPE_CHECKING:
    import psycopg

    from .._audit import AuditKeyLike
    from .._protocols import AuditStorage
    from ._db import Binding, Database

__all__ = ["Joined", "JoinedEntry", "PgAuditStorage", "WaitingEntry"]

# An append: (event, its attributes or the function making them from the newest entry, time).
_Item = tuple[
    str, "dict[str, Any] | Callable[[AuditEntry | None], Mapping[str, Any]]", "_dt.datetime | None"
]
_ENTRIES = "governed_memory.audit_entries"
_HEAD = "governed_memory.audit_head"
_PENDING = "governed_memory.audit_pending"
_CHAIN_AT_MOST = 2000  # waiting entries chained per transaction
# The newest entry and the head row, both possibly absent, in one row.
_END = f"""
    SELECT e.seq, e.segment, e.line, h.seq, h.hash, h.segment, h.mac
    FROM (SELECT 1) AS one
    LEFT JOIN (SELECT seq, segment, line FROM {_ENTRIES} ORDER BY seq DESC LIMIT 1) AS e ON true
    LEFT JOIN {_HEAD} AS h ON true"""
# The waiting entries, oldest first (at most _CHAIN_AT_MOST: a backlog takes several chainings).
_WAITING = f"""
    SELECT token, at, event, attrs, kid, mac FROM {_PENDING} ORDER BY id LIMIT {_CHAIN_AT_MOST}"""


# _END and the waiting entries, one row each (their columns NULL when none), in one query.
_END_WAITING = f"""
    SELECT e.seq, e.segment, e.line, h.seq, h.hash, h.segment, h.mac,
        w.token, w.at, w.event, w.attrs, w.kid, w.mac
    FROM (SELECT 1) AS one
    LEFT JOIN (SELECT seq, segment, line FROM {_ENTRIES} ORDER BY seq DESC LIMIT 1) AS e ON true
    LEFT JOIN (SELECT * FROM {_HEAD} LIMIT 1) AS h ON true
    LEFT JOIN (SELECT * FROM {_PENDING} ORDER BY id LIMIT {_CHAIN_AT_MOST}) AS w ON true
    ORDER BY w.id"""
# (The head LIMITed: estimated as the table's default 600-odd rows times the waiting
# entries', the plan would cost enough for PostgreSQL to JIT-compile it, 8-10 ms a time.)


# The entries sealed since the last write, then the head naming the newest, in one statement.
_WRITE = f"""
    WITH added AS (
        INSERT INTO {_ENTRIES} (seq, segment, ts, event, line, token)
        SELECT * FROM unnest(
            %b::bigint[], %b::text[], %b::timestamptz[], %b::text[], %b::bytea[], %b::bytea[])
    )
    INSERT INTO {_HEAD} (id, seq, hash, segment, mac) VALUES (true, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash,
        segment = EXCLUDED.segment, mac = EXCLUDED.mac"""

# The guard of a guessed write (``_guarded``): the head and the newest entry are still
# the ones this process last wrote (parameters: the head's seq, hash and MAC, the seq).
_GUARD = f"""EXISTS (SELECT FROM {_HEAD} WHERE seq = %s AND hash = %s AND mac = %s
    AND (SELECT max(seq) FROM {_ENTRIES}) = %s)"""


# The two writes of an append, each if ``{cond}`` holds (SQL without parameters): the
# entries (one as scalars: psycopg dumps arrays in Python), then the head. A store's
# joined append puts them in its own statement, which checks the guard itself.
_ADD_ONE_IF = f"""
    INSERT INTO {_ENTRIES} (seq, segment, ts, event, line, token)
    SELECT %s::bigint, %s::text, %s::timestamptz, %s::text, %s::bytea, %s::bytea WHERE {{cond}}"""
_ADD_IF = f"""
    INSERT INTO {_ENTRIES} (seq, segment, ts, event, line, token)
    SELECT * FROM unnest(
        %b::bigint[], %b::text[], %b::timestamptz[], %b::text[], %b::bytea[], %b::bytea[])
    WHERE {{cond}}"""
_HEAD_IF = f"UPDATE {_HEAD} SET seq = %s, hash = %s, segment = %s, mac = %s WHERE {{cond}}"

# _WRITE guarded by _GUARD (parameters: the guard's, then _WRITE's); the row count of the
# head's UPDATE says whether it wrote (1 or 0).
_OK = "EXISTS (SELECT FROM ok)"
_WRITE_IF = f"""
    WITH ok AS (SELECT WHERE {_GUARD}), added AS ({_ADD_IF.format(cond=_OK)})
    {_HEAD_IF.format(cond=_OK)}"""


class _End(NamedTuple):
    """The end of the chain as this process last wrote it: its newest entry and the head."""

    last: AuditEntry
    head: Head


class PgAuditStorage:
    """The deployment's audit chain in PostgreSQL (the ``AuditStorage`` seam).

    Safe across threads, processes and hosts: appends serialise on one
    transaction-scoped advisory lock.

    Args:
        db: the database (schema upgraded).
        key: authenticates entries (an :class:`AuditKey`, or its text or bytes).
        previous_keys: earlier versions of ``key``; a chain whose newest entry one
            of them signed is continued after an endorsed ``audit.rekey`` entry.
        clock: time of entries (default: the system clock).
        period: one segment per UTC ``month`` (default) or ``day``.
    """

    def __init__(
        self,
        db: Database,
        key: AuditKeyLike,
        *,
        previous_keys: Iterable[AuditKeyLike] = (),
        clock: Clock | None = None,
        period: Period | str = Period.MONTH,
    ) -> None:
        self._db = db
        self._key = as_audit_key(key)
        self._previous = {
            k.key_id: k for k in map(as_audit_key, previous_keys) if k.key_id != self._key.key_id
        }
        self._clock: Clock = clock or SystemClock()
        try:
            self._period = Period(period)
        except ValueError:
            raise ConfigurationError(
                f"audit segment period {period!r} is unknown; use 'month' or 'day'"
            ) from None
        self._lock_key = advisory_key("audit", "log")
        self._batcher: Batcher[_Item, AuditEntry] = Batcher(self._write_batch)
        self._joiner: Batcher[_Join, Joined | _Alone] = Batcher(self._join_batch)
        self._guess: Guess[_End] = Guess(order=lambda end: end.last.seq)
        self._chainer = Chainer(self._chain_quietly, self.where)

    @property
    def key(self) -> AuditKey:
        return self._key

    @property
    def clock(self) -> Clock:
        """The time of the entries."""
        return self._clock

    @property
    def previous_keys(self) -> list[AuditKey]:
        return list(self._previous.values())

    @property
    def where(self) -> str:
        """The table the log lives in, for messages and reports."""
        return f"postgresql://{self._db.where} ({_ENTRIES})"

    @property
    def db(self) -> Database:
        """The database the log lives in."""
        return self._db

    # -- writing ---------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, what: str) -> Iterator[_Chain]:
        """The chain's end under the log's advisory lock, in one transaction."""
        with self._locked_on(what, _END) as chain:
            yield chain

    @contextlib.contextmanager
    def _locked_on(self, what: str, opening: str) -> Iterator[_Chain]:
        """:meth:`_locked`, the end read by ``opening`` (its first seven columns: ``_END``'s)."""
        psycopg = _psycopg()
        self._guess.forget()  # what this writes is the new end: remembered by the caller
        try:
            with self._db.transaction(
                f"{what} the audit log", lock=self._lock_key, opening=opening
            ) as conn:
                binding = self._db.held()
                assert binding is not None  # (this transaction's)
                chain = _Chain.read(conn, binding.opened, binding)
                yield chain
                chain.flush()
        except DatabaseError as exc:
            raise AuditWriteError(self._failure(what, exc)) from exc
        except psycopg.Error as exc:
            error = translate(exc, where=self._db.where, doing=f"{what} the audit log")
            raise AuditWriteError(self._failure(what, error)) from exc

    def _failure(self, what: str, exc: BaseException) -> str:
        return (
            f"cannot {what} the audit log in {self.where}: {exc}; the operation is not "
            "reported as done. Check that the server is up and that the role may insert "
            "into the audit tables, then run `governed-memory audit verify`"
        )

    def append(
        self, event: str, attrs: Mapping[str, Any], *, at: _dt.datetime | None = None
    ) -> AuditEntry:
        """Seal and append one entry; it is committed when this returns.

        Concurrent appends of this process's threads share one transaction
        (``_batching``): each still returns only after that transaction committed.

        Raises:
            AuditWriteError: the entry could not be written (nothing was committed).
        """
        validate_event(event)
        return self._submit((event, dict(attrs), at))

    def append_after(
        self, event: str, attrs_of: Callable[[AuditEntry | None], Mapping[str, Any]]
    ) -> AuditEntry:
        """Append one entry whose attributes are made from the newest entry, under the lock."""
        validate_event(event)
        return self._submit((event, attrs_of, None))

    def _submit(self, item: _Item) -> AuditEntry:
        """``item`` written with the batch of this process's other threads' appends; alone
        inside a transaction of this thread, whose pooled connection the batch's leader
        might be waiting for (``Batcher.alone``)."""
        if self._db.held() is not None:
            return self._batcher.alone(item)
        return self._batcher.submit(item)

    def _write_batch(self, batch: Sequence[Request[_Item, AuditEntry]]) -> None:
        """Seal and write ``batch`` in one transaction under the log's lock, the head once.

        Guessed first (``_guarded``): one round trip when this process wrote the
        chain's end. Else, or when that guess missed, the end is read under the lock.
        """
        unsure = None
        end = None
        # Not inside a transaction of this thread (a pooled connection is not its to use),
        # nor for attributes made from the newest entry (read under the lock).
        if self._db.held() is None and not any(callable(r.item[1]) for r in batch):
            end = self._guess.take()
        if end is not None:
            done, unsure = self._write_guessed(batch, end)
            if done:
                return
        with self._locked("append to") as chain:
            if unsure is not None and self._committed(chain, unsure):
                return  # the guessed write did commit: its results stand
            for request in batch:
                request.result = None
            self._settle(chain)
            for request in batch:
                event, attrs, at = request.item
                if callable(attrs):
                    try:
                        made = dict(attrs(chain.last))
                    except Exception as exc:  # this request's own failure: the others go on
                        request.error = exc
                        continue
                else:
                    made = attrs
                when = at if at is not None else self._clock.now()
                request.result = self._write(chain, event, made, when, head=False)
            if chain.pending:
                chain.write_head(self._key, last=True)
            known = chain.end()
        if known is not None:
            self._guess.wrote(known)

    def _write_guessed(
        self, batch: Sequence[Request[_Item, AuditEntry]], end: _End
    ) -> tuple[bool, AuditEntry | None]:
        """Write ``batch`` after ``end`` in one round trip: (whether it committed, its newest entry
        when the connection was lost after sending it, so that the outcome is unknown)."""
        chain = _Chain(None, end.last, end.head.segment, end.head, None)
        for request in batch:
            event, attrs, at = request.item
            assert not callable(attrs)
            when = at if at is not None else self._clock.now()
            request.result = self._write(chain, event, attrs, when, head=False)
        guard = (end.head.seq, end.head.hash, end.head.mac, end.last.seq)
        try:
            counts = self._db.pipelined(
                "appending to the audit log",
                [(_WRITE_IF, (*guard, *chain.head_params(self._key)))],
                lock=self._lock_key,
            )
        except BaseException as exc:
            self._guess.forget()
            if isinstance(exc, DatabaseError):
                raise AuditWriteError(self._failure("append to", exc)) from exc
            if isinstance(exc, _psycopg().Error):
                error = translate(exc, where=self._db.where, doing="appending to the audit log")
                raise AuditWriteError(self._failure("append to", error)) from exc
            raise
        if counts is not None and counts[0] == 1:
            known = chain.end()
            assert known is not None  # (it wrote the head)
            self._guess.hit(known)
            return True, None
        self._guess.forget(missed=counts is not None)
        return False, chain.last if counts is None else None

    def join(
        self,
        event: str,
        attrs: Mapping[str, Any],
        lock: int,
        statement: JoinStatement,
        *,
        memory: tuple[str, str],
    ) -> Joined | None:
        """``event`` sealed after the end this process wrote, in a store's own statement.

        ``statement(entry)`` is the store's statement writing its rows and
        ``entry`` (:class:`JoinedEntry`) under its guards, ``lock`` the
        store's advisory lock and ``memory`` its (agent, partition): a batch
        takes its locks in the order of the memories, as every other writer
        holding several does (``_memory_locks``). The joins of this process's
        threads are written together (``_batching``): one transaction, the
        locks first, each entry sealed after the one before. Returns once that
        transaction committed: the entry and the statement's row
        (:class:`Joined`). None, with nothing
        written, when this process does not know the end, while its other
        threads append otherwise (an audit batch is written or waiting, or
        waiting entries are being chained), inside a transaction of this
        thread, or when the transaction of a batch of several was refused: then
        append the usual way.

        Raises:
            DatabaseError: the server refused the transaction of this join alone
                (nothing was committed).
        """
        validate_event(event)
        if self._db.held() is not None or not self._batcher.idle or not self._chainer.idle:
            # Other threads appending: their batch shares one commit, which is cheaper
            # for all of them than a joined write on the chain's lock in between.
            # And while waiting entries are being chained, that chaining moves the end:
            # a joined write guessing it would miss (half of them did at 4 threads).
            return None
        joined = self._joiner.submit(_Join(event, dict(attrs), lock, statement, memory))
        return joined if isinstance(joined, Joined) else None

    def _join_batch(self, batch: Sequence[Request[_Join, Joined | _Alone]]) -> None:
        """Write the joins of ``batch`` after the end this process wrote, in one transaction.

        Each statement checks that the chain ends where its entry was sealed,
        after the entry before it: one whose own guard failed wrote nothing, so
        the ones after it find another end, write nothing either, and go the
        usual way (``Joined.row`` says so).
        """
        end = self._guess.take()  # (each caller of join checked that it holds no transaction)
        if end is None:
            for request in batch:
                request.result = _ALONE
            return
        taken = end
        chain = _Chain(None, end.last, end.head.segment, end.head, None)
        entries, ends, statements = [], [], []
        for request in batch:
            event, attrs, _, statement, _ = request.item
            entry = self._write(chain, event, attrs, self._clock.now(), head=False)
            joined = JoinedEntry(end, chain.head_params(self._key), entry)
            end = chain.end()
            assert end is not None  # (it wrote the head)
            entries.append(entry)
            ends.append(end)
            statements.append(statement(joined))
        # Every memory's lock, in the order every writer takes several in, then the chain's.
        memories = in_lock_order((request.item.memory, request.item.lock) for request in batch)
        locks = (*memories, self._lock_key)
        try:
            rows = self._db.pipelined_rows(
                "appending to the memories and the audit log", statements, lock=locks
            )
        except Exception:
            self._guess.forget()
            if len(batch) == 1:
                raise  # (this join's own failure: the store reports it)
            for request in batch:  # each goes the usual way, and reports its own failure
                request.result = _ALONE
            return
        except BaseException:
            self._guess.forget()
            raise
        if rows is None:  # lost after the send: committed whole, or not at all
            self._guess.forget()
            for request, entry in zip(batch, entries, strict=True):
                request.result = Joined(entry, None, self)
            return
        for request, entry, row in zip(batch, entries, rows, strict=True):
            request.result = Joined(entry, row, self)
        written = [made for made, row in zip(ends, rows, strict=True) if row[2] == 1]
        if written:
            self._guess.hit(written[-1])
        elif rows[0][0]:  # the first one's own guard failed: the end is still the one taken
            self._guess.wrote(taken)
        else:  # another writer moved the end
            self._guess.forget(missed=True)

    def _joined_unknown(self, entry: AuditEntry) -> bool:
        """Whether a joined write whose outcome is unknown committed (read under the lock)."""
        with self._locked("check an append to") as chain:
            return self._committed(chain, entry)

    @staticmethod
    def _committed(chain: _Chain, newest: AuditEntry) -> bool:
        """Whether ``newest`` (the last of a write whose outcome is unknown) is in the chain.

        Read under the log's lock, so that write has ended either way; it
        committed whole or not at all.
        """
        if chain.last is None or chain.last.seq < newest.seq:
            return False
        row = chain.conn.execute(
            f"SELECT line FROM {_ENTRIES} WHERE seq = %s", (newest.seq,)
        ).fetchone()
        return row is not None and bytes(row[0]) == newest.line

    # -- group chaining ----------------------------------------------------------------

    def waiting(self, event: str, attrs: Mapping[str, Any]) -> WaitingEntry:
        """``event``, MACed and not chained yet, for another store's transaction (group chaining).

        The store inserts it with its own rows, taking no lock of the log, so
        the writers of every host commit at once (PostgreSQL's group commit);
        :meth:`WaitingEntry.chained` then chains it, with every other entry
        waiting, in one transaction under the log's lock.
        """
        validate_event(event)
        now = self._clock.now()
        # Aware and in UTC, so the instant read back formats to the same ``ts``.
        when = now if now.tzinfo is _dt.UTC else now.astimezone(_dt.UTC)
        token = os.urandom(16)
        body = canonical(dict(attrs))
        mac = self._key.mac(_waiting_body(token, when, event, body))
        return WaitingEntry(token, (token, when, event, body, self._key.key_id, mac))

    def chain_soon(self) -> None:
        """Chain the waiting entries in the background (a store just committed one)."""
        self._chainer.soon()

    def waiting_committed(self, token: bytes) -> bool:
        """Whether the waiting entry ``token`` was committed (it waits, or is chained).

        For a write whose connection was lost after it was sent.
        """
        rows = self._read(
            "a waiting entry",
            f"SELECT EXISTS (SELECT FROM {_PENDING} WHERE token = %s) "
            f"OR EXISTS (SELECT FROM {_ENTRIES} WHERE token = %s)",
            (token, token),
        )
        return bool(rows and rows[0][0])

    def _chain_waiting(
        self, chain: _Chain, rows: list[Any] | None = None, *, last: bool = True
    ) -> dict[bytes, AuditEntry]:
        """Chain the waiting entries, oldest first, and remove them from ``audit_pending``.

        ``rows``: (token, at, event, attrs, kid, mac) of each, as read under the
        lock (a row of NULLs: none); read here when not given. ``last``: the
        transaction writes nothing after, so the entries and the head are
        written, and the rows removed, with the COMMIT (else at once).
        """
        if rows is None:
            rows = chain.conn.execute(_WAITING).fetchall()
        rows = [row for row in rows if row[0] is not None]
        if not rows:
            return {}
        self._settle(chain)
        chained: dict[bytes, AuditEntry] = {}
        for token, at, event, body, kid, mac in rows:
            token, body = bytes(token), bytes(body)
            key = self._key if kid == self._key.key_id else self._previous.get(str(kid))
            attrs = _authentic(key, token, at, str(event), body, str(mac))
            if attrs is None:  # not written by a holder of the audit key: recorded, not chained
                problem = {
                    "reason_code": "pending_unauthenticated",
                    "found_seq": chain.next_seq - 1,
                    "found_hash": chain.prev,
                }
                now = self._clock.now()
                entry = self._write(
                    chain, AuditEvent.DISCONTINUITY, problem, now, head=False, token=token
                )
            else:
                entry = self._write(chain, str(event), attrs, at, head=False, token=token)
            chained[token] = entry
        chain.write_head(self._key, last=last)
        remove = (f"DELETE FROM {_PENDING} WHERE token = ANY(%b)", (list(chained),))
        binding = self._db.held()
        assert binding is not None  # (this transaction's)
        if last:
            binding.defer(*remove)
        else:
            chain.conn.execute(*remove)
        return chained

    def chain_all_waiting(self) -> int:
        """Chain every waiting entry now, oldest first; how many.

        Each transaction takes the log's lock and chains the entries committed
        before it (at most ``_CHAIN_AT_MOST``: a backlog takes several).

        Raises:
            AuditWriteError: the chain could not be written (the entries stay waiting).
        """
        count = 0
        while True:
            with self._locked_on("chain the waiting entries into", _END_WAITING) as chain:
                binding = self._db.held()
                assert binding is not None  # (this transaction's)
                chained = self._chain_waiting(chain, [row[7:] for row in binding.opened])
                known = chain.end() if chained else None
            if known is not None:
                self._guess.wrote(known)
            count += len(chained)
            if len(chained) < _CHAIN_AT_MOST:
                return count

    def _chain_quietly(self) -> None:
        """The background chaining: :meth:`chain_all_waiting` when anything waits."""
        if self._any_waiting():
            self.chain_all_waiting()

    def _any_waiting(self) -> bool:
        rows = self._read("waiting entries", f"SELECT EXISTS (SELECT FROM {_PENDING})")
        return bool(rows and rows[0][0])

    def _reading(self) -> None:
        """Before a read of the chain: chain the entries waiting, if this role may."""
        if self._any_waiting():
            with contextlib.suppress(AuditWriteError):  # (a read-only role: they stay waiting)
                self.chain_all_waiting()

    def import_entry(self, entry: AuditEntry, segment: str) -> None:
        """Append ``entry`` exactly as stored elsewhere, in ``segment``, and name it in the head (a migration).

        The entry keeps its seq, hash, prev and MAC, so ``audit verify`` and the
        checkpoints signed before accept the copy. It must come after the newest
        entry; nothing is re-sealed.

        Raises:
            AuditWriteError: ``entry`` does not follow the log's newest entry, or
                the server refused (nothing was committed).
        """
        with self._locked("import into") as chain:
            if chain.last is not None and entry.seq <= chain.last.seq:
                raise AuditWriteError(
                    f"audit entry seq {entry.seq} cannot be imported into {self.where}: the "
                    f"log already ends at seq {chain.last.seq}; import into an empty log, "
                    "oldest entry first"
                )
            chain.insert(entry, segment, entry.time)
            chain.write_head(self._key)

    def repair(self) -> list[AuditEntry]:
        """Record a key change or a lost end of the log now; the entries written."""
        with self._locked("repair") as chain:
            written = self._settle(chain)
            return written + list(self._chain_waiting(chain).values())

    def _settle(self, chain: _Chain) -> list[AuditEntry]:
        """Write the rekey and discontinuity entries the chain's state calls for."""
        written: list[AuditEntry] = []
        last = chain.last
        if last is not None and last.kid != self._key.key_id:
            old = self._previous.get(last.kid)
            if old is None or not last.mac_ok(old):
                raise AuditWriteError(
                    f"the audit log in {self.where} was written with key id {last.kid}, but "
                    f"the configured audit key has id {self._key.key_id}; configure the "
                    "original GOVERNED_MEMORY_AUDIT_KEY (or give the previous master key as "
                    "GOVERNED_MEMORY_MASTER_KEY_OLD[_FILE] while rotating it)"
                )
            rekey: dict[str, Any] = {
                "old_key_id": old.key_id,
                "new_key_id": self._key.key_id,
                "endorsement": rekey_endorsement(old, chain.next_seq, chain.prev, self._key.key_id),
            }
            head_key = old
            # In the segment of the entries the old key signed: the change comes first.
            written.append(
                self._write(chain, AuditEvent.REKEY, rekey, self._clock.now(), stay=True)
            )
        else:
            head_key = self._key
        problem = _head_problem(chain.head, last, head_key)
        if problem is not None:
            reason, head = problem
            attrs: dict[str, Any] = {
                "reason_code": reason,
                "found_seq": last.seq if last else 0,
                "found_hash": last.hash if last else GENESIS,
            }
            seq = chain.next_seq
            if head is not None:
                attrs.update(head_seq=head.seq, head_hash=head.hash, segment=head.segment)
                seq = max(seq, head.seq + 1)
            written.append(
                self._write(chain, AuditEvent.DISCONTINUITY, attrs, self._clock.now(), seq=seq)
            )
        return written

    def _write(
        self,
        chain: _Chain,
        event: str,
        attrs: dict[str, Any],
        when: _dt.datetime,
        *,
        seq: int | None = None,
        stay: bool = False,
        head: bool = True,
        token: bytes | None = None,
    ) -> AuditEntry:
        """Seal and insert one entry (and the anchor of a new segment first); update the head.

        ``stay``: in the newest segment whatever the period (a rekey: nothing may
        be signed with the new key before it).
        """
        segment = f"{SEGMENT_PREFIX}{self._period.label(when)}{SEGMENT_SUFFIX}"
        if chain.segment is None or (segment > chain.segment and not stay):
            anchor = seal(
                seq=seq if seq is not None else chain.next_seq,
                ts=format_ts(when),
                event=AuditEvent.SEGMENT,
                attrs={"segment": segment, "previous_segment": chain.segment},
                prev=chain.prev,
                key=self._key,
            )
            chain.insert(anchor, segment, when)
            seq = None
        entry = seal(
            seq=seq if seq is not None else chain.next_seq,
            ts=format_ts(when),
            event=event,
            attrs=attrs,
            prev=chain.prev,
            key=self._key,
        )
        # Behind the clock (a segment of a later period exists): stay in the newest.
        chain.insert(entry, chain.segment or segment, when, token)
        if head:  # (else the caller writes it, after more entries)
            chain.write_head(self._key)
        return entry

    # -- retention ---------------------------------------------------------------

    def expired_segments(
        self,
        *,
        now: _dt.datetime,
        max_age: _dt.timedelta | None,
        min_age: _dt.timedelta = _dt.timedelta(0),
    ) -> list[str]:
        """The oldest segments whose newest entry is older than ``max_age`` (never the newest)."""
        if max_age is None:
            return []
        cutoff = now.astimezone(_dt.UTC) - max(max_age, min_age)
        expired = []
        for name, newest in self._segments()[:-1]:
            if newest >= cutoff:
                break
            expired.append(name)
        return expired

    def purge_segments(self, names: Iterable[str]) -> list[str]:
        """Remove the oldest whole segments, recording the removal in the chain first.

        The ``audit.purge`` entry and the deletion commit in one transaction; the
        rows are deleted by ``governed_memory.audit_purge_segments``, the only way
        past the table's trigger (see ``_ddl_audit``).

        Raises:
            NotFoundError: a name is not a segment of this log.
            ConfigurationError: the names are not the oldest segments, or include
                the newest.
            AuditWriteError: the purge could not be written (nothing was removed).
        """
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return []
        with self._locked("purge segments of") as chain:
            order = [name for name, _newest in chain.segments()]
            chosen = segments_to_purge(order, wanted, where=self.where)
            self._settle(chain)
            self._chain_waiting(chain, last=False)  # (before the purge entry: the newest)
            last = chain.last_of(chosen[-1])
            self._write(
                chain,
                AuditEvent.AUDIT_PURGE,
                {
                    "segments": chosen,
                    "last_segment": chosen[-1],
                    "last_seq": last.seq,
                    "last_hash": last.hash,
                },
                self._clock.now(),
            )
            chain.conn.execute("SELECT governed_memory.audit_purge_segments(%b::text[])", (chosen,))
            return chosen

    def purge_expired(
        self,
        *,
        now: _dt.datetime | None = None,
        max_age: _dt.timedelta | None,
        min_age: _dt.timedelta = _dt.timedelta(0),
    ) -> list[str]:
        """Purge the segments :meth:`expired_segments` lists; their ids."""
        when = now if now is not None else self._clock.now()
        return self.purge_segments(
            self.expired_segments(now=when, max_age=max_age, min_age=min_age)
        )

    # -- reading -------------------------------------------------------------------

    def _read(self, doing: str, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        psycopg = _psycopg()
        try:
            rows: list[Any] = self._db.read(
                f"reading the audit log ({doing})",
                lambda conn: conn.execute(sql, params).fetchall(),
            )
            return rows
        except psycopg.Error as exc:
            raise translate(exc, where=self._db.where, doing=f"reading {doing}") from None

    def _segments(self) -> list[tuple[str, _dt.datetime]]:
        rows = self._read(
            "segments",
            f"SELECT segment, max(ts) FROM {_ENTRIES} GROUP BY segment ORDER BY min(seq)",
        )
        return [(str(name), newest) for name, newest in rows]

    def segment_ids(self) -> list[str]:
        """The ids of the segments, oldest first (by the seq of their first entry).

        Entries left waiting (a writer killed between its commit and the chaining)
        are chained first, so what a read of the log sees is every entry committed.
        """
        self._reading()
        return [name for name, _newest in self._segments()]

    def segment_entries(self, segment_id: str) -> list[AuditEntry]:
        """The readable entries of one segment, in order (unverified).

        Raises:
            NotFoundError: ``segment_id`` is not a segment of this log.
        """
        rows = self._read(
            "a segment",
            f"SELECT line FROM {_ENTRIES} WHERE segment = %s ORDER BY seq",
            (segment_id,),
        )
        if not rows:
            raise NotFoundError(
                f"{segment_id!r} is not a segment of the audit log in {self.where}; its "
                f"segments are {self.segment_ids()}"
            )
        return _parsed(row[0] for row in rows)

    def entries(self) -> Iterator[AuditEntry]:
        """Every readable entry, oldest first (unverified: use ``verify_storage``)."""
        for segment in self.segment_ids():
            with contextlib.suppress(NotFoundError):  # purged meanwhile
                yield from self.segment_entries(segment)

    def tail(self, n: int) -> list[AuditEntry]:
        """The newest ``n`` readable entries, oldest first."""
        if n <= 0:
            return []
        self._reading()
        rows = self._read(
            "the tail", f"SELECT line FROM {_ENTRIES} ORDER BY seq DESC LIMIT %s", (n,)
        )
        return list(reversed(_parsed(row[0] for row in rows)))

    def head(self) -> Head | None:
        """The head row (None when the log is empty)."""
        self._reading()
        rows = self._read("the head", f"SELECT seq, hash, segment, mac FROM {_HEAD}")
        if not rows:
            return None
        seq, digest, segment, mac = rows[0]
        return Head(int(seq), str(digest), str(segment), str(mac))

    def close(self) -> None:
        """Chain what this process left waiting, then stop its background chaining thread.

        Best effort: with the server away, the entries stay committed and waiting
        (a warning is logged). Connections belong to the :class:`Database`. Entries written after this
        wait in ``audit_pending``, chained by the next read of the log or the
        next chaining of any host (nothing depends on the thread: ``_chaining``).
        """
        self._chainer.finish("on close")

    def __repr__(self) -> str:
        return f"PgAuditStorage({self._db.where!r}, key_id={self._key.key_id!r})"


class JoinedEntry:
    """An audit entry sealed after an end this process wrote, not yet written (``_joined``).

    :meth:`parts` are the statements writing it and the head naming it, for a
    store's statement that checks ``guard`` (the chain still ends where the
    entry was sealed). That statement's row (:class:`Joined`) starts with
    whether ``guard`` held, then the store's own guard, then the heads written
    (1 or 0), then what else the store reports.
    """

    __slots__ = ("_head", "entry", "guard")

    def __init__(self, end: _End, head: tuple[Any, ...], entry: AuditEntry) -> None:
        self._head = head
        self.entry = entry
        self.guard: tuple[str, tuple[Any, ...]] = (
            _GUARD,
            (end.head.seq, end.head.hash, end.head.mac, end.last.seq),
        )

    def parts(self, cond: str) -> tuple[str, tuple[Any, ...], str, tuple[Any, ...]]:
        """The INSERT of the entries and the UPDATE of the head, each if ``cond`` holds.

        (Each SQL, then its parameters.) ``cond`` is SQL without parameters, true
        when ``guard`` held in the store's statement: the UPDATE counts 1 then.
        """
        *columns, seq, hash_, segment, mac = self._head
        if len(columns[0]) == 1:
            add, add_params = _ADD_ONE_IF, tuple(column[0] for column in columns)
        else:
            add, add_params = _ADD_IF, tuple(columns)
        return (
            add.format(cond=cond),
            add_params,
            _HEAD_IF.format(cond=cond),
            (seq, hash_, segment, mac),
        )


JoinStatement = Callable[[JoinedEntry], tuple[str, tuple[Any, ...]]]


class _Join(NamedTuple):
    """A store's request to join an entry (:meth:`PgAuditStorage.join`)."""

    event: str
    attrs: dict[str, Any]
    lock: int
    statement: JoinStatement
    memory: tuple[str, str]  # (agent, partition: "" for the agent's own): the lock order


class Joined(NamedTuple):
    """A join's outcome: its entry, and the row of the store's statement once committed.

    ``row`` is None when the connection was lost after the send: whether the
    transaction committed is then unknown (:meth:`committed` reads it).
    """

    entry: AuditEntry
    row: tuple[Any, ...] | None
    storage: PgAuditStorage

    def committed(self) -> bool:
        """Whether the entry of a join whose outcome was unknown is in the chain."""
        return self.storage._joined_unknown(self.entry)


class _Alone:
    """The result of a join that was not written: the store appends the usual way."""


_ALONE = _Alone()


class WaitingEntry:
    """An audit entry MACed but not chained, for a store's own transaction (group chaining).

    ``write(also)`` inserts it into ``audit_pending`` if ``also`` holds (its row
    count: 1 or 0). Once the
    store's transaction committed, the entry is recorded: it is chained in the
    background (``PgAuditStorage.chain_soon``) and by every read of the log.
    Its ``seq`` is not known until then (None).
    """

    __slots__ = ("_params", "token")

    seq = None

    def __init__(self, token: bytes, params: tuple[Any, ...]) -> None:
        self._params = params
        self.token = token

    def write(self, also: tuple[str, tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
        """The statement inserting the entry, if ``also`` holds."""
        sql = (
            f"INSERT INTO {_PENDING} (token, at, event, attrs, kid, mac) "
            f"SELECT %s, %s, %s, %s, %s, %s WHERE {also[0]}"
        )
        return sql, (*self._params, *also[1])


class _Chain:
    """The end of the chain as read under the lock, advanced by the inserts of one transaction."""

    def __init__(
        self,
        conn: psycopg.Connection[Any] | None,
        last: AuditEntry | None,
        segment: str | None,
        head: Head | None,
        binding: Binding | None,
    ) -> None:
        self._conn = conn
        self._binding = binding
        self.written: Head | None = None  # the head this transaction wrote last
        self.last = last
        self.segment = segment
        self.head = head
        self._seq = last.seq if last else 0
        self._prev = last.hash if last else GENESIS
        self._pending: list[tuple[int, str, _dt.datetime, str, bytes, bytes | None]] = []

    @classmethod
    def read(cls, conn: psycopg.Connection[Any], rows: list[Any], binding: Binding) -> _Chain:
        """The chain's end from ``rows``, what ``_END`` read when the transaction began."""
        assert rows  # (a SELECT of (SELECT 1) LEFT JOINed returns a row)
        row = rows[0]
        seq, segment_name, line, head_seq, head_hash, head_segment, head_mac = row[:7]
        last: AuditEntry | None = None
        segment: str | None = None
        if seq is not None:
            segment = str(segment_name)
            try:
                last = parse_entry(bytes(line))
            except EntryFormatError as exc:
                raise AuditWriteError(
                    f"the newest audit entry (row seq {seq}) is not readable ({exc}); run "
                    "`governed-memory audit verify` and restore the table from a backup"
                ) from None
        head = None
        if head_seq is not None:
            head = Head(int(head_seq), str(head_hash), str(head_segment), str(head_mac))
        return cls(conn, last, segment, head, binding)

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The transaction's connection (a chain read under the lock; a guessed one has none)."""
        assert self._conn is not None
        return self._conn

    @property
    def next_seq(self) -> int:
        return self._seq + 1

    @property
    def prev(self) -> str:
        return self._prev

    def insert(
        self, entry: AuditEntry, segment: str, when: _dt.datetime, token: bytes | None = None
    ) -> None:
        """Add ``entry`` to the chain; written with the head by the next :meth:`write_head`.

        ``token``: the waiting entry (``audit_pending``) it was chained from.
        """
        self._pending.append((entry.seq, segment, entry.time, entry.event, entry.line, token))
        self.last, self.segment = entry, segment
        self._seq, self._prev = entry.seq, entry.hash

    def write_head(self, key: AuditKey, *, last: bool = False) -> None:
        """Insert the entries added since the last call and point the head at the newest.

        One statement for both; ``last``: the transaction's last statement, sent
        with its COMMIT (one round trip for the append's writes and commit).
        """
        params = self.head_params(key)
        assert self._binding is not None  # (a chain read under the lock)
        if last:
            self._binding.defer(_WRITE, params)
        else:
            self.conn.execute(_WRITE, params)

    def head_params(self, key: AuditKey) -> tuple[Any, ...]:
        """The entries added since the last call, and the head naming the newest, as ``_WRITE``'s parameters."""
        assert self.last is not None and self.segment is not None
        body = Head(self.last.seq, self.last.hash, self.segment, "").body()
        head = self.written = Head(
            self.last.seq, self.last.hash, self.segment, key.mac(b"head\x00" + body)
        )
        pending, self._pending = self._pending, []
        columns = [list(column) for column in zip(*pending, strict=True)] if pending else [[]] * 6
        return (*columns, head.seq, head.hash, head.segment, head.mac)

    def end(self) -> _End | None:
        """What a guarded write of this process's next append checks (see ``_guarded``).

        None when this transaction wrote no head (the end is then another's).
        """
        assert not self._pending
        if self.last is None or self.written is None or self.written.seq != self.last.seq:
            return None
        return _End(self.last, self.written)

    @property
    def pending(self) -> bool:
        """Whether entries were added since the last :meth:`write_head`."""
        return bool(self._pending)

    def flush(self) -> None:
        """Check that nothing added is left unwritten when the transaction commits."""
        if self._pending:  # every insert is followed by write_head: a bug otherwise
            raise AuditWriteError(
                f"{len(self._pending)} audit entries were sealed but not written; the "
                "transaction is rolled back (report this as a bug)"
            )

    def segments(self) -> list[tuple[str, _dt.datetime]]:
        rows = self.conn.execute(
            f"SELECT segment, max(ts) FROM {_ENTRIES} GROUP BY segment ORDER BY min(seq)"
        ).fetchall()
        return [(str(name), newest) for name, newest in rows]

    def last_of(self, segment: str) -> AuditEntry:
        row = self.conn.execute(
            f"SELECT line FROM {_ENTRIES} WHERE segment = %s ORDER BY seq DESC LIMIT 1",
            (segment,),
        ).fetchone()
        try:
            return parse_entry(bytes(row[0])) if row is not None else parse_entry(b"")
        except EntryFormatError:
            raise AuditWriteError(
                f"segment {segment} holds no readable last entry, so its removal cannot be "
                "recorded; run `governed-memory audit verify`"
            ) from None


def _head_problem(
    head: Head | None, last: AuditEntry | None, key: AuditKey
) -> tuple[str, Head | None] | None:
    """What the head row says is wrong with the end of the chain (the file log's reason codes)."""
    if head is not None and not head.mac_ok(key):
        return ("head_unauthenticated", None) if last else None
    if head is None:
        return ("head_missing", None) if last is not None else None
    if last is None:
        return "segments_missing", head
    if head.seq > last.seq:
        return "head_ahead", head
    if head.seq == last.seq and head.hash != last.hash:
        return "head_mismatch", head
    return None


def _parsed(lines: Iterable[Any]) -> list[AuditEntry]:
    found = []
    for line in lines:
        with contextlib.suppress(EntryFormatError):
            found.append(parse_entry(bytes(line)))
    return found


def _waiting_body(token: bytes, when: _dt.datetime, event: str, attrs: bytes) -> bytes:
    """What a waiting entry's MAC covers: its token, time, event and canonical attributes."""
    return b"\x00".join((b"pending", token, format_ts(when).encode(), event.encode(), attrs))


def _authentic(
    key: AuditKey | None, token: bytes, when: _dt.datetime, event: str, body: bytes, mac: str
) -> dict[str, Any] | None:
    """The attributes of a waiting entry whose MAC verifies under ``key``; else None."""
    if key is None or not key.verify_mac(_waiting_body(token, when, event, body), mac):
        return None
    try:
        attrs = json.loads(body)
    except ValueError:
        return None
    return attrs if isinstance(attrs, dict) else None


def _one(line: Any, where: str) -> AuditEntry:
    try:
        return parse_entry(bytes(line))
    except EntryFormatError as exc:
        raise AuditWriteError(
            f"an audit entry of {where} is not readable ({exc}); run "
            "`governed-memory audit verify` and restore the table from a backup"
        ) from None


def _psycopg() -> Any:
    from ._db import _import_psycopg

    return _import_psycopg()[0]


if TYPE_CHECKING:
    _conforms: type[AuditStorage] = PgAuditStorage
