"""Sealed records: encryption for the small files other layers write (consent, exports, ...).

The memory files have their own framed format; a governance layer that keeps
records beside them (a consent log line, an export staging file, a tombstone)
seals each record here when the policy enables encryption, so no plaintext of
it reaches the disk. A sealed record is one ASCII token without newlines
(safe as a JSON Lines line)::

    "gm1:" base64url( gen u32 | subject_ref 16 | subject_gen u32 | nonce 12 | AES-256-GCM ciphertext+tag )

under a data key of the *purpose* (``"consent"``, ``"export"``), optionally
combined with the subject's key so that crypto-shredding the subject makes
the record unreadable too. The associated data binds the token to the
workspace and the purpose, and to the caller's ``context`` when one is given
(the governance registries pass the file the record belongs to, so a token
copied into another file fails to open; an empty context is the v1 binding).
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._errors import DecryptionError, KeyShreddedError
from ._frames import NO_SUBJECT
from ._keyring import PURPOSE, SUBJECT, Keyring
from ._providers import RandomSource, hkdf

__all__ = ["RecordSealer"]

_PREFIX = b"gm1:"
_FIXED = struct.Struct(">I16sI")
_NONCE = 12


class RecordSealer:
    """Seals and opens records for one ``purpose`` of one workspace's keyring.

    Args:
        keyring: the workspace keyring.
        purpose: what the records are (``consent``, ``export``, ...); each
            purpose has its own data key.
        random: nonce source.
    """

    def __init__(
        self, keyring: Keyring, purpose: str, *, random: RandomSource = os.urandom
    ) -> None:
        self.keyring = keyring
        self.purpose = purpose
        self.random = random
        # Derived ciphers, valid while the keyring's change counter stands still
        # (any shredding or new generation bumps it): a log of many records
        # costs one key lookup and one HKDF, not one per record.
        self._ciphers: dict[tuple[int, bytes, int], AESGCM] = {}
        self._epoch = -1

    def _cipher(self, gen: int, subject_ref: bytes, subject_gen: int) -> AESGCM:
        ref = self.keyring.ref(PURPOSE, self.purpose)  # no keyring: raises, creates nothing
        epoch = self.keyring.epoch()
        if epoch != self._epoch:
            self._ciphers = {}
            self._epoch = epoch
        cached = self._ciphers.get((gen, subject_ref, subject_gen))
        if cached is not None:
            return cached
        key = self.keyring.key(ref, gen)
        subject_key = b""
        if subject_ref != NO_SUBJECT:
            subject_key = self.keyring.key(subject_ref, subject_gen) or b""
            if not subject_key:
                key = None
        if key is None:
            raise KeyShreddedError("the record's data key was crypto-shredded: it is erased")
        info = b"governed-memory sealed v1\x00" + ref + _FIXED.pack(gen, subject_ref, subject_gen)
        cipher = AESGCM(hkdf(key + subject_key, info))
        self._ciphers[(gen, subject_ref, subject_gen)] = cipher
        return cipher

    def _aad(self, fixed: bytes, context: bytes) -> bytes:
        aad = b"governed-memory sealed v1\x00" + self.keyring.workspace_id + self.purpose.encode()
        aad += fixed
        if context:  # length-prefixed, so purpose and context cannot run into each other
            aad += b"\x00ctx" + struct.pack(">I", len(context)) + context
        return aad

    def seal(self, data: bytes, *, subject_id: str | None = None, context: bytes = b"") -> bytes:
        """One ASCII token holding ``data`` (with ``subject_id``: shredded with the subject).

        ``context`` is bound as associated data: :meth:`open` needs the same one.
        """
        current = self.keyring.current(PURPOSE, self.purpose)
        subject_ref, subject_gen = NO_SUBJECT, 0
        if subject_id is not None:
            subject = self.keyring.current(SUBJECT, subject_id)
            subject_ref, subject_gen = subject.ref, subject.gen
        fixed = _FIXED.pack(current.gen, subject_ref, subject_gen)
        nonce = self.random(_NONCE)
        sealed = self._cipher(current.gen, subject_ref, subject_gen).encrypt(
            nonce, data, self._aad(fixed, context)
        )
        return _PREFIX + base64.urlsafe_b64encode(fixed + nonce + sealed)

    def open(self, token: bytes | str, where: Path | None = None, *, context: bytes = b"") -> bytes:
        """The data sealed in ``token`` (with the ``context`` it was sealed with).

        Raises:
            DecryptionError: the token was altered, or sealed for another
                workspace, purpose or context (``where`` names the file in the message).
            KeyShreddedError: its key (or its subject's) was crypto-shredded.
        """
        body, (gen, subject_ref, subject_gen) = _parse(token, where)
        fixed, nonce = body[: _FIXED.size], body[_FIXED.size : _FIXED.size + _NONCE]
        cipher = self._cipher(gen, subject_ref, subject_gen)
        try:
            return cipher.decrypt(nonce, body[_FIXED.size + _NONCE :], self._aad(fixed, context))
        except InvalidTag:
            raise DecryptionError(where, "sealed record") from None

    @staticmethod
    def generation(token: bytes | str) -> int:
        """The generation of the purpose key ``token`` was sealed under (no key needed).

        Raises:
            DecryptionError: ``token`` is not a sealed record.
        """
        return _parse(token, None)[1][0]


def _parse(token: bytes | str, where: Path | None) -> tuple[bytes, tuple[int, bytes, int]]:
    try:
        raw = token.encode("ascii") if isinstance(token, str) else token
        if not raw.startswith(_PREFIX):
            raise ValueError("not a sealed record")
        body = base64.urlsafe_b64decode(raw[len(_PREFIX) :].strip())
        fields: tuple[int, bytes, int] = _FIXED.unpack_from(body)
    except (ValueError, binascii.Error, struct.error):
        raise DecryptionError(where, "sealed record") from None
    return body, fields
