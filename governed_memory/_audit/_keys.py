"""The audit key: what authenticates the audit log and pseudonymises ids in it.

One root key of at least 32 random bytes comes from ``GOVERNED_MEMORY_AUDIT_KEY``
(64+ hex digits or base64), or is derived from the master key with HKDF-SHA256
under its own info label (:data:`AUDIT_KEY_INFO`), so the encryption layer's
keys and the audit key never coincide. Two subkeys are derived from the root,
again with HKDF and distinct labels:

* the MAC key authenticates every log entry and the head file
  (HMAC-SHA256);
* the pseudonym key turns agent names and subject ids into keyed hashes:
  HMAC-SHA256 over ``<kind> NUL <id>``, truncated to 128 bits (32 hex digits).
  The same id always gives the same hash under one key (entries stay
  linkable), and without the key the hash cannot be reversed or confirmed by
  guessing.

Every audited ``add()`` names its agent and subject, so each key remembers
the keyed hashes it computed (up to :data:`PSEUDONYMS_KEPT`, then it starts
afresh): one HMAC per distinct id, not per entry. The memo belongs to the
key object, and a key never changes, so a new key (a rotation, another
``GOVERNED_MEMORY_AUDIT_KEY``) starts with an empty one: no hash computed
under one key is ever returned for another. Both MACs are computed from a
keyed HMAC state made once per key and copied per message, which skips
OpenSSL's per-call set-up of the key.

The key's id (``kid``, 16 hex digits, itself an HMAC) is written into each
entry so a verifier can tell "wrong key" from "altered entry".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .._errors import ConfigurationError

__all__ = [
    "AUDIT_KEY_INFO",
    "MIN_KEY_BYTES",
    "PSEUDONYM_HEX_DIGITS",
    "AuditKey",
    "AuditKeyLike",
    "PseudonymKind",
    "as_audit_key",
    "derived_root",
    "generate_audit_key",
]

AUDIT_KEY_INFO = b"governed-memory/audit-key/v1"
"""HKDF info label that derives the audit key from the master key."""
_MAC_INFO = b"governed-memory/audit-mac/v1"
_PSEUDONYM_INFO = b"governed-memory/audit-pseudonym/v1"
_KEY_ID_LABEL = b"governed-memory/audit-key-id/v1"

MIN_KEY_BYTES = 32
PSEUDONYM_HEX_DIGITS = 32
PSEUDONYMS_KEPT = 4096
"""Keyed hashes one :class:`AuditKey` remembers (agents and subjects of a busy process)."""
_HEX = re.compile(r"^[0-9a-fA-F]+$")

PseudonymKind = str
"""``agent``, ``subject`` or ``hold``: each kind hashes in its own domain."""
_KINDS = frozenset({"agent", "subject", "hold"})


def _hkdf(material: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material)


def derived_root(master: bytes) -> bytes:
    """The audit key's root bytes derived from ``master`` (what ``derive_from_master`` uses).

    Written as hex into GOVERNED_MEMORY_AUDIT_KEY (``audit keygen
    --from-master-key``), it pins the same key, so the log continues and a
    later master key rotation no longer changes it.

    Raises:
        ConfigurationError: ``master`` is shorter than 16 bytes.
    """
    if len(master) < 16:
        raise ConfigurationError(
            f"master key of {len(master)} bytes is too short to derive the audit key from; "
            "use a 32-byte master key or set GOVERNED_MEMORY_AUDIT_KEY"
        )
    return _hkdf(master, AUDIT_KEY_INFO)


def generate_audit_key() -> str:
    """A fresh random audit key as 64 hex digits (for GOVERNED_MEMORY_AUDIT_KEY)."""
    return secrets.token_hex(32)


class AuditKey:
    """Authenticates audit entries and computes keyed hashes of ids.

    Args:
        root: the audit key, at least 32 random bytes.

    Raises:
        ConfigurationError: the key is shorter than 32 bytes.
    """

    __slots__ = ("_mac_key", "_mac_state", "_pseudonym_state", "_pseudonyms", "key_id")

    def __init__(self, root: bytes) -> None:
        if not isinstance(root, bytes) or len(root) < MIN_KEY_BYTES:
            size = len(root) if isinstance(root, bytes) else type(root).__name__
            raise ConfigurationError(
                f"audit key of {size} bytes is too short; the rule is at least {MIN_KEY_BYTES} "
                "random bytes. Generate one with `governed-memory audit keygen`"
            )
        self._mac_key = _hkdf(root, _MAC_INFO)
        self._mac_state = hmac.new(self._mac_key, digestmod=hashlib.sha256)
        self._pseudonym_state = hmac.new(_hkdf(root, _PSEUDONYM_INFO), digestmod=hashlib.sha256)
        self._pseudonyms: dict[tuple[str, str], str] = {}
        self.key_id: str = self.mac(_KEY_ID_LABEL)[:16]

    @classmethod
    def from_text(cls, text: str, *, name: str = "GOVERNED_MEMORY_AUDIT_KEY") -> AuditKey:
        """Decode a key written as hex (64+ digits) or base64 (standard or URL-safe).

        Raises:
            ConfigurationError: naming ``name``, the rule and how to make a key.
        """
        value = text.strip()
        raw: bytes | None = None
        if len(value) >= 2 * MIN_KEY_BYTES and len(value) % 2 == 0 and _HEX.match(value):
            raw = bytes.fromhex(value)
        else:
            standard = value.replace("-", "+").replace("_", "/")
            standard += "=" * (-len(standard) % 4)
            try:
                raw = base64.b64decode(standard.encode("ascii"), validate=True)
            except (binascii.Error, ValueError, UnicodeEncodeError):
                raw = None
        if raw is None or len(raw) < MIN_KEY_BYTES:
            got = "not hex or base64" if raw is None else f"{len(raw)} bytes after decoding"
            raise ConfigurationError(
                f"{name} is {got}; the rule is at least {MIN_KEY_BYTES} random bytes written "
                "as 64 hex digits or base64. Generate one with `governed-memory audit keygen`"
            )
        return cls(raw)

    @classmethod
    def derive_from_master(cls, master: bytes) -> AuditKey:
        """The audit key derived from the master key (HKDF-SHA256, info :data:`AUDIT_KEY_INFO`)."""
        return cls(derived_root(master))

    def mac(self, data: bytes) -> str:
        """HMAC-SHA256 of ``data`` under the MAC key, as hex."""
        state = self._mac_state.copy()
        state.update(data)
        return state.hexdigest()

    def verify_mac(self, data: bytes, mac: str) -> bool:
        """Whether ``mac`` authenticates ``data`` (constant-time comparison)."""
        return hmac.compare_digest(self.mac(data), mac)

    def pseudonym(self, kind: PseudonymKind, value: str) -> str:
        """The keyed hash of ``value`` in domain ``kind`` (32 hex digits).

        Remembered per key (see the module docstring).

        Raises:
            ConfigurationError: ``kind`` is not ``agent``, ``subject`` or ``hold``.
        """
        memo = self._pseudonyms
        found = memo.get((kind, value))
        if found is not None:
            return found
        if kind not in _KINDS:
            raise ConfigurationError(
                f"pseudonym kind {kind!r} is unknown; use one of {sorted(_KINDS)}"
            )
        state = self._pseudonym_state.copy()
        state.update(kind.encode("ascii") + b"\x00" + value.encode("utf-8", "surrogatepass"))
        digest = state.hexdigest()[:PSEUDONYM_HEX_DIGITS]
        if len(memo) >= PSEUDONYMS_KEPT:
            memo.clear()
        memo[(str(kind), str(value))] = digest
        return digest

    def __repr__(self) -> str:
        return f"AuditKey(key_id={self.key_id!r})"


AuditKeyLike = AuditKey | str | bytes
"""An :class:`AuditKey`, its text form (hex or base64) or its raw bytes."""


def as_audit_key(value: AuditKeyLike) -> AuditKey:
    """``value`` as an :class:`AuditKey` (text is decoded as by :meth:`AuditKey.from_text`).

    Raises:
        ConfigurationError: the key is malformed or too short.
    """
    if isinstance(value, AuditKey):
        return value
    if isinstance(value, bytes):
        return AuditKey(value)
    if isinstance(value, str):
        return AuditKey.from_text(value, name="the audit key")
    raise ConfigurationError(
        f"audit key of type {type(value).__name__} is not usable; pass an AuditKey, "
        "64 hex digits, base64 text or 32+ raw bytes"
    )
