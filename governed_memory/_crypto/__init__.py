"""Encryption at rest: key providers, the keyring, the frame format and the file codec.

The pieces, bottom up (docs/encryption.md describes them for operators):

* :mod:`._providers`: the master key (``KeyProvider`` protocol, local and
  in-memory providers, ``KeyChain`` for rotations).
* :mod:`._keyring`: per-agent and per-subject data keys, stored wrapped.
* :mod:`._frames`: the on-disk format (pure functions over bytes).
* :mod:`._codec`: one agent's files as MEMORY.md text.

The store built on them is :class:`governed_memory._stores.EncryptedAgentStore`.
"""

from __future__ import annotations

from ._keyring import AGENT, SUBJECT, DataKey, Keyring
from ._observer import CryptoObserver, NullObserver
from ._providers import (
    InMemoryKeyProvider,
    KeyChain,
    KeyProvider,
    LocalKeyProvider,
    RandomSource,
    generate_master_key,
)

__all__ = [
    "AGENT",
    "SUBJECT",
    "CryptoObserver",
    "DataKey",
    "InMemoryKeyProvider",
    "KeyChain",
    "KeyProvider",
    "Keyring",
    "LocalKeyProvider",
    "NullObserver",
    "RandomSource",
    "generate_master_key",
]
