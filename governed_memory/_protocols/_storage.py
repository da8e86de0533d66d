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

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

__all__ = [
    "AgentStore",
    "MemoryBackend",
    "RecordDocument",
    "RecordLog",
    "StoreFactory",
    "StoredInfo",
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
