"""Signed evidence: the deployment's Ed25519 key, and signatures anyone can verify.

Receipts (erasure, rectification, export) and audit checkpoints are JSON
documents. One of them is signed by adding a ``signature`` member::

    {"id": "...", ..., "signature": {"v": 1, "alg": "Ed25519",
                                     "key_id": "<16 hex>", "value": "<base64>"}}

``value`` is the Ed25519 signature (RFC 8032) of the *canonical JSON* of
the document without its ``signature`` member: keys sorted, no whitespace
(``","`` and ``":"`` separators), UTF-8 (non-ASCII characters as they are,
not ``\\u`` escapes). Documents hold strings, integers, booleans, null,
lists and objects only (no floating-point numbers), so every JSON library
re-derives the same bytes. ``key_id`` is the first 16 hex digits of the
SHA-256 of the raw 32-byte public key: it names the key, the verifier
still checks the signature with the public key it trusts.

Verification needs the public key only: no master key, no audit key, no
access to the workspace. The private key is held like the master key
(``GOVERNED_MEMORY_SIGNING_KEY``, a 0600 ``GOVERNED_MEMORY_SIGNING_KEY_FILE``
or a :class:`SigningKeyProvider` in code, e.g. backed by a KMS or an HSM).
docs/evidence.md is the admin's and the auditor's guide.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .._errors import ConfigurationError, KeyProviderError
from ._providers import read_key_file

__all__ = [
    "SIGNATURE_ALGORITHM",
    "SIGNATURE_FIELD",
    "SIGNATURE_VERSION",
    "LocalSigningKey",
    "PublicKey",
    "SignatureCheck",
    "SigningKeyProvider",
    "canonical_json",
    "public_key_id",
    "sign_document",
    "signed_bytes",
    "verify_document",
]

SIGNATURE_FIELD = "signature"
SIGNATURE_VERSION = 1
SIGNATURE_ALGORITHM = "Ed25519"
SEED_BYTES = 32
_KEYGEN_HINT = "create one with `governed-memory keys signing-keygen --out FILE`"


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of ``value``: sorted keys, no whitespace, UTF-8.

    Raises:
        ConfigurationError: ``value`` holds a float (or NaN): its text form
            differs between JSON libraries, so a signature over it would not
            verify everywhere.
    """
    _refuse_floats(value)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _refuse_floats(value: Any) -> None:
    if isinstance(value, float):
        raise ConfigurationError(
            f"a signed document holds the floating-point number {value!r}; signed evidence "
            "holds integers, strings, booleans, lists and objects only"
        )
    if isinstance(value, dict):
        for item in value.values():
            _refuse_floats(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _refuse_floats(item)


def signed_bytes(document: dict[str, Any]) -> bytes:
    """What a document's signature covers: its canonical JSON without ``signature``."""
    return canonical_json({k: v for k, v in document.items() if k != SIGNATURE_FIELD})


def public_key_id(raw: bytes) -> str:
    """The key id of a raw 32-byte Ed25519 public key: 16 hex digits of its SHA-256."""
    return hashlib.sha256(raw).hexdigest()[:16]


@runtime_checkable
class SigningKeyProvider(Protocol):
    """Where the deployment's signing key lives; signs without showing it.

    :class:`LocalSigningKey` holds the key in process memory. An adapter for
    a KMS or an HSM with Ed25519 keys implements the same three members and
    is passed as ``Governance(signing_key=...)``.
    """

    @property
    def key_id(self) -> str:
        """:func:`public_key_id` of :attr:`public_key_bytes`."""
        ...

    @property
    def public_key_bytes(self) -> bytes:
        """The raw 32-byte Ed25519 public key."""
        ...

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``data``."""
        ...


class LocalSigningKey:
    """An Ed25519 private key held in process memory (from the environment, a file, or code).

    Args:
        seed: the 32-byte private key (RFC 8032 seed).

    Raises:
        KeyProviderError: the seed is not 32 bytes.
    """

    def __init__(self, seed: bytes) -> None:
        if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            size = len(seed) if isinstance(seed, bytes) else type(seed).__name__
            raise KeyProviderError(
                f"a signing key must be exactly {SEED_BYTES} bytes, got {size}; {_KEYGEN_HINT}"
            )
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self._public = self._key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self._key_id = public_key_id(self._public)

    @classmethod
    def generate(cls) -> LocalSigningKey:
        """A new random key (from the operating system's generator)."""
        return cls(os.urandom(SEED_BYTES))

    @classmethod
    def from_base64(cls, text: str, *, source: str = "the signing key") -> LocalSigningKey:
        """Decode a base64 key; ``source`` names where it came from in errors."""
        try:
            raw = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise KeyProviderError(
                f"{source} is not valid base64; it must be base64 of {SEED_BYTES} random "
                f"bytes; {_KEYGEN_HINT}"
            ) from exc
        if len(raw) != SEED_BYTES:
            raise KeyProviderError(
                f"{source} decodes to {len(raw)} bytes, not {SEED_BYTES}; {_KEYGEN_HINT}"
            )
        return cls(raw)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LocalSigningKey:
        """Read a base64 key from ``path``, refusing a group- or world-accessible file."""
        file = Path(path)
        text = read_key_file(
            file, "signing key file", "governed-memory keys signing-keygen --out FILE"
        )
        return cls.from_base64(text, source=f"signing key file {file}")

    def to_base64(self) -> str:
        """The private key as base64 text (what a key file holds)."""
        raw = self._key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        return base64.b64encode(raw).decode("ascii")

    @property
    def key_id(self) -> str:
        return self._key_id

    @property
    def public_key_bytes(self) -> bytes:
        return self._public

    @property
    def public_key(self) -> PublicKey:
        return PublicKey(self._public)

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)

    def __repr__(self) -> str:
        return f"LocalSigningKey(key_id={self._key_id!r})"


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key, as a verifier holds it."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != SEED_BYTES:
            raise ConfigurationError(
                f"an Ed25519 public key is {SEED_BYTES} bytes, this one is {len(self.raw)}; "
                "use the key printed by `governed-memory keys signing-public`"
            )

    @classmethod
    def parse(cls, text: str, *, source: str = "the public key") -> PublicKey:
        """A public key from base64 of its 32 raw bytes, or a PEM ``PUBLIC KEY`` block.

        Raises:
            ConfigurationError: neither form, or not an Ed25519 key.
        """
        stripped = text.strip()
        if stripped.startswith("-----BEGIN"):
            try:
                key = serialization.load_pem_public_key(stripped.encode("ascii"))
            except (ValueError, UnicodeEncodeError) as exc:
                raise ConfigurationError(f"{source} is not a readable PEM public key") from exc
            if not isinstance(key, Ed25519PublicKey):
                raise ConfigurationError(
                    f"{source} is a {type(key).__name__}, not an Ed25519 public key"
                )
            return cls(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
        try:
            raw = base64.b64decode(stripped, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ConfigurationError(
                f"{source} is neither base64 of {SEED_BYTES} bytes nor a PEM public key; use "
                "the output of `governed-memory keys signing-public`"
            ) from exc
        if len(raw) != SEED_BYTES:
            raise ConfigurationError(
                f"{source} decodes to {len(raw)} bytes, not {SEED_BYTES}; use the output of "
                "`governed-memory keys signing-public`"
            )
        return cls(raw)

    @property
    def key_id(self) -> str:
        return public_key_id(self.raw)

    def base64(self) -> str:
        return base64.b64encode(self.raw).decode("ascii")

    def pem(self) -> str:
        key = Ed25519PublicKey.from_public_bytes(self.raw)
        return key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode("ascii")

    def verify(self, signature: bytes, data: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except InvalidSignature:
            return False
        return True


def sign_document(document: dict[str, Any], key: SigningKeyProvider) -> dict[str, Any]:
    """``document`` with a ``signature`` member by ``key`` (an existing one is replaced)."""
    body = {k: v for k, v in document.items() if k != SIGNATURE_FIELD}
    value = key.sign(canonical_json(body))
    return {
        **body,
        SIGNATURE_FIELD: {
            "v": SIGNATURE_VERSION,
            "alg": SIGNATURE_ALGORITHM,
            "key_id": key.key_id,
            "value": base64.b64encode(value).decode("ascii"),
        },
    }


SIGNED = "signed"
UNSIGNED = "unsigned"
INVALID = "invalid"
UNKNOWN_KEY = "unknown_key"


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome of :func:`verify_document`.

    ``status`` is ``signed`` (the signature verifies under the given key
    ``key_id``), ``unsigned`` (the document carries no signature),
    ``unknown_key`` (signed by ``key_id``, which is none of the given keys),
    or ``invalid`` (the document or its signature was changed, or the
    signature block is malformed; ``reason`` says which).
    """

    status: str
    key_id: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == SIGNED


def verify_document(document: dict[str, Any], keys: list[PublicKey] | PublicKey) -> SignatureCheck:
    """Check ``document``'s signature against the trusted public ``keys``; never raises."""
    trusted = {k.key_id: k for k in ([keys] if isinstance(keys, PublicKey) else keys)}
    block = document.get(SIGNATURE_FIELD)
    if block is None:
        return SignatureCheck(UNSIGNED, reason="the document carries no signature")
    if not isinstance(block, dict):
        return SignatureCheck(INVALID, reason="its signature member is not an object")
    if block.get("v") != SIGNATURE_VERSION:
        return SignatureCheck(
            INVALID,
            reason=f"signature format version {block.get('v')!r}, this release reads version "
            f"{SIGNATURE_VERSION} (written by a newer governed_memory, or edited)",
        )
    if block.get("alg") != SIGNATURE_ALGORITHM:
        return SignatureCheck(
            INVALID, reason=f"algorithm {block.get('alg')!r} is not {SIGNATURE_ALGORITHM}"
        )
    key_id, value = block.get("key_id"), block.get("value")
    if not isinstance(key_id, str) or not isinstance(value, str):
        return SignatureCheck(INVALID, reason="its signature lacks a key_id or a value")
    key = trusted.get(key_id)
    if key is None:
        return SignatureCheck(
            UNKNOWN_KEY,
            key_id,
            f"signed by key id {key_id}, not by the given key(s) {', '.join(sorted(trusted))}",
        )
    try:
        signature = base64.b64decode(value, validate=True)
        data = signed_bytes(document)
    except (binascii.Error, ValueError, ConfigurationError):
        return SignatureCheck(INVALID, key_id, "its signature value or content is malformed")
    if not key.verify(signature, data):
        return SignatureCheck(
            INVALID,
            key_id,
            "the signature does not verify: the document was changed after it was signed",
        )
    return SignatureCheck(SIGNED, key_id)
