"""Sealed governance records: consent, legal holds and erasure records under encryption at rest.

The registries beside the memory (``consent.jsonl``, ``holds.json``,
``tombstones/``, ``scheduled-erasures/``, ``requests.jsonl``) hold subject ids, purposes, actors
and reasons. With ``[encryption] enabled = true`` each of their records is
written as a sealed envelope instead of plaintext: one JSON line ::

    {"v":2,"sealed":"gm1:<base64url(AES-256-GCM token)>"}

A registry appending lines (the consent log, an erasure's progress log)
seals each line; a registry replacing a whole file (holds, tombstones,
scheduled erasures) seals the whole file's plaintext as one envelope (plus a
newline). The token is a :class:`~governed_memory.RecordSealer` token under
the data key of the registry's *purpose* (``consent``, ``holds``,
``erasure``, ``requests``) in the workspace keyring; its associated data binds it to the
workspace, the purpose and the file (its path relative to the governance
folder), so a record copied to another file, registry or workspace fails to
open. Version 2 is the sealed form; the plaintext inside is the registry's
own record, byte for byte, with its own ``v`` (1; 2 for a chained consent record).

Without encryption the registries write their version-1 plaintext exactly as
before. A registry never mixes the two forms:

* a sealed record read where the policy does not enable encryption, or
  without a usable master key, raises :class:`SealedRecordError` naming the
  file;
* a plaintext record read where the policy enables encryption is refused
  (:class:`StorageError`): it is damaged, forged, or from before encryption
  was enabled, and ``governed-memory encrypt-workspace`` seals it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import (
    DecryptionError,
    FormatVersionError,
    KeyProviderError,
    KeyShreddedError,
    KeyUnavailableError,
    SealedRecordError,
    StorageError,
)

if TYPE_CHECKING:
    from ._keyring import Keyring
    from ._providers import RandomSource
    from ._sealed import RecordSealer

__all__ = [
    "CONSENT_PURPOSE",
    "ERASURE_PURPOSE",
    "HOLDS_PURPOSE",
    "REQUESTS_PURPOSE",
    "SEALED_FORMAT_VERSION",
    "RecordSealing",
    "is_sealed",
    "open_file",
    "open_record",
    "seal_file",
    "seal_record",
]

SEALED_FORMAT_VERSION = 2
CONSENT_PURPOSE = "consent"
HOLDS_PURPOSE = "holds"
ERASURE_PURPOSE = "erasure"
REQUESTS_PURPOSE = "requests"

_MARK = b'"sealed"'
_OPEN = b'{"v":2,"sealed":"'


class RecordSealing:
    """Seals and opens the governance records of one workspace.

    Args:
        keyring: the workspace keyring, or a function returning it (called on
            first use, so a registry can be built before the master key is
            needed).
        random: nonce source (pin it to freeze bytes in tests).
    """

    def __init__(
        self,
        keyring: Keyring | Callable[[], Keyring],
        *,
        random: RandomSource | None = None,
    ) -> None:
        self._source = keyring
        self._random = random
        self._keyring: Keyring | None = None
        self._sealers: dict[str, RecordSealer] = {}
        self._lock = threading.Lock()

    @property
    def keyring(self) -> Keyring:
        """The keyring (built on first use)."""
        if self._keyring is None:
            source = self._source
            self._keyring = source() if callable(source) else source
        return self._keyring

    def _sealer(self, purpose: str) -> RecordSealer:
        with self._lock:
            sealer = self._sealers.get(purpose)
            if sealer is None:
                from ._sealed import RecordSealer

                extra = {"random": self._random} if self._random is not None else {}
                sealer = self._sealers[purpose] = RecordSealer(self.keyring, purpose, **extra)
            return sealer

    def seal(self, purpose: str, context: str, plain: bytes) -> bytes:
        """The sealed envelope of ``plain`` (one line, no newline).

        Raises:
            KeyProviderError: no master key is configured.
        """
        token = self._sealer(purpose).seal(plain, context=context.encode("utf-8"))
        return _OPEN + token + b'"}'

    def open(self, purpose: str, context: str, raw: bytes, where: Path) -> bytes:
        """The plaintext sealed in the envelope ``raw``.

        Raises:
            StorageError: ``raw`` is not a sealed envelope (``where`` is damaged,
                or holds plaintext written before encryption was enabled).
            FormatVersionError: an envelope of another format version.
            DecryptionError: the record was altered or moved from another file.
            SealedRecordError: the master key or keyring cannot open it.
        """
        token = _token(raw, where)
        if token is None:
            raise StorageError(
                f"{where} holds a record that is not sealed, but the policy enables encryption: "
                "the file is damaged, or was written before encryption was enabled. Run "
                "`governed-memory encrypt-workspace` to seal the governance records, or restore "
                "the file from a backup"
            )
        try:
            return self._sealer(purpose).open(token, where, context=context.encode("utf-8"))
        except KeyShreddedError:
            raise
        except (KeyProviderError, KeyUnavailableError) as exc:
            raise SealedRecordError(where, str(exc)) from exc
        except DecryptionError as exc:
            if exc.path == Path(where):
                raise  # this record itself fails to authenticate
            raise SealedRecordError(where, f"the keyring cannot be opened ({exc})") from exc

    def generation(self, raw: bytes, where: Path) -> int | None:
        """The purpose-key generation of the envelope ``raw`` (None when it is not sealed)."""
        token = _token(raw, where)
        if token is None:
            return None
        from ._sealed import RecordSealer

        return RecordSealer.generation(token)

    def current_generation(self, purpose: str) -> int:
        """The generation new records of ``purpose`` are sealed under."""
        from ._keyring import PURPOSE

        return self.keyring.current(PURPOSE, purpose).gen

    def __repr__(self) -> str:
        return f"RecordSealing({self._keyring or self._source!r})"


def _token(raw: bytes, where: Path) -> bytes | None:
    """The token of a sealed envelope; None when ``raw`` is not one."""
    if raw.startswith(_OPEN):  # as written: no JSON parse needed
        end = raw.rstrip()
        token = end[len(_OPEN) : -2]
        if end.endswith(b'"}') and token.isascii() and b'"' not in token and b"\\" not in token:
            return token
    if _MARK not in raw:
        return None
    try:
        doc: Any = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "sealed" not in doc:
        return None
    version = doc.get("v")
    if version != SEALED_FORMAT_VERSION:
        raise FormatVersionError(
            f"{where} holds a sealed record of format version {version!r}; this release reads "
            f"version {SEALED_FORMAT_VERSION}. It was probably written by a newer "
            "governed_memory: upgrade this installation"
        )
    token = doc["sealed"]
    if not isinstance(token, str) or not token.isascii():
        raise StorageError(f"{where} holds a damaged sealed record (no token)")
    return token.encode("ascii")


def is_sealed(raw: bytes) -> bool:
    """Whether ``raw`` (one line or one file) is a sealed envelope, of any version."""
    if _MARK not in raw:
        return False
    try:
        doc = json.loads(raw)
    except ValueError:
        return False
    return isinstance(doc, dict) and "sealed" in doc


def seal_record(plain: bytes, sealing: RecordSealing | None, purpose: str, context: str) -> bytes:
    """What a line-per-record registry writes for ``plain`` (a line without its newline)."""
    return plain if sealing is None else sealing.seal(purpose, context, plain)


def open_record(
    raw: bytes, sealing: RecordSealing | None, purpose: str, context: str, where: Path
) -> bytes:
    """The plaintext of one stored line (without its newline).

    Raises:
        SealedRecordError: ``raw`` is sealed and ``sealing`` is None.
        StorageError: ``raw`` is plaintext and ``sealing`` is set (see :meth:`RecordSealing.open`).
    """
    if sealing is not None:
        return sealing.open(purpose, context, raw, where)
    if _MARK in raw and _token(raw, where) is not None:
        raise SealedRecordError(where)
    return raw


def seal_file(plain: bytes, sealing: RecordSealing | None, purpose: str, context: str) -> bytes:
    """What a whole-file registry writes for the plaintext file ``plain``."""
    return plain if sealing is None else sealing.seal(purpose, context, plain) + b"\n"


def open_file(
    raw: bytes, sealing: RecordSealing | None, purpose: str, context: str, where: Path
) -> bytes:
    """The plaintext of a whole file (``raw`` unchanged when not sealed and ``sealing`` is None)."""
    return open_record(raw, sealing, purpose, context, where)
