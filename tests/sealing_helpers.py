"""Helpers for tests of the governance registries in both forms: plaintext and sealed."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crypto_helpers import TEST_MASTER_KEY

from governed_memory._crypto import Keyring, LocalKeyProvider
from governed_memory._crypto._sealing import (
    RecordSealing,
    is_sealed,
    open_record,
    seal_file,
    seal_record,
)
from governed_memory._policy._model import Policy
from governed_memory._policy._settings import Settings

TEST_MASTER_KEY_B64 = base64.b64encode(TEST_MASTER_KEY).decode("ascii")
RECORD_MODES = ("plaintext", "sealed")


def sealing_for(keyring_dir: Path) -> RecordSealing:
    """Sealing on the keyring in ``keyring_dir`` under the fixed test master key."""
    return RecordSealing(Keyring(keyring_dir, LocalKeyProvider(TEST_MASTER_KEY)))


@dataclass(frozen=True)
class RecordMode:
    """One form of the governance registries, with what a test needs to use it.

    ``plaintext``: no encryption, no sealing. ``sealed``: encryption on, the
    test master key, the keyring in ``keyring_dir``.
    """

    name: str
    keyring_dir: Path

    @property
    def sealed(self) -> bool:
        return self.name == "sealed"

    def sealing(self) -> RecordSealing | None:
        """A fresh sealing (a new Keyring object, as another process would have)."""
        return sealing_for(self.keyring_dir) if self.sealed else None

    def policy(self, data: dict[str, Any] | None = None) -> Policy:
        """``data`` as a policy, with encryption on in sealed mode."""
        merged = dict(data or {})
        if self.sealed:
            merged["encryption"] = {"enabled": True}
        return Policy.model_validate(merged)

    def settings(self, **kwargs: Any) -> Settings:
        """Settings carrying the master key and keyring folder in sealed mode."""
        if self.sealed:
            kwargs.setdefault("master_key", TEST_MASTER_KEY_B64)
            kwargs.setdefault("keyring_dir", self.keyring_dir)
        return Settings(**kwargs)

    def env(self) -> dict[str, str]:
        """Environment variables giving a CLI process the same key and keyring."""
        if not self.sealed:
            return {}
        return {
            "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
            "GOVERNED_MEMORY_KEYRING_DIR": str(self.keyring_dir),
        }

    def check_form(self, raw: bytes) -> None:
        """Assert that a stored line or file is in this mode's form."""
        assert is_sealed(raw) == self.sealed, raw[:80]

    def write_file(self, path: Path, purpose: str, context: str, plain: bytes) -> None:
        """Write ``plain`` as a whole-file registry of this mode would store it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(seal_file(plain, self.sealing(), purpose, context))

    def line(self, purpose: str, context: str, plain: bytes) -> bytes:
        """``plain`` as a line-per-record registry of this mode stores it (no newline)."""
        return seal_record(plain, self.sealing(), purpose, context)

    def read_lines(self, path: Path, purpose: str, context: str) -> list[bytes]:
        """The plaintext of every complete line of ``path`` (each checked to be in this form)."""
        data = path.read_bytes()
        lines = data[: data.rfind(b"\n") + 1].splitlines()
        for raw in lines:
            self.check_form(raw)
        return [open_record(raw, self.sealing(), purpose, context, path) for raw in lines]
