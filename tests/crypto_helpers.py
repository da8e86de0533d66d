"""Helpers for the encryption tests: keyring builders (the seeded random source is governed_memory.testing.SeededRandom)."""

from __future__ import annotations

from pathlib import Path

from governed_memory import memory_md_path
from governed_memory._crypto._keyring import Keyring
from governed_memory._crypto._providers import KeyProvider, LocalKeyProvider
from governed_memory._stores._encrypted import EncryptedAgentStore

TEST_MASTER_KEY = bytes(range(32))


def make_keyring(folder: Path, provider: KeyProvider | None = None, **kwargs: object) -> Keyring:
    """A keyring in ``folder`` under the fixed test master key unless told otherwise."""
    return Keyring(folder, provider or LocalKeyProvider(TEST_MASTER_KEY), **kwargs)  # type: ignore[arg-type]


def workspace_keyring(workspace: Path) -> Keyring:
    """The keyring where a workspace keeps it (``.governed_memory/keyring``)."""
    return make_keyring(workspace / ".governed_memory" / "keyring")


def encrypted_store(
    workspace: Path, keyring: Keyring, header: str, agent: str = "A"
) -> EncryptedAgentStore:
    """The encrypted store of ``agent`` in ``workspace``; new memories start with ``header``."""
    return EncryptedAgentStore(memory_md_path(agent, workspace), lambda: header, keyring=keyring)
