"""Keyring entries as stored: the wrapped generations of one agent's or subject's data key."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import FormatVersionError, IntegrityError

__all__ = ["KEYRING_FORMAT", "Entry", "Version", "ident", "load_json"]

KEYRING_FORMAT = 1

Version = tuple[int, int, int, int] | None
"""An entry file's identity on disk (inode, mtime, ctime, size); None: no file."""


@dataclass
class Entry:
    """A keyring entry as stored: the wrapped generations of one data key."""

    kind: str
    ref: bytes
    label: str | None
    current: int
    shredded_through: int = 0
    shredded_at: str | None = None
    keys: dict[int, dict[str, str]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        doc = {
            "format": KEYRING_FORMAT,
            "kind": self.kind,
            "ref": self.ref.hex(),
            "label": self.label,
            "current": self.current,
            "shredded_through": self.shredded_through,
            "shredded_at": self.shredded_at,
            "keys": {str(gen): wrapped for gen, wrapped in sorted(self.keys.items())},
        }
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("ascii")

    @classmethod
    def from_json(cls, data: bytes, path: Path) -> Entry:
        doc = load_json(data, path)
        try:
            return cls(
                kind=str(doc["kind"]),
                ref=bytes.fromhex(doc["ref"]),
                label=doc["label"],
                current=int(doc["current"]),
                shredded_through=int(doc["shredded_through"]),
                shredded_at=doc["shredded_at"],
                keys={int(g): dict(w) for g, w in doc["keys"].items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise IntegrityError(path) from exc

    @property
    def shredded(self) -> bool:
        """Whether the current generation was destroyed (nothing usable is left)."""
        return self.current <= self.shredded_through


def load_json(data: bytes, path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise IntegrityError(path) from exc
    if not isinstance(doc, dict):
        raise IntegrityError(path)
    if doc.get("format") != KEYRING_FORMAT:
        raise FormatVersionError(
            f"keyring file {path} has format {doc.get('format')!r}, this release reads "
            f"{KEYRING_FORMAT}; use the governed_memory release that wrote it"
        )
    return doc


def ident(st: os.stat_result) -> Version:
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
