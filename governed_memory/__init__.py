"""governed_memory: persistent agent memory with consent, encryption, retention and audit.

The public names are re-exported here; everything else is internal.
"""

from __future__ import annotations

from ._clock import Clock, FixedClock, SystemClock
from ._conversation import Conversation
from ._errors import (
    ConfigurationError,
    EmptySummaryError,
    FormatVersionError,
    GovernedMemoryError,
    InvalidAgentNameError,
    NotFoundError,
    StorageError,
)
from ._format import MemoryFile, Record, parse_memory
from ._stores import AgentStore, PlaintextAgentStore
from ._workspace import memory_md_path, resolve_workspace

__all__ = [
    "AgentStore",
    "Clock",
    "ConfigurationError",
    "Conversation",
    "EmptySummaryError",
    "FixedClock",
    "FormatVersionError",
    "GovernedMemoryError",
    "InvalidAgentNameError",
    "MemoryFile",
    "NotFoundError",
    "PlaintextAgentStore",
    "Record",
    "StorageError",
    "SystemClock",
    "memory_md_path",
    "parse_memory",
    "resolve_workspace",
]

__version__ = "0.1.0"
