"""The interface every agent store implements, as the file backend names it.

The protocol itself is the storage seam's (``governed_memory._protocols``):
agents and archives are named by id, never by path. ``StoreFactory`` is how
a Conversation, given the reference's ``memory_md_path``, gets its store.
"""

from __future__ import annotations

from typing import Protocol

from .._protocols import AgentStore, StoreFactory

__all__ = ["AgentStore", "BlockAppender", "StoreFactory"]


class BlockAppender(Protocol):
    """A store whose ``accepts_utf8_blocks`` is true: it also takes a block as UTF-8 bytes."""

    def append_utf8(self, data: bytes) -> None:
        """:meth:`AgentStore.append` for one block without subject metadata, as bytes."""
        ...
