"""Helpers for the encryption tests: a reproducible random source and keyring builders."""

from __future__ import annotations

import hashlib
from pathlib import Path

from governed_memory._crypto._keyring import Keyring
from governed_memory._crypto._providers import KeyProvider, LocalKeyProvider

TEST_MASTER_KEY = bytes(range(32))


class SeededRandom:
    """Deterministic bytes (SHA-256 in counter mode): pins nonces, ids and keys in tests."""

    def __init__(self, seed: bytes = b"governed-memory tests") -> None:
        self._seed = seed
        self._counter = 0
        self._buffer = b""

    def __call__(self, n: int) -> bytes:
        while len(self._buffer) < n:
            block = hashlib.sha256(self._seed + self._counter.to_bytes(8, "big")).digest()
            self._buffer += block
            self._counter += 1
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


def make_keyring(folder: Path, provider: KeyProvider | None = None, **kwargs: object) -> Keyring:
    """A keyring in ``folder`` under the fixed test master key unless told otherwise."""
    return Keyring(folder, provider or LocalKeyProvider(TEST_MASTER_KEY), **kwargs)  # type: ignore[arg-type]
