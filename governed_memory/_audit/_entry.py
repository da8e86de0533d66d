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

:func:`seal` serializes an entry once: the body and the line share every
part but ``hash`` and ``mac``, which sort between them (``attrs``,
``event``, | ``hash``, | ``kid``, | ``mac``, | ``prev``, ``seq``, ``ts``,
``v``), so the line is the body's parts with the two spliced in. The bytes
are exactly :func:`canonical`'s (tests compare the two).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from json.encoder import (  # type: ignore[attr-defined]  # the C accelerator's names
    c_encode_basestring,
    c_make_encoder,
    encode_basestring,
)
from typing import Any

from .._base import Clock, SystemClock
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
    "seal_head",
    "utc_now",
]

FORMAT_VERSION = 1
GENESIS = "0" * 64
"""The ``prev`` of the first entry ever written to a log."""

_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_FIELDS = frozenset({"v", "seq", "ts", "event", "attrs", "kid", "prev", "hash", "mac"})


# What json.dumps(value, sort_keys=True, ...) builds on every call, built once
# (it keeps no state between calls); encode_basestring is the string encoder
# it uses with ensure_ascii=False. Where CPython has its C encoder, it is
# called directly: the same output, without the two Python frames around it
# and without the circular-reference check (markers None: a structure that
# holds itself fails with RecursionError, not ValueError; entries never do).
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
_string = encode_basestring
_CANONICAL: Callable[[Any], str] = _ENCODER.encode
if c_make_encoder is not None and _string is c_encode_basestring:
    _chunks = c_make_encoder(None, _ENCODER.default, _string, None, ":", ",", True, False, False)

    def _CANONICAL(value: Any) -> str:
        return "".join(_chunks(value, 0))


def canonical(value: Any) -> bytes:
    """The canonical JSON bytes of ``value`` (sorted keys, no spaces, UTF-8)."""
    return _CANONICAL(value).encode("utf-8")


def format_ts(when: _dt.datetime) -> str:
    """``when`` in UTC with microseconds and a ``Z`` (naive times are local time)."""
    utc = when if when.tzinfo is _dt.UTC else when.astimezone(_dt.UTC)
    if utc.year < 1000:  # isoformat pads the year to 4 digits, strftime does not
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # The same text as strftime, in a third of the time: "+00:00" becomes "Z".
    return utc.isoformat(timespec="microseconds")[:-6] + "Z"


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
        ts = self.ts
        if len(ts) == 27 and ts[-1] == "Z":  # fromisoformat is C, strptime Python: 10x faster
            with contextlib.suppress(ValueError):
                when = _dt.datetime.fromisoformat(ts[:-1]).replace(tzinfo=_dt.UTC)
                if format_ts(when) == ts:  # exactly the format strptime below accepts
                    return when
        return _dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.UTC)

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
    """Build an entry and compute its hash and MAC (one serialization, see the module docstring)."""
    fields = dict(attrs)
    event = str(event)
    kid = key.key_id
    if seq.__class__ is not int:  # an int subclass (bool) may not print as an int does
        raise EntryFormatError(f"seq {seq!r} is {type(seq).__name__}, not int")
    opening = f'{{"attrs":{_CANONICAL(fields)},"event":{_string(event)},'
    kid_part = f'"kid":{_string(kid)},'
    rest = f'"prev":{_string(prev)},"seq":{seq},"ts":{_string(ts)},"v":{FORMAT_VERSION}}}'
    data = (opening + kid_part + rest).encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    mac = key.mac(data)
    line = f'{opening}"hash":"{digest}",{kid_part}"mac":"{mac}",{rest}'.encode()
    return AuditEntry(
        seq=seq,
        ts=ts,
        event=event,
        attrs=fields,
        kid=kid,
        prev=prev,
        hash=digest,
        mac=mac,
        line=line,
    )


def utc_now(clock: Clock) -> Callable[[], _dt.datetime]:
    """A function returning ``clock.now()`` for :func:`format_ts`: the same instant, in UTC.

    ``datetime.now(UTC)`` for the system clock (the local time it returns
    costs a local-to-UTC conversion per entry, and is ambiguous in the hour
    a DST change repeats); the clock's own ``now`` for any other clock.
    """
    if type(clock) is SystemClock:
        return partial(_dt.datetime.now, _dt.UTC)
    return clock.now


def seal_head(key: AuditKey, seq: int, digest: str, segment: str) -> bytes:
    """The canonical JSON of the head file's record: seq, hash and segment, MACed under ``key``.

    The MAC covers ``b"head\\0"`` and the canonical record without it; as in
    :func:`seal`, the two share their parts and are built once (``mac`` sorts
    between ``hash`` and ``segment``).
    """
    if seq.__class__ is not int:
        raise EntryFormatError(f"seq {seq!r} is {type(seq).__name__}, not int")
    opening = f'{{"hash":{_string(digest)},'
    rest = f'"segment":{_string(segment)},"seq":{seq},"v":{FORMAT_VERSION}}}'
    mac = key.mac(b"head\x00" + (opening + rest).encode("utf-8"))
    return f'{opening}"mac":"{mac}",{rest}'.encode()


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
