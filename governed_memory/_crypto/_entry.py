"""Keyring entries as stored: the wrapped generations of one agent's or subject's data key.

Each entry carries a ``tag``: an HMAC-SHA256, under a key derived from the
keyring's index key (so wrapped by the master key), of everything else in
it (kind, ref, label, current generation, shredded state, the wrapped
keys). An entry edited or replaced outside governed_memory (turned into a
shredded one, say) fails its tag and is refused with an
:class:`IntegrityError` naming it (:func:`tampered`); entries written
before tags existed are read untagged until the keyring is migrated (see
``Keyring.authenticate_entries``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import FormatVersionError, IntegrityError

__all__ = ["KEYRING_FORMAT", "Entry", "Version", "ident", "load_json", "tampered"]

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
    tag: str | None = field(default=None, compare=False)
    """The tag read from disk (None: an entry written before tags); never written from here."""

    def _doc(self) -> dict[str, Any]:
        return {
            "format": KEYRING_FORMAT,
            "kind": self.kind,
            "ref": self.ref.hex(),
            "label": self.label,
            "current": self.current,
            "shredded_through": self.shredded_through,
            "shredded_at": self.shredded_at,
            "keys": {str(gen): dict(wrapped) for gen, wrapped in sorted(self.keys.items())},
        }

    def expected_tag(self, tag_key: bytes) -> str:
        """The tag of this entry's fields under ``tag_key`` (over a canonical form of them)."""
        body = json.dumps(self._doc(), sort_keys=True, separators=(",", ":")).encode("utf-8")
        message = b"governed-memory keyring entry v1\x00" + body
        return hmac.new(tag_key, message, hashlib.sha256).hexdigest()

    def to_json(self, tag_key: bytes | None = None) -> bytes:
        """The entry file (tagged under ``tag_key`` when given)."""
        doc = self._doc()
        if tag_key is not None:
            doc["tag"] = self.expected_tag(tag_key)
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
                tag=doc["tag"] if isinstance(doc.get("tag"), str) else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise IntegrityError(path) from exc

    def check(self, path: Path, ref: bytes, tag_key: bytes | None, *, required: bool) -> Entry:
        """This entry if it is the one of ``ref`` and its tag holds (``tag_key`` None: no check).

        Raises:
            IntegrityError: it names another key, its tag fails, or it has none
                where the keyring requires one (``required``).
        """
        if self.ref != ref:
            raise tampered(path, "it names another key than its file name")
        if tag_key is None:
            return self
        if self.tag is None:
            if required:
                raise tampered(path, "it has no authentication tag, which every entry here has")
            return self
        if not hmac.compare_digest(self.tag, self.expected_tag(tag_key)):
            raise tampered(path, "its authentication tag does not match its contents")
        return self

    @property
    def shredded(self) -> bool:
        """Whether the current generation was destroyed (nothing usable is left)."""
        return self.current <= self.shredded_through


def load_json(
    data: bytes, path: Path, formats: tuple[int, ...] = (KEYRING_FORMAT,)
) -> dict[str, Any]:
    """The JSON object of a keyring file of one of ``formats``."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise IntegrityError(path) from exc
    if not isinstance(doc, dict):
        raise IntegrityError(path)
    found = doc.get("format")
    if type(found) is not int or found not in formats:
        reads = " and ".join(str(f) for f in formats)
        raise FormatVersionError(
            f"keyring file {path} has format {found!r}, this release reads {reads}; use the "
            "governed_memory release that wrote it"
        )
    return doc


def tampered(path: Path, why: str) -> IntegrityError:
    """The error for an entry changed outside governed_memory (names the file, why, the fix)."""
    error = IntegrityError(path)
    error.args = (
        f"keyring entry {path} was changed outside governed_memory: {why}. It is not used and "
        "nothing is written over it, so the memory under this key can neither be read nor "
        "written. Restore the keyring folder (at least this file) from a backup, and check "
        "who could write to it",
    )
    return error


def ident(st: os.stat_result) -> Version:
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
