"""Encryption at rest: key providers, the keyring, the frame format and the file codec.

The pieces, bottom up (docs/encryption.md describes them for operators):

* :mod:`._providers`: the master key (``KeyProvider`` protocol, local and
  in-memory providers, ``KeyChain`` for rotations).
* :mod:`._keyring`: per-agent and per-subject data keys, stored wrapped.
* :mod:`._frames`: the on-disk format (pure functions over bytes).
* :mod:`._codec`: one agent's files as MEMORY.md text.
* :mod:`._signing`: the deployment's Ed25519 signing key and signed documents
  (receipts, audit checkpoints) anyone can verify with the public key.

The store built on them is :class:`governed_memory._stores.EncryptedAgentStore`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes
from ._keyring import AGENT, SUBJECT, DataKey, Keyring, KeyringFolder, KeySnapshot
from ._observer import CryptoObserver, NullObserver
from ._providers import (
    InMemoryKeyProvider,
    KeyChain,
    KeyProvider,
    LocalKeyProvider,
    RandomSource,
    generate_master_key,
)

__all__ = [
    "AGENT",
    "CHUNK",
    "CONSENT_PURPOSE",
    "ERASURE_PURPOSE",
    "HOLDS_PURPOSE",
    "KIND_ARCHIVE",
    "KIND_MEMORY",
    "MAX_PLAINTEXT",
    "META_FILE",
    "NONCE_BYTES",
    "REENCRYPT_FILE",
    "REQUESTS_PURPOSE",
    "SIGNATURE_FIELD",
    "SUBJECT",
    "AgentCodec",
    "CryptoObserver",
    "DataKey",
    "Decoded",
    "FrameContext",
    "FrameKey",
    "FrameStream",
    "InMemoryKeyProvider",
    "KeyChain",
    "KeyProvider",
    "KeySnapshot",
    "Keyring",
    "KeyringFolder",
    "KeyringStatus",
    "LocalKeyProvider",
    "LocalSigningKey",
    "NullObserver",
    "Plain",
    "PublicKey",
    "RandomSource",
    "RecordSealer",
    "RecordSealing",
    "SignatureCheck",
    "SigningKeyProvider",
    "canonical_json",
    "fd_reader",
    "frame_head",
    "generate_master_key",
    "is_sealed",
    "keyring_status",
    "lone_subject",
    "open_file",
    "open_record",
    "pack_position",
    "public_key_id",
    "scan",
    "seal_file",
    "seal_record",
    "sign_document",
    "signed_bytes",
    "split_segments",
    "verify_document",
]

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._codec import NONCE_BYTES, AgentCodec, Decoded, Plain, lone_subject, split_segments
    from ._frames import (
        KIND_ARCHIVE,
        KIND_MEMORY,
        MAX_PLAINTEXT,
        FrameContext,
        FrameKey,
        frame_head,
        pack_position,
        scan,
    )
    from ._keyring import META_FILE
    from ._sealed import RecordSealer
    from ._sealing import (
        CONSENT_PURPOSE,
        ERASURE_PURPOSE,
        HOLDS_PURPOSE,
        REQUESTS_PURPOSE,
        RecordSealing,
        is_sealed,
        open_file,
        open_record,
        seal_file,
        seal_record,
    )
    from ._signing import (
        SIGNATURE_FIELD,
        LocalSigningKey,
        PublicKey,
        SignatureCheck,
        SigningKeyProvider,
        canonical_json,
        public_key_id,
        sign_document,
        signed_bytes,
        verify_document,
    )
    from ._status import REENCRYPT_FILE, KeyringStatus, keyring_status
    from ._stream import CHUNK, FrameStream, fd_reader

_LAZY: dict[str, str] = {
    "AgentCodec": "._codec",
    "Decoded": "._codec",
    "NONCE_BYTES": "._codec",
    "Plain": "._codec",
    "lone_subject": "._codec",
    "split_segments": "._codec",
    "FrameContext": "._frames",
    "FrameKey": "._frames",
    "KIND_ARCHIVE": "._frames",
    "KIND_MEMORY": "._frames",
    "MAX_PLAINTEXT": "._frames",
    "frame_head": "._frames",
    "pack_position": "._frames",
    "scan": "._frames",
    "META_FILE": "._keyring",
    "RecordSealer": "._sealed",
    "CONSENT_PURPOSE": "._sealing",
    "ERASURE_PURPOSE": "._sealing",
    "HOLDS_PURPOSE": "._sealing",
    "REQUESTS_PURPOSE": "._sealing",
    "RecordSealing": "._sealing",
    "is_sealed": "._sealing",
    "open_file": "._sealing",
    "open_record": "._sealing",
    "seal_file": "._sealing",
    "seal_record": "._sealing",
    "SIGNATURE_FIELD": "._signing",
    "LocalSigningKey": "._signing",
    "PublicKey": "._signing",
    "SignatureCheck": "._signing",
    "SigningKeyProvider": "._signing",
    "canonical_json": "._signing",
    "public_key_id": "._signing",
    "sign_document": "._signing",
    "signed_bytes": "._signing",
    "verify_document": "._signing",
    "KeyringStatus": "._status",
    "REENCRYPT_FILE": "._status",
    "keyring_status": "._status",
    "CHUNK": "._stream",
    "FrameStream": "._stream",
    "fd_reader": "._stream",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
