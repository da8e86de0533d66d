"""Fakes for testing code built on governed_memory (as ``structlog.testing`` or httpx's ``MockTransport``).

Each fake implements one extension point and keeps what it was given, so a
test can assert on it without a workspace, a key service or a collector:

* :class:`FixedClock`: a :class:`~governed_memory.Clock` that moves only when told.
* :class:`InMemoryKeyProvider`: a :class:`~governed_memory.KeyProvider` with
  rotation and destruction, like a KMS (loads ``cryptography`` on first use).
* :class:`RecordingAuditSink`: an :class:`~governed_memory.AuditSink` that keeps
  every call (``records``, ``events()``, ``of(operation)``).
* :class:`InMemoryStores`: a ``store_factory`` whose :class:`InMemoryAgentStore`
  keeps each agent's memory and archives in a dict, never on disk.
* :class:`SeededRandom`: a random source (``random=`` of the key providers,
  keyrings and stores) whose bytes, nonces and ids follow from a seed.

Importing this module loads none of pydantic, cryptography, OpenTelemetry,
APScheduler or litellm; a name that needs one of them loads it on first use.
Nothing in the package imports this module (import-linter checks it): the
fakes are for tests, production code never depends on them.

docs/testing.md shows them in pytest tests.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ._base import ARCHIVE_DIR, Clock, SystemClock, lazy_attributes
from ._errors import StorageError
from ._format import has_records
from ._protocols import StoredInfo
from ._stores import SUBJECTS_DIR, archive_names, plain_partition_name

if TYPE_CHECKING:
    from ._base import FixedClock
    from ._crypto import InMemoryKeyProvider

__all__ = [
    "FixedClock",
    "InMemoryAgentStore",
    "InMemoryKeyProvider",
    "InMemoryStores",
    "RecordingAuditSink",
    "SeededRandom",
]

# Re-exported fakes, imported on first use (PEP 562): InMemoryKeyProvider needs cryptography.
# Absolute names: this is a module, not a package, so "._base" would not resolve from here.
_LAZY: dict[str, str] = {
    "FixedClock": "governed_memory._base",
    "InMemoryKeyProvider": "governed_memory._crypto",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class RecordingAuditSink:
    """An audit sink that keeps every call, in order, for assertions.

    Pass it as ``Governance(audit=...)`` (or as a keyring's ``observer``, the
    same interface). Each call becomes one flat dict in :attr:`records`:
    ``operation``, ``agent``, ``subject_id``, ``outcome`` and the attributes
    (``policy_id``, ``error``, ...), as structlog's ``LogCapture`` keeps
    event dicts. Safe to share between threads.

    Attributes:
        records: every call so far, oldest first.
    """

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._mutex = threading.Lock()

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        """Keep one finished operation (the :class:`~governed_memory.AuditSink` method)."""
        entry = {
            "operation": operation,
            "agent": agent,
            "subject_id": subject_id,
            "outcome": outcome,
            **attrs,
        }
        with self._mutex:
            self.records.append(entry)

    def events(self) -> list[tuple[str, str]]:
        """``(operation, outcome)`` of every call, oldest first."""
        return [(r["operation"], r["outcome"]) for r in self.records]

    def of(self, operation: str) -> list[dict[str, Any]]:
        """The calls for one operation (``"persist"``, ``"purge"``, ...), oldest first."""
        return [r for r in self.records if r["operation"] == operation]

    def outcomes(self, operation: str) -> list[str]:
        """The outcomes of one operation's calls, oldest first (``["ok", "denied"]``)."""
        return [r["outcome"] for r in self.of(operation)]

    def clear(self) -> None:
        """Forget every call recorded so far."""
        with self._mutex:
            self.records.clear()


class _Folder:
    """One agent's memory and archives, shared by every store opened on it."""

    def __init__(self) -> None:
        self.memory: str | None = None
        self.archives: dict[str, str] = {}  # archive id -> text
        self.changed: dict[str | None, float] = {}  # memory (None) or archive id -> time
        self.lock = threading.RLock()
        self.partitions: dict[str, _Folder] = {}  # subject folder name -> its memory


class InMemoryAgentStore:
    """An :class:`~governed_memory.AgentStore` that keeps the text in process memory.

    Text-exact like the file stores: what :meth:`append` and :meth:`compact`
    were given is what :meth:`read_memory` and :meth:`read_archive` return.
    Archive ids are the plaintext store's (``history_<ts>``) and
    :meth:`source` names what the plaintext store would, but nothing is read
    from or written to disk. The lock is a re-entrant thread lock, so it
    orders threads of one process only; there are no torn writes to repair.
    Build stores through :class:`InMemoryStores`, so that stores opened on
    one agent share their text (as two stores on one folder do).
    """

    accepts_utf8_blocks: ClassVar[bool] = False

    def __init__(
        self,
        memory_path: Path,
        header: Callable[[], str],
        *,
        clock: Clock | None = None,
        folder: _Folder | None = None,
        partition: str | None = None,
    ) -> None:
        self._memory_path = Path(memory_path)
        self._header = header
        self._clock: Clock = clock or SystemClock()
        self._state = folder or _Folder()
        self._partition = partition

    @property
    def agent(self) -> str:
        if self._partition is not None:
            return self._memory_path.parent.parent.parent.name
        return self._memory_path.parent.name

    @property
    def partition(self) -> str | None:
        return self._partition

    def subject_store(self, subject_id: str) -> InMemoryAgentStore:
        if self._partition is not None:
            raise StorageError(
                f"subject_store({subject_id!r}) called on a subject's memory of agent "
                f"{self.agent!r}; ask the agent's own store"
            )
        if not isinstance(subject_id, str) or not subject_id:
            raise StorageError(f"subject id {subject_id!r} must be a non-empty string")
        name = plain_partition_name(subject_id)
        with self._state.lock:
            folder = self._state.partitions.setdefault(name, _Folder())
        return self._open_partition(name, folder)

    def _open_partition(self, name: str, folder: _Folder) -> InMemoryAgentStore:
        path = self._memory_path.parent / SUBJECTS_DIR / name / self._memory_path.name
        return InMemoryAgentStore(
            path, self._header, clock=self._clock, folder=folder, partition=name
        )

    def subject_stores(self) -> list[InMemoryAgentStore]:
        if self._partition is not None:
            return []
        with self._state.lock:
            found = sorted(
                (name, folder)
                for name, folder in self._state.partitions.items()
                if folder.memory is not None or folder.archives
            )
        return [self._open_partition(name, folder) for name, folder in found]

    def _touch(self, item: str | None) -> None:
        self._state.changed[item] = time.time()

    def ensure(self) -> None:
        with self._state.lock:
            if self._state.memory is None:
                self._state.memory = self._header()
                self._touch(None)

    def read_memory(self) -> str | None:
        with self._state.lock:
            return self._state.memory

    def append(self, block: str) -> None:
        with self._state.lock:
            self._state.memory = (self._state.memory or self._header()) + block
            self._touch(None)

    def compact(self, first_block: str | None) -> str | None:
        with self._state.lock:
            archive = None
            current = self._state.memory
            if current is not None and has_records(current):
                archive = self._new_archive()
                self._state.archives[archive] = current
                self._touch(archive)
            self._state.memory = self._header() + (first_block or "")
            self._touch(None)
            return archive

    def _new_archive(self) -> str:
        """The id of the next archive (lock held): the plaintext store's, never reused."""
        for name in archive_names(self._clock.now()):
            candidate = name.removesuffix(".md")
            if candidate not in self._state.archives:
                return candidate
        raise StorageError(f"no free archive id left for agent {self.agent!r} in this second")

    def list_archives(self) -> list[str]:
        with self._state.lock:
            return sorted(self._state.archives)

    def read_archive(self, archive_id: str) -> str:
        with self._state.lock:
            try:
                return self._state.archives[archive_id]
            except KeyError:
                raise StorageError(
                    f"cannot read archive {archive_id!r} of agent {self.agent!r}: this store "
                    "holds no such archive; use one of list_archives()"
                ) from None

    def rewrite_memory(self, text: str) -> None:
        with self._state.lock:
            if self._state.memory is None:
                raise StorageError(
                    f"rewrite of agent {self.agent!r}'s memory refused: the memory does not exist"
                )
            self._state.memory = text
            self._touch(None)

    def rewrite_archive(self, archive_id: str, text: str) -> None:
        with self._state.lock:
            if archive_id not in self._state.archives:
                raise StorageError(
                    f"rewrite of archive {archive_id!r} refused: agent {self.agent!r} has no "
                    "such archive; use one of list_archives()"
                )
            self._state.archives[archive_id] = text
            self._touch(archive_id)

    def stat(self, archive_id: str | None = None) -> StoredInfo | None:
        with self._state.lock:
            text = (
                self._state.memory if archive_id is None else self._state.archives.get(archive_id)
            )
            if text is None:
                return None
            return StoredInfo(len(text.encode("utf-8")), self._state.changed.get(archive_id, 0.0))

    def source(self, archive_id: str | None = None) -> str:
        within = "" if self._partition is None else f"{SUBJECTS_DIR}/{self._partition}/"
        if archive_id is None:
            return within + self._memory_path.name
        return f"{within}{ARCHIVE_DIR}/{archive_id}.md"

    def remove_temps(self) -> int:
        """Nothing to remove: an in-memory change is never left half-made."""
        return 0

    def delete(self) -> None:
        with self._state.lock:
            self._state.memory = None
            self._state.archives.clear()
            self._state.changed.clear()
            for partition in self._state.partitions.values():
                with partition.lock:
                    partition.memory = None
                    partition.archives.clear()
                    partition.changed.clear()

    @contextmanager
    def lock(self) -> Iterator[None]:
        with self._state.lock:
            yield

    def close(self) -> None:
        return None


class InMemoryStores:
    """A ``store_factory`` keeping every agent's memory in process memory.

    Pass it as ``Conversation(store_factory=...)``. Stores opened on one
    memory path share their text, so a second Conversation on the path
    preloads what the first one wrote. Functions that look for agents in the
    workspace folder (``list_agents``, ``agent_records``) do not see them.

    Args:
        clock: names the archives (default: the system clock).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._folders: dict[Path, _Folder] = {}
        self._mutex = threading.Lock()

    def __call__(self, memory_path: Path, header: Callable[[], str]) -> InMemoryAgentStore:
        path = Path(memory_path)
        with self._mutex:
            folder = self._folders.setdefault(path.parent, _Folder())
        return InMemoryAgentStore(path, header, clock=self._clock, folder=folder)

    def memory(self, memory_path: Path) -> str | None:
        """The memory text kept for ``memory_path`` (None when nothing was written)."""
        folder = self._folders.get(Path(memory_path).parent)
        return folder.memory if folder is not None else None

    def archives(self, memory_path: Path) -> list[str]:
        """The archive texts kept for ``memory_path``'s agent, oldest first."""
        folder = self._folders.get(Path(memory_path).parent)
        if folder is None:
            return []
        with folder.lock:
            return [folder.archives[a] for a in sorted(folder.archives)]


class SeededRandom:
    """A random source whose bytes follow from a seed (SHA-256 in counter mode).

    Callable as ``random(n) -> bytes``, the ``random=`` argument of the key
    providers, keyrings, sealing and the encrypted store, so nonces, data keys
    and the files they produce are the same on every run (known-answer
    tests). Not random: never use it outside tests.

    Args:
        seed: the same seed gives the same bytes, in the same order.
    """

    def __init__(self, seed: bytes = b"governed-memory tests") -> None:
        self._seed = seed
        self._counter = 0
        self._buffer = b""
        self._mutex = threading.Lock()

    def __call__(self, n: int) -> bytes:
        with self._mutex:
            while len(self._buffer) < n:
                block = hashlib.sha256(self._seed + self._counter.to_bytes(8, "big")).digest()
                self._buffer += block
                self._counter += 1
            out, self._buffer = self._buffer[:n], self._buffer[n:]
            return out

    def hex(self, nbytes: int = 4) -> str:
        """``nbytes`` bytes as hex digits, like ``secrets.token_hex``."""
        return self(nbytes).hex()

    def ids(self, prefix: str, nbytes: int = 4) -> Callable[[], str]:
        """An id factory: ``prefix`` + ``nbytes`` hex bytes per call.

        ``HoldRegistry(..., id_factory=SeededRandom(b"holds").ids("hold-"))``
        gives the registry's own id shape (``hold-<8 hex digits>``), pinned.
        """
        return lambda: prefix + self.hex(nbytes)


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from ._protocols import AgentStore

    _conforms: type[AgentStore] = InMemoryAgentStore
