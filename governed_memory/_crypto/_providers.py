"""Key providers: where the master key lives and how data keys are wrapped under it.

The master key never enters the workspace. A :class:`KeyProvider` wraps and
unwraps the small data keys the keyring stores; the local providers hold a
32-byte master key in process memory, a KMS or Vault-transit adapter keeps it
in the service (docs/encryption.md shows an adapter).

Key ids name a master key without revealing it: ``local:<16 hex>`` is an HMAC
of the key, so the same key always has the same id and a wrong key is told
apart from a damaged entry before any decryption is tried.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .._errors import DecryptionError, KeyProviderError, KeyUnavailableError
from .._protocols import KeyProvider  # the protocol, documented once there; re-exported

__all__ = [
    "InMemoryKeyProvider",
    "KeyChain",
    "KeyProvider",
    "LocalKeyProvider",
    "RandomSource",
    "generate_master_key",
    "hkdf",
]

RandomSource = Callable[[int], bytes]
"""Returns n random bytes (``os.urandom``); tests pass a seeded source to pin bytes."""

KEY_BYTES = 32
NONCE_BYTES = 12
_WRAP_VERSION = b"\x01"
_ID_INFO = b"governed-memory master key id v1"
_KEK_INFO = b"governed-memory key-encryption key v1"


def generate_master_key(random: RandomSource = os.urandom) -> str:
    """A new master key as base64 text, for ``GOVERNED_MEMORY_MASTER_KEY`` or a key file."""
    return base64.b64encode(random(KEY_BYTES)).decode("ascii")


def hkdf(key: bytes, info: bytes, length: int = 32) -> bytes:
    """HKDF-SHA256 (RFC 5869) of ``key`` with no salt: one key per purpose ``info``."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(key)


def read_key_file(file: Path, what: str, written_by: str) -> str:
    """The text of a key file, refused when it is not a regular file only its owner may access.

    ``what`` names it in errors (``master key file``); ``written_by`` is the
    command that writes one. A symbolic link is followed (mounted secrets are
    links); the mode checked is the target's.

    Raises:
        KeyProviderError: it cannot be opened, is not a regular file, is
            readable or writable by group or others, or is not ASCII text.
    """
    try:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise KeyProviderError(f"{what} {file} cannot be opened: {exc.strerror}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise KeyProviderError(f"{what} {file} is not a regular file")
        if mode & 0o077:
            raise KeyProviderError(
                f"{what} {file} has mode {mode & 0o777:04o}, readable or writable by "
                f"group or others; run `chmod 600 {file}` (and keep it outside the workspace)"
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise KeyProviderError(
            f"{what} {file} must hold base64 text, as written by `{written_by}`"
        ) from exc


class LocalKeyProvider:
    """A master key held in process memory (from the environment, a file, or code).

    Wrapping is AES-256-GCM under a key derived from the master key, with a
    random nonce and ``context`` as associated data.

    Args:
        master_key: exactly 32 bytes.
        random: nonce source (default ``os.urandom``).

    Raises:
        KeyProviderError: the key is not 32 bytes.
    """

    def __init__(self, master_key: bytes, *, random: RandomSource = os.urandom) -> None:
        if not isinstance(master_key, bytes) or len(master_key) != KEY_BYTES:
            size = len(master_key) if isinstance(master_key, bytes) else type(master_key).__name__
            raise KeyProviderError(
                f"a master key must be exactly {KEY_BYTES} bytes, got {size}; "
                "create one with `governed-memory keys generate`"
            )
        self._kek = AESGCM(hkdf(master_key, _KEK_INFO))
        self._key_id = "local:" + hkdf(master_key, _ID_INFO)[:8].hex()
        self._random = random

    @classmethod
    def from_base64(
        cls, text: str, *, source: str = "the master key", random: RandomSource = os.urandom
    ) -> LocalKeyProvider:
        """Decode a base64 master key; ``source`` names where it came from in errors."""
        try:
            raw = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise KeyProviderError(
                f"{source} is not valid base64; it must be base64 of {KEY_BYTES} random bytes, "
                "as printed by `governed-memory keys generate`"
            ) from exc
        if len(raw) != KEY_BYTES:
            raise KeyProviderError(
                f"{source} decodes to {len(raw)} bytes, not {KEY_BYTES}; it must be base64 of "
                f"{KEY_BYTES} random bytes, as printed by `governed-memory keys generate`"
            )
        return cls(raw, random=random)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, random: RandomSource = os.urandom
    ) -> LocalKeyProvider:
        """Read a base64 master key from ``path``, refusing a group- or world-readable file."""
        file = Path(path)
        text = read_key_file(file, "master key file", "governed-memory keys generate --out FILE")
        return cls.from_base64(text, source=f"master key file {file}", random=random)

    @property
    def key_id(self) -> str:
        return self._key_id

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        nonce = self._random(NONCE_BYTES)
        return _WRAP_VERSION + nonce + self._kek.encrypt(nonce, data_key, context)

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes) -> bytes:
        if key_id != self._key_id:
            raise KeyUnavailableError(
                f"master key {key_id} is needed but the configured key is {self._key_id}; "
                "configure the key that wrapped this data (during a rotation, the old one as "
                "GOVERNED_MEMORY_MASTER_KEY_OLD)"
            )
        if len(wrapped) < 1 + NONCE_BYTES + 16 or wrapped[:1] != _WRAP_VERSION:
            raise DecryptionError(None, "wrapped data key")
        nonce, body = wrapped[1 : 1 + NONCE_BYTES], wrapped[1 + NONCE_BYTES :]
        try:
            return self._kek.decrypt(nonce, body, context)
        except InvalidTag:
            raise DecryptionError(None, "wrapped data key") from None

    def __repr__(self) -> str:
        return f"LocalKeyProvider(key_id={self._key_id!r})"


class InMemoryKeyProvider:
    """A fake key service for tests: several master keys, rotation and destruction.

    Behaves like a KMS: keys are created inside it and never shown; old keys
    keep unwrapping until :meth:`destroy`. :attr:`calls` records each
    ``("wrap" | "unwrap", key_id)`` so tests can assert how often the
    service was asked.

    Args:
        random: key and nonce source (default ``os.urandom``).
    """

    def __init__(self, *, random: RandomSource = os.urandom) -> None:
        self._random = random
        self._keys: dict[str, LocalKeyProvider] = {}
        self._current = ""
        self.calls: list[tuple[str, str]] = []
        self.rotate()

    @property
    def key_id(self) -> str:
        return self._current

    @property
    def key_ids(self) -> list[str]:
        """Ids of every key still held, oldest first."""
        return list(self._keys)

    def rotate(self) -> str:
        """Create a new master key, make it current and return its id."""
        key = LocalKeyProvider(self._random(KEY_BYTES), random=self._random)
        self._keys[key.key_id] = key
        self._current = key.key_id
        return key.key_id

    def destroy(self, key_id: str) -> None:
        """Forget ``key_id`` forever (data wrapped only under it becomes unreadable)."""
        self._keys.pop(key_id, None)

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        self.calls.append(("wrap", self._current))
        if self._current not in self._keys:
            raise KeyUnavailableError(f"the current master key {self._current} was destroyed")
        return self._keys[self._current].wrap(data_key, context)

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes) -> bytes:
        self.calls.append(("unwrap", key_id))
        key = self._keys.get(key_id)
        if key is None:
            raise KeyUnavailableError(f"master key {key_id} is not held by this provider")
        return key.unwrap(key_id, wrapped, context)

    def __repr__(self) -> str:
        return f"InMemoryKeyProvider(key_id={self._current!r}, keys={len(self._keys)})"


class KeyChain:
    """The current provider plus older ones still accepted (during a rotation).

    Wraps with ``current``; unwraps with the first provider holding the key id.
    """

    def __init__(self, current: KeyProvider, *previous: KeyProvider) -> None:
        self.current = current
        self.previous = previous

    @property
    def key_id(self) -> str:
        return self.current.key_id

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        return self.current.wrap(data_key, context)

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes) -> bytes:
        for provider in (self.current, *self.previous):
            try:
                return provider.unwrap(key_id, wrapped, context)
            except KeyUnavailableError:
                continue
        known = ", ".join(p.key_id for p in (self.current, *self.previous))
        raise KeyUnavailableError(
            f"master key {key_id} is needed but only {known} are configured; add the key that "
            "wrapped this data (during a rotation: GOVERNED_MEMORY_MASTER_KEY_OLD or --old-key-file)"
        )

    def __repr__(self) -> str:
        return f"KeyChain(current={self.current!r}, previous={self.previous!r})"
