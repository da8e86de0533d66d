"""Agent-folder stores: where a Conversation's memory is kept.

``AgentStore`` is the boundary between the Conversation (which speaks the
MEMORY.md text format) and the disk. The plaintext store writes the text as the
reference does; other stores (encrypted) keep the same text in another form.
"""

from __future__ import annotations

from ._base import AgentStore, StoreFactory
from ._plaintext import PlaintextAgentStore, archive_names

__all__ = ["AgentStore", "PlaintextAgentStore", "StoreFactory", "archive_names"]
