"""Helpers for the encryption tests: keyring builders (the seeded random source is governed_memory.testing.SeededRandom)."""

from __future__ import annotations

from pathlib import Path

from governed_memory._crypto._keyring import Keyring
from governed_memory._crypto._providers import KeyProvider, LocalKeyProvider

TEST_MASTER_KEY = bytes(range(32))


def make_keyring(folder: Path, provider: KeyProvider | None = None, **kwargs: object) -> Keyring:
    """A keyring in ``folder`` under the fixed test master key unless told otherwise."""
    return Keyring(folder, provider or LocalKeyProvider(TEST_MASTER_KEY), **kwargs)  # type: ignore[arg-type]
