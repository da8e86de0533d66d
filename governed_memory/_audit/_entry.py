"""One audit log entry: its fields, its canonical bytes, its hash and MAC.

An entry is one line of JSON Lines, the canonical JSON encoding of::

    {"attrs": {...}, "event": "persist", "hash": "<sha256>", "kid": "<key id>",
     "mac": "<hmac>", "prev": "<sha256 of the entry before>", "seq": 42,
     "ts": "2026-11-30T10:00:00.000000Z", "v": 1}

Canonical: keys sorted, no spaces, UTF-8 (not ASCII-escaped), one ``\\n`` at
the end. The *body* is the entry without ``hash`` and ``mac``;
``hash = SHA-256(canonical body)`` and ``mac = HMAC-SHA256(MAC key, canonical
body)``. ``prev`` is the ``hash`` of the entry before (64 zeros for the very
first), so every entry commits to the whole history before it, and the MAC
makes the chain unforgeable without the audit key.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import EntryFormatError
from ._keys import AuditKey

__all__ = [
    "FORMAT_VERSION",
    "GENESIS",
    "AuditEntry",
    "EntryFormatError",
    "canonical",
    "format_ts",
    "parse_entry",
    "seal",
]

FORMAT_VERSION = 1
GENESIS = "0" * 64
"""The ``prev`` of the first entry ever written to a log."""

_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_FIELDS = frozenset({"v", "seq", "ts", "event", "attrs", "kid", "prev", "hash", "mac"})


def canonical(value: Any) -> bytes:
    """The canonical JSON bytes of ``value`` (sorted keys, no spaces, UTF-8)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def format_ts(when: _dt.datetime) -> str:
    """``when`` in UTC with microseconds and a ``Z`` (naive times are local time)."""
    return when.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class AuditEntry:
    """One authenticated record of a governed operation."""

    seq: int
    ts: str
    event: str
    attrs: Mapping[str, Any]
    kid: str
    prev: str
    hash: str
    mac: str
    v: int = FORMAT_VERSION
    line: bytes = field(default=b"", repr=False, compare=False)
    """The raw line as read or written, without the newline."""

    def body(self) -> dict[str, Any]:
        """The fields the hash and MAC cover."""
        return {
            "v": self.v,
            "seq": self.seq,
            "ts": self.ts,
            "event": self.event,
            "attrs": dict(self.attrs),
            "kid": self.kid,
            "prev": self.prev,
        }

    def to_dict(self) -> dict[str, Any]:
        """Every field, as written."""
        return {**self.body(), "hash": self.hash, "mac": self.mac}

    @property
    def time(self) -> _dt.datetime:
        """``ts`` as an aware UTC datetime."""
        return _dt.datetime.strptime(self.ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.UTC)

    def hash_ok(self) -> bool:
        """Whether ``hash`` matches the body (the fields were not changed)."""
        return hashlib.sha256(canonical(self.body())).hexdigest() == self.hash

    def canonical_ok(self) -> bool:
        """Whether the raw line is exactly the canonical encoding (no byte was edited)."""
        return not self.line or self.line == canonical(self.to_dict())

    def mac_ok(self, key: AuditKey) -> bool:
        """Whether ``mac`` authenticates the body under ``key``."""
        return key.verify_mac(canonical(self.body()), self.mac)

    def check(self, key: AuditKey | None) -> tuple[bool, bool]:
        """``(intact, authentic)`` in one pass: hash and bytes match; and the MAC under ``key``."""
        data = canonical(self.body())
        intact = hashlib.sha256(data).hexdigest() == self.hash and self.canonical_ok()
        return intact, intact and key is not None and key.verify_mac(data, self.mac)


def seal(
    *,
    seq: int,
    ts: str,
    event: str,
    attrs: Mapping[str, Any],
    prev: str,
    key: AuditKey,
) -> AuditEntry:
    """Build an entry and compute its hash and MAC."""
    fields = dict(attrs)
    event = str(event)
    body: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "seq": seq,
        "ts": ts,
        "event": event,
        "attrs": fields,
        "kid": key.key_id,
        "prev": prev,
    }
    data = canonical(body)
    digest = hashlib.sha256(data).hexdigest()
    mac = key.mac(data)
    line = canonical({**body, "hash": digest, "mac": mac})
    return AuditEntry(
        seq=seq,
        ts=ts,
        event=event,
        attrs=fields,
        kid=key.key_id,
        prev=prev,
        hash=digest,
        mac=mac,
        line=line,
    )


def parse_entry(line: bytes) -> AuditEntry:
    """Parse one line (without its newline).

    Raises:
        EntryFormatError: naming what is wrong with the line.
    """
    try:
        raw = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise EntryFormatError(f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise EntryFormatError("not a JSON object")
    version = raw.get("v")
    if version != FORMAT_VERSION:
        raise EntryFormatError(
            f"format version {version!r}, this release reads version {FORMAT_VERSION} "
            "(written by a newer governed_memory, or edited)"
        )
    keys = set(raw)
    if keys != _FIELDS:
        missing, extra = sorted(_FIELDS - keys), sorted(keys - _FIELDS)
        raise EntryFormatError(f"fields missing {missing} / unexpected {extra}")
    checks = (
        ("seq", int),
        ("ts", str),
        ("event", str),
        ("attrs", dict),
        ("kid", str),
        ("prev", str),
        ("hash", str),
        ("mac", str),
    )
    for name, kind in checks:
        value = raw[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise EntryFormatError(f"field {name!r} is {type(value).__name__}, not {kind.__name__}")
    if not _TS.match(raw["ts"]):
        raise EntryFormatError(f"ts {raw['ts']!r} is not a UTC timestamp")
    return AuditEntry(
        seq=raw["seq"],
        ts=raw["ts"],
        event=raw["event"],
        attrs=raw["attrs"],
        kid=raw["kid"],
        prev=raw["prev"],
        hash=raw["hash"],
        mac=raw["mac"],
        line=bytes(line),
    )
