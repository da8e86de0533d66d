"""The interface every agent-folder store implements."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

__all__ = ["UTF8_STORES", "AgentStore", "BlockAppender", "StoreFactory"]


class AgentStore(Protocol):
    """Durable memory of one agent folder, in MEMORY.md text form.

    Implementations keep the text exactly: what :meth:`append` and
    :meth:`compact` were given is what :meth:`read_memory` and
    :meth:`read_archive` return, whatever the bytes on disk look like. Every
    method is safe across threads and processes (an inter-process lock per
    agent folder), and a crash at any point leaves the previous state or the
    new one, never a mix.
    """

    @property
    def folder(self) -> Path:
        """The agent folder."""
        ...

    @property
    def memory_path(self) -> Path:
        """The file that holds the active memory."""
        ...

    def ensure(self) -> None:
        """Create the folder and a memory file with a fresh header if missing."""
        ...

    def read_memory(self) -> str | None:
        """The active memory's text, or None when there is no memory file."""
        ...

    def append(self, block: str) -> None:
        """Append one message block to the active memory."""
        ...

    def compact(self, first_block: str | None) -> Path | None:
        """Archive the active memory, then replace it with a fresh header + ``first_block``.

        The archive is complete and durable before the memory is replaced,
        and is skipped when the memory holds no message block. Returns the
        archive path, or None when none was written. On failure nothing has
        changed and the error propagates.
        """
        ...

    def rewrite(self, path: Path, text: str) -> None:
        """Atomically replace the text of :attr:`memory_path` or one archive.

        For erasure: the caller reads a file, drops records and writes the
        rest back, all inside :meth:`lock` (which is re-entrant for the
        store's own methods). Stale temporary files in the file's folder are
        removed first, since they may hold the text being removed. Any other
        path is refused with :class:`StorageError`; on failure the file is
        unchanged.
        """
        ...

    def list_archives(self) -> list[Path]:
        """Archive files, oldest first."""
        ...

    def read_archive(self, path: Path) -> str:
        """The text of one archive."""
        ...

    def lock(self) -> AbstractContextManager[None]:
        """Hold the agent folder's exclusive inter-process lock.

        Re-entrant: the store's own methods called inside it (reads,
        :meth:`rewrite`) keep the lock rather than taking it again.
        """
        ...

    def close(self) -> None:
        """Release file descriptors. The store may be reopened by using it again."""
        ...


StoreFactory = Callable[[Path, Callable[[], str]], AgentStore]
"""Builds a store from (memory file path, header factory)."""


class BlockAppender(Protocol):
    """A store that also takes one default-mode block already encoded as UTF-8."""

    def append_utf8(self, data: bytes) -> None:
        """:meth:`AgentStore.append` for one block without subject metadata, as bytes."""
        ...


UTF8_STORES: set[type[object]] = set()
"""Store classes (exact types) that implement :class:`BlockAppender`; each registers itself.

``Conversation.add`` hands them its default-mode block as bytes; a set, not
imports, so the default mode never loads the encrypted store's dependencies.
"""
