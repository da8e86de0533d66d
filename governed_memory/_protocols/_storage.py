"""The storage seam: what every persistent component needs from a backend, named by id.

Nothing here names a file. An agent is named by its agent name, an archive by
the id :meth:`AgentStore.compact` returned, a record log or document by the
backend that opened it. The file backend (``_stores`` for agent memory,
``_records`` for logs and documents) implements these protocols exactly as the
reference lays files out; a database backend implements the same methods, and
the contract suites in ``tests/contract/`` run over every implementation.

What an implementation promises, beyond the signatures:

* Text-exact: what :meth:`AgentStore.append` and :meth:`AgentStore.compact`
  were given is what :meth:`AgentStore.read_memory` and
  :meth:`AgentStore.read_archive` return, whatever the stored form.
* Atomic: a crash at any point leaves the previous state or the new one,
  never a mix, and a failed call leaves the previous state.
* Safe across threads and processes: :meth:`AgentStore.lock` is an exclusive
  lock on the agent (re-entrant for the store's own methods) that every other
  store opened on the same agent, in any process, respects.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

__all__ = [
    "AgentStore",
    "AuditHeadView",
    "AuditRecord",
    "AuditStorage",
    "DeploymentStorage",
    "Leadership",
    "LineBatch",
    "MemoryBackend",
    "PurgeJournal",
    "RecordDocument",
    "RecordLock",
    "RecordLog",
    "RecordPlace",
    "StoreFactory",
    "StoredInfo",
    "WrappedKeyStorage",
    "WriteGuard",
]


@dataclass(frozen=True)
class StoredInfo:
    """How much one stored memory or archive takes, and when it last changed.

    ``size`` counts the bytes the backend keeps (ciphertext when encrypted),
    ``modified`` is a POSIX timestamp.
    """

    size: int
    modified: float


class AgentStore(Protocol):
    """Durable memory of one agent: the active memory and its archives, in MEMORY.md text form.

    The active memory is one text (a header, then message blocks); each
    compaction moves it to a new archive, named by an id the store chooses,
    and starts a fresh one. Archive ids sort oldest first.
    """

    accepts_utf8_blocks: ClassVar[bool]
    """True when the store also has ``append_utf8(data: bytes)``: :meth:`append`
    for one block already encoded as UTF-8 (the default-mode fast path)."""

    @property
    def agent(self) -> str:
        """The agent's name."""
        ...

    @property
    def partition(self) -> str | None:
        """None for the agent's own memory; the subject folder's name for one subject's memory.

        Under ``[memory] isolation = "subject"`` each data subject's records
        live in a memory of their own (:meth:`subject_store`), named by a
        (keyed) hash of the subject id, never by the id itself.
        """
        ...

    def subject_store(self, subject_id: str) -> AgentStore:
        """The memory of ``subject_id`` on this agent (same kind of store; opening creates nothing).

        Only the agent's own store has subject stores; asked of a subject's
        store it raises :class:`StorageError`. Its :attr:`agent` is this
        store's, and :meth:`source` names it relative to the agent
        (``subjects/<name>/MEMORY.md`` in the file backend).
        """
        ...

    def subject_stores(self) -> Sequence[AgentStore]:
        """Every subject memory this agent has, in a stable order (none for a subject's store).

        What export, erasure, retention and inspection walk besides the
        agent's own memory; :meth:`delete` of the agent removes them too.
        """
        ...

    def ensure(self) -> None:
        """Create the agent and an active memory with a fresh header if missing."""
        ...

    def read_memory(self) -> str | None:
        """The active memory's text, or None when there is none. Never creates anything."""
        ...

    def append(self, block: str) -> None:
        """Append one message block to the active memory (created when missing)."""
        ...

    def compact(self, first_block: str | None) -> str | None:
        """Archive the active memory, then replace it with a fresh header + ``first_block``.

        The archive is complete and durable before the memory is replaced,
        and is skipped when the memory holds no message block. Returns the
        new archive's id, or None when none was written. On failure nothing
        has changed and the error propagates.
        """
        ...

    def list_archives(self) -> list[str]:
        """The ids of the agent's archives, oldest first."""
        ...

    def read_archive(self, archive_id: str) -> str:
        """The text of one archive; :class:`StorageError` for an id the store does not hold."""
        ...

    def rewrite_memory(self, text: str) -> None:
        """Atomically replace the active memory's text (erasure, rectification).

        Call it inside :meth:`lock` after reading, so nothing is appended in
        between. Refused with :class:`StorageError` when there is no active
        memory; on failure the memory is unchanged. Copies a crash may have
        left of the old text are removed first.
        """
        ...

    def rewrite_archive(self, archive_id: str, text: str) -> None:
        """Atomically replace one archive's text; the rules of :meth:`rewrite_memory`."""
        ...

    def stat(self, archive_id: str | None = None) -> StoredInfo | None:
        """The active memory's (None) or one archive's stored size and time; None when absent."""
        ...

    def source(self, archive_id: str | None = None) -> str:
        """Where the active memory (None) or an archive is kept, for reports and exports.

        Relative to the agent (the file backend: ``MEMORY.md``,
        ``archive/history_<ts>.md``); stable, so receipts can cite it.
        """
        ...

    def remove_temps(self) -> int:
        """Remove what a crashed writer left behind that may hold old text; how many items.

        A compaction or rewrite killed before its last step can leave a
        temporary copy of the text it was replacing (the file backend:
        ``.gm-tmp-*`` files in the agent's folders). On the agent's own store
        this covers its subject memories too. An erasure calls it so the
        erased subject's text does not survive there. A backend that leaves
        nothing behind returns 0.
        """
        ...

    def delete(self) -> None:
        """Remove the agent: its active memory and every archive (erasure of an agent).

        Inside :meth:`lock`: a writer waiting on the lock then finds no agent
        and starts a new, empty one.
        """
        ...

    def lock(self) -> AbstractContextManager[None]:
        """Hold the agent's exclusive inter-process lock (re-entrant for the store's own methods)."""
        ...

    def close(self) -> None:
        """Release what the store holds open; using it again reopens."""
        ...


StoreFactory = Callable[[Path, Callable[[], str]], AgentStore]
"""Builds the store of one agent from (its ``MEMORY.md`` path, a header factory).

The path is the reference's ``memory_md_path`` (``<workspace>/agents/<name>/MEMORY.md``):
the agent's name is its folder's. A database backend reads the name from it and
keeps nothing at the path.
"""


class MemoryBackend(Protocol):
    """Where the agents' memory is kept: lists the agents and opens the store of one.

    Export, erasure and inspection find agents through it. The file backend
    lists ``<workspace>/agents/``; a database backend lists its agents table.
    """

    def agents(self) -> list[str]:
        """The names of the agents that have memory, sorted."""
        ...

    def has_agent(self, agent: str) -> bool:
        """Whether ``agent`` has memory (an invalid name raises ``InvalidAgentNameError``)."""
        ...

    def open(self, agent: str, header: Callable[[], str]) -> AgentStore:
        """The store of ``agent``; opening creates nothing (``header`` builds a new memory's)."""
        ...


class RecordLog(Protocol):
    """An append-only log of JSON records (consent, erasure progress).

    :meth:`append` is durable when it returns; a record torn by a crash is
    never returned by :meth:`read` and never merges with the next append.
    """

    def read(self) -> Sequence[Any]:
        """Every complete record, oldest first (parsed by the log's owner)."""
        ...

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record durably."""
        ...

    def cached(self) -> tuple[Sequence[Any], int, WriteGuard | None]:
        """What :meth:`read` last returned, without reading: the records, how many times
        the log was found replaced, and a guard true while they are still all of it
        (None: nothing read yet, or a place without guards)."""
        ...

    def open(self, raw: bytes) -> bytes:
        """The plaintext JSON of one stored record (stored records may be sealed)."""
        ...

    def rewrite(self, convert: Callable[[bytes], bytes | None]) -> bool:
        """Replace each stored record by ``convert(stored)`` (None drops it), atomically.

        Takes the writers' lock itself, so no record is appended between the
        decisions and the replacement; an exception from ``convert`` changes
        nothing. Returns whether anything changed.
        """
        ...

    def locked(self) -> AbstractContextManager[None]:
        """Exclude every writer of the log for a block (e.g. while its stored form is converted).

        Not re-entrant: call neither :meth:`append` nor :meth:`rewrite` inside it.
        """
        ...

    def delete(self) -> None:
        """Remove the log and everything in it."""
        ...


class RecordDocument(Protocol):
    """One JSON document replaced as a whole (holds, erasure state, scheduled erasures)."""

    def read(self) -> dict[str, Any] | None:
        """The document's body, or None when there is none."""
        ...

    def write(self, body: Mapping[str, Any]) -> None:
        """Replace the document atomically and durably (does not take the lock)."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """Hold the writers' lock across a read and a :meth:`write` (not re-entrant)."""
        ...

    def delete(self) -> bool:
        """Remove the document; whether there was one."""
        ...


class RecordLock(Protocol):
    """A writers' lock of a record place, across threads and processes (not re-entrant).

    The file place's is an ``flock`` on a lock file (``consent.lock``); a
    database place's a transaction-scoped advisory lock.
    """

    def held(self) -> AbstractContextManager[Any]:
        """Hold the lock for a block. What it yields is the place's token: passed as
        ``under=`` to the place's calls in the block, they run inside the lock's
        transaction (a database place) and are acknowledged when the block ends."""
        ...


@dataclass(frozen=True)
class LineBatch:
    """What :meth:`RecordPlace.read_lines` found since a reader's mark.

    ``lines`` are complete lines as stored (sealed or not, no newline).
    ``restarted``: the log was replaced, truncated or removed since ``mark``
    (or the reader had none), so ``lines`` are all of it and the reader drops
    what it had. ``mark`` is passed back on the next call (None: the log is
    absent). ``at`` names where ``lines`` start, for messages (``byte 120``).
    """

    lines: Sequence[bytes]
    mark: Any
    restarted: bool
    at: str


@dataclass(frozen=True)
class WriteGuard:
    """What a reader saw, as a condition a database write checks in its own statement.

    ``sql`` (with ``params``, in order) is true while what was read is
    unchanged. A write in ``database`` that includes it commits only if it
    holds, so a decision made on a cached read (the consent gate's) is as good
    as one made on a read at that write. A write elsewhere cannot check it and
    reads again instead.
    """

    database: object
    sql: str
    params: tuple[Any, ...]


class RecordPlace(Protocol):
    """Where one workspace's records live: line stores (logs) and documents, by name.

    Names are relative paths inside the place (``consent.jsonl``,
    ``tombstones/<id>.json``); the file place keeps each as that file under
    the governance folder, byte for byte. The record codec (``_records``:
    versions, sealing, the chain) stores and reads bytes only, so a sealed
    line stays sealed in every place.

    What an implementation promises: an append or a write is durable when it
    returns; :meth:`replace_lines` and :meth:`write_document` leave the old
    bytes or the new ones; a reader never sees a partial line; and a log's
    change is seen by the next :meth:`read_lines` in every process.
    """

    def describe(self, name: str) -> str:
        """How messages name one log or document (the file place: its path)."""
        ...

    def lock(self, name: str) -> RecordLock:
        """The writers' lock called ``name`` (``consent.lock``), shared by every process."""
        ...

    def names(self, folder: str, suffix: str, *, hidden: bool = False) -> list[str]:
        """The names directly in ``folder`` ("" the top) ending in ``suffix``, without the folder.

        ``hidden``: only those starting with ``.`` (progress logs); otherwise
        only the others (documents). Temporary files are neither.
        """
        ...

    def remove_temps(self, folder: str) -> int:
        """Remove what a crashed writer left in ``folder`` (under its lock); how many."""
        ...

    # -- line stores ---------------------------------------------------------

    def read_lines(self, name: str, mark: Any) -> LineBatch | None:
        """The complete lines stored since ``mark`` (None: from the start); None when unchanged.

        Called by the consent gate before every write, so an unchanged log
        costs one cheap check (the file place: one ``stat``).
        """
        ...

    def unchanged(self, name: str, mark: Any) -> WriteGuard | None:
        """A guard true while the log is as :meth:`read_lines` left it at ``mark``.

        None when the place cannot express one (the file place): a decision
        on the log then reads it again before each write.
        """
        ...

    def stored_lines(self, name: str, *, under: Any = None) -> list[bytes] | None:
        """Every complete line as stored now; None when the log is absent."""
        ...

    def append_lines(
        self,
        name: str,
        make: Callable[[Callable[[], Iterator[bytes]]], Sequence[bytes]],
        *,
        under: Any = None,
    ) -> None:
        """Append the lines ``make`` returns, durably; the log is created when absent.

        ``make`` is called once the log is writable and gets a function
        iterating the stored complete lines last first, to continue a chain
        (call it under the writers' lock). A torn line a crashed writer left
        is cut first. On failure nothing was appended.
        """
        ...

    def replace_lines(self, name: str, lines: Sequence[bytes], *, under: Any = None) -> bool:
        """Replace every line of a log atomically; whether the stored bytes changed.

        Call it under the writers' lock, after :meth:`stored_lines`; an absent
        log is created.
        """
        ...

    def create_lines(self, name: str) -> None:
        """Create the log empty, durably, unless it exists."""
        ...

    def delete_lines(self, name: str) -> None:
        """Remove the log durably (nothing when it is absent)."""
        ...

    # -- documents -----------------------------------------------------------

    def read_document(self, name: str, mark: Any, *, under: Any = None) -> tuple[Any, bytes | None]:
        """(its mark, its bytes) of one document; (None, None) when absent.

        When the mark equals ``mark`` the document is unchanged and the bytes
        may be None (not read): the caller keeps what it parsed.
        """
        ...

    def write_document(self, name: str, data: bytes, *, under: Any = None) -> None:
        """Replace (or create) a document atomically and durably."""
        ...

    def delete_document(self, name: str) -> bool:
        """Remove a document durably; whether there was one."""
        ...


class AuditRecord(Protocol):
    """One entry of the audit chain as the storage returns it (the file backend: ``AuditEntry``)."""

    @property
    def seq(self) -> int:
        """Position in the chain, from 1, gap-free except where a discontinuity is recorded."""
        ...

    @property
    def hash(self) -> str:
        """SHA-256 of the entry's canonical bytes; the next entry's ``prev``."""
        ...

    @property
    def prev(self) -> str:
        """The hash of the entry before (the genesis value for the first)."""
        ...

    @property
    def event(self) -> str:
        """The event name (``persist``, ``audit.segment``, ...)."""
        ...

    @property
    def attrs(self) -> Mapping[str, Any]:
        """The entry's attributes, as given to :meth:`AuditStorage.append`."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The entry as a JSON object (every field, in the stored form)."""
        ...


class AuditHeadView(Protocol):
    """What the storage last recorded as the newest entry (the file backend: ``audit.head``)."""

    @property
    def seq(self) -> int: ...

    @property
    def hash(self) -> str: ...

    @property
    def segment(self) -> str:
        """The id of the segment holding that entry."""
        ...


class AuditStorage(Protocol):
    """The hash-chained audit log: append, read in order, the head, segments by id.

    Entries are sealed (hashed, MACed, chained) by the storage, since the
    chain's next ``seq`` and ``prev`` are only known under its lock. Segments
    are named by ids the storage chooses (the file backend: ``audit-2026-11.jsonl``)
    and ordered by the ``seq`` of their first entry.

    What an implementation promises:

    * Durable: an entry is durable when :meth:`append` returns; on failure it
      raises ``AuditWriteError`` and the operation is not reported as done.
    * Serialised: appends from every thread and process on the log are
      totally ordered; ``seq`` increases by one per entry and each ``prev`` is
      the hash of the entry before.
    * Evident: nothing is removed silently. A crash's torn entry or a lost end
      of the log is recorded in the chain (``audit.repair``,
      ``audit.discontinuity``) by the next append or :meth:`repair`; whole
      segments go only through :meth:`purge_segments`, which records the
      removal first.
    """

    def append(
        self, event: str, attrs: Mapping[str, Any], *, at: _dt.datetime | None = None
    ) -> AuditRecord:
        """Seal and append one entry; it is durable when this returns. Returns the entry."""
        ...

    def entries(self) -> Iterator[AuditRecord]:
        """Every readable entry, oldest first (unverified)."""
        ...

    def tail(self, n: int) -> Sequence[AuditRecord]:
        """The newest ``n`` readable entries, oldest first."""
        ...

    def head(self) -> AuditHeadView | None:
        """The head as recorded; None when the log is empty."""
        ...

    def segment_ids(self) -> list[str]:
        """The ids of the log's segments, oldest first."""
        ...

    def segment_entries(self, segment_id: str) -> Sequence[AuditRecord]:
        """The readable entries of one segment, in order; ``NotFoundError`` for an unknown id."""
        ...

    def expired_segments(
        self,
        *,
        now: _dt.datetime,
        max_age: _dt.timedelta | None,
        min_age: _dt.timedelta = ...,
    ) -> list[str]:
        """The oldest segments whose newest entry is older than ``max_age`` (never the newest)."""
        ...

    def purge_segments(self, names: Iterable[str]) -> list[str]:
        """Remove the oldest segments, recording the removal in the chain first; their ids."""
        ...

    def repair(self) -> Sequence[AuditRecord]:
        """Record what a crash left (torn entry, lost head) now; the entries written."""
        ...

    def close(self) -> None:
        """Release what the storage holds open; using it again reopens."""
        ...


class WrappedKeyStorage(Protocol):
    """What the keyring persists: wrapped data keys by ref, its metadata, a change counter.

    Only wrapped bytes pass through it, never key material: entries and the
    metadata document are the keyring's serialised JSON, their keys already
    wrapped by the master key. A ref is the keyring's pseudonymous key id
    (an HMAC, never a subject id).

    What an implementation promises:

    * Atomic and durable: :meth:`write_entry` and :meth:`create_entry` leave
      the previous bytes or the new ones, complete, never a mix.
    * Exclusive creation: of two processes creating the same entry (or the
      metadata) at once, exactly one wins; the other gets False and reads the
      winner's bytes.
    * Locked: :meth:`locked` is an exclusive lock (re-entrant in one thread)
      across every process using the same storage; the keyring holds it around
      read-modify-write of an entry.
    * Ordered: :meth:`bump_counter` happens after the write it announces, and
      a process that sees the new :meth:`counter` value sees that write.
    """

    def read_meta(self) -> bytes | None:
        """The metadata document (workspace id, wrapped index key); None when there is none."""
        ...

    def create_meta(self, data: bytes) -> bool:
        """Create the metadata document if there is none; whether this call created it."""
        ...

    def write_meta(self, data: bytes) -> None:
        """Replace the metadata document atomically (re-wrapping; hold :meth:`locked`)."""
        ...

    def read_entry(self, ref: bytes) -> bytes | None:
        """The stored entry of ``ref``; None when there is none."""
        ...

    def create_entry(self, ref: bytes, data: bytes) -> bool:
        """Create the entry of ``ref`` if there is none; whether this call created it."""
        ...

    def write_entry(self, ref: bytes, data: bytes) -> None:
        """Replace (or create) the entry of ``ref`` atomically (hold :meth:`locked`)."""
        ...

    def list_refs(self) -> list[bytes]:
        """The refs of every stored entry, sorted by their hex form."""
        ...

    def counter(self) -> int:
        """The change counter: cheap to read, changes whenever an entry did."""
        ...

    def bump_counter(self) -> None:
        """Advance the change counter (hold :meth:`locked`)."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """Hold the storage's exclusive inter-process lock."""
        ...


class Leadership(Protocol):
    """A single-holder lock, tried without waiting: the scheduler's leader, the purge's lock.

    What an implementation promises:

    * Exclusive: at most one holder at a time, across threads, processes and
      (for a database backend) hosts; two instances in one process exclude
      each other too.
    * Non-blocking: :meth:`try_acquire` returns at once.
    * Released on death: a holder that dies (even by kill -9) loses the lock
      without help, so a waiting candidate takes over.
    """

    def try_acquire(self) -> bool:
        """Take the lock if free; whether this instance holds it now (True when it already did)."""
        ...

    def release(self) -> None:
        """Give the lock up (nothing when not held)."""
        ...

    @property
    def held(self) -> bool:
        """Whether this instance holds the lock."""
        ...


class PurgeJournal(Protocol):
    """A purge's plan, written down before anything is deleted, with its progress.

    The plan is a header object, a sequence of entries (JSON arrays, entry
    ``n`` first) and a footer object with the totals; progress is one outcome
    byte per entry done, in entry order.

    What an implementation promises:

    * Atomic: :meth:`write_plan` makes the plan exist complete or not at all.
    * Durable: the plan is durable when :meth:`write_plan` returns; recorded
      outcomes are a prefix of the entries (a crash may lose the newest).
    * Single writer: the caller holds the purge's :class:`Leadership` lock.
    """

    def write_plan(
        self,
        header: Mapping[str, Any],
        entries: Iterable[Sequence[Any]],
        footer: Callable[[], Mapping[str, Any]],
    ) -> bool:
        """Write header, entries, then ``footer()`` (called once entries are consumed), atomically.

        Writes nothing when there is no entry; returns whether a plan was written.
        """
        ...

    def pending(self) -> bool:
        """Whether a plan is stored."""
        ...

    def read_header(self) -> dict[str, Any]:
        """The stored plan's header; ``JournalError`` when damaged, ``FileNotFoundError`` when none."""
        ...

    def read_footer(self) -> dict[str, Any]:
        """The stored plan's footer; the errors of :meth:`read_header`."""
        ...

    def read_entries(self) -> Iterator[list[Any]]:
        """The stored plan's entries, in order (streamed)."""
        ...

    def record(self, outcomes: bytes) -> None:
        """Append outcome bytes for the next entries."""
        ...

    def outcomes(self) -> bytes:
        """Every outcome recorded so far, in entry order."""
        ...

    def remove(self) -> None:
        """Forget the plan and its progress (plan first: progress alone means nothing)."""
        ...


# -- the deployment's storage: one opener for every persistent part ---------


class DeploymentStorage(Protocol):
    """Where one deployment keeps everything: the opener of every other protocol of this module.

    A Governance owns one; every persistent part of the package (stores,
    registries, keyring, audit log, purge journal, leadership) is opened
    through it, so that a deployment configured for a database never reads or
    writes the local workspace's memory or records. The file backend
    (``governed_memory._governance.FileStorage``) lays files out as the
    reference does; a database backend opens its own implementations.

    Opening a part connects or writes nothing: the part does, on first use.
    """

    kind: str
    """``"files"`` or ``"postgres"``: what ``db status`` and ``policy show`` print."""

    @property
    def where(self) -> str:
        """A description of the place for status output (a folder, ``host:port/db``), never a password."""
        ...

    @property
    def files(self) -> Path | None:
        """The folder a file backend keeps everything in (the workspace's layout); None for a database.

        The operations that walk files as files (the retention scan, the link
        scan, the encrypt/decrypt-workspace migration) run on it.
        """
        ...

    def agent_store(
        self,
        memory_path: Path,
        header: Callable[[], str],
        *,
        encrypted: bool,
        keyring: Callable[[], Any],
        clock: Any,
        durable: bool,
        syncer: Any,
    ) -> AgentStore:
        """The store of the agent named by ``memory_path`` (``.../agents/<name>/MEMORY.md``).

        ``encrypted``: sealed with ``keyring()`` (called only then); ``durable``:
        each append is durable when it returns (``durability.sync = "commit"``),
        ``syncer`` sharing a file backend's ``fdatasync``.
        """
        ...

    def memory_backend(self, store_factory: StoreFactory) -> MemoryBackend:
        """Every agent of the deployment, each opened with ``store_factory``."""
        ...

    def records(self) -> Path | RecordPlace:
        """What the registries (consent, holds, tombstones, requests, receipts) take as their ``folder``.

        The file backend's governance folder; a database backend's record place.
        """
        ...

    def key_storage(self) -> Path | WrappedKeyStorage:
        """Where the keyring keeps its wrapped keys (never a master key): a file backend's folder, or a storage."""
        ...

    def audit_storage(
        self,
        log_dir: str | None,
        key: Any,
        *,
        previous_keys: Iterable[Any],
        clock: Any,
        syncer: Any = None,
    ) -> AuditStorage:
        """The deployment's one audit chain, its entries keyed with ``key``.

        ``log_dir`` is the policy's ``audit.log_dir`` (a file backend's folder,
        relative to its workspace; a database ignores it).
        """
        ...

    def leadership(self, name: str) -> Leadership:
        """The single-holder lock ``name`` (``"scheduler"``, ``"purge"``) across the deployment."""
        ...

    def purge_journal(self, name: str) -> Path | PurgeJournal:
        """Where the purge journal of ``name`` (``"purge"``) is kept: a file backend's folder, or a journal."""
        ...

    def close(self) -> None:
        """Release what the storage holds open (connections); the parts it opened stop working."""
        ...
