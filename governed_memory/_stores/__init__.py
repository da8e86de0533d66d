"""Agent-folder stores: where a Conversation's memory is kept.

``AgentStore`` is the boundary between the Conversation (which speaks the
MEMORY.md text format) and the disk. The plaintext store writes the text as the
reference does; other stores (encrypted) keep the same text in another form.

For the CLI (a documented internal name): ``StoreFactory``, the type of the
lazy store factory the CLI passes to ``list_agents`` and ``agent_records``.

The id-based protocols themselves are the storage seam's
(``governed_memory._protocols``, docs/storage.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes
from ._base import AgentStore, StoreFactory
from ._files import (
    LINEAGE_INDEX,
    SUBJECTS_DIR,
    AgentFolderStore,
    FolderSync,
    is_partition_name,
    plain_partition_name,
)
from ._plaintext import PlaintextAgentStore, archive_names

__all__ = [
    "ENCRYPTED_MEMORY",
    "ENCRYPTED_SUFFIX",
    "LINEAGE_INDEX",
    "SUBJECTS_DIR",
    "AgentFolderStore",
    "AgentStore",
    "BlockAppender",
    "EncryptedAgentStore",
    "FileMemoryBackend",
    "FolderSync",
    "PlaintextAgentStore",
    "StoreFactory",
    "archive_names",
    "encrypted_store_factory",
    "is_partition_name",
    "isolate_subjects",
    "plain_partition_name",
]

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._backend import FileMemoryBackend
    from ._base import BlockAppender
    from ._encrypted import (
        ENCRYPTED_MEMORY,
        ENCRYPTED_SUFFIX,
        EncryptedAgentStore,
        encrypted_store_factory,
    )
    from ._isolation import isolate_subjects

_LAZY: dict[str, str] = {
    "FileMemoryBackend": "._backend",
    "BlockAppender": "._base",
    "isolate_subjects": "._isolation",
    "ENCRYPTED_MEMORY": "._encrypted",
    "ENCRYPTED_SUFFIX": "._encrypted",
    "EncryptedAgentStore": "._encrypted",
    "encrypted_store_factory": "._encrypted",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
