"""The on-disk format of encrypted files: a header, then authenticated frames.

Pure functions over bytes; the store does the I/O. Layout (big-endian)::

    file   := header frame*
    header := magic "\\x89GMENC\\r\\n" (8) | version u16 | kind u8 | flags u8 (0)
              | reserved u32 (0) | workspace_id (16) | file_id (16) | key_ref (16)   = 64 bytes
    frame  := "GF" | length u32 | crc32("GF" | length) u32 | body[length]
    body   := flags u8 | agent_gen u32 | subject_ref (16) | subject_gen u32
              | nonce (12) | AES-256-GCM ciphertext | tag (16)

``key_ref`` names the agent's data key (the file's key id); each frame says
which generation of it, and which subject key (all zero: none), it is
encrypted under. The associated data of frame ``i`` is::

    "governed-memory frame v1\\0" | header | len16 agent | agent | len16 name | name
    | i u64 | flags .. subject_gen (the 25 bytes after the prefix)

so a frame only decrypts in the workspace, agent, file name, file (its random
``file_id``) and position it was written for. The length prefix is not secret
but its CRC lets a reader tell a frame cut short by a crash (the file ends
inside the last frame: a torn tail, dropped) from damage in the middle
(:class:`IntegrityError`). Archives end with a seal frame (flag 1, empty
plaintext) so a truncated archive is detected too.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._errors import FormatVersionError, IntegrityError

__all__ = [
    "BODY_AT",
    "FLAG_SEAL",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "KEY_AT",
    "KIND_ARCHIVE",
    "KIND_BLOB",
    "KIND_MEMORY",
    "MAX_FRAME",
    "MAX_PLAINTEXT",
    "NONCE_AT",
    "NO_SUBJECT",
    "FileHeader",
    "FrameContext",
    "FrameKey",
    "RawFrame",
    "Scan",
    "decrypt_frame",
    "encrypt_frame",
    "frame_bounds",
    "frame_fixed",
    "frame_head",
    "pack_position",
    "parse_frame_key",
    "scan",
    "seal_frame",
]

MAGIC = b"\x89GMENC\r\n"
FORMAT_VERSION = 1
KIND_MEMORY = 1
KIND_ARCHIVE = 2
KIND_BLOB = 3
_KIND_NAMES = {KIND_MEMORY: "memory", KIND_ARCHIVE: "archive", KIND_BLOB: "sealed file"}
FLAG_SEAL = 0x01
NO_SUBJECT = bytes(16)

_HEADER = struct.Struct(">8sHBBI16s16s16s")
HEADER_SIZE = _HEADER.size  # 64
_FRAME_MAGIC = b"GF"
_PREFIX = struct.Struct(">2sII")
_HEAD = struct.Struct(">2sI")
_U32 = struct.Struct(">I")
_FIXED = struct.Struct(">BI16sI")
_INDEX = struct.Struct(">Q")
_LEN16 = struct.Struct(">H")
NONCE_SIZE = 12
TAG_SIZE = 16
_MIN_BODY = _FIXED.size + NONCE_SIZE + TAG_SIZE
MAX_FRAME = 1 << 30
_BODY_OVERHEAD = _FIXED.size + NONCE_SIZE  # body bytes besides the sealed plaintext
MAX_PLAINTEXT = MAX_FRAME - _BODY_OVERHEAD - TAG_SIZE  # bytes of plaintext one frame holds
_DOMAIN = b"governed-memory frame v1\x00"
# Offsets from a frame's start: its key bytes, its nonce, its sealed body.
KEY_AT = _PREFIX.size
NONCE_AT = KEY_AT + _FIXED.size
BODY_AT = NONCE_AT + NONCE_SIZE
pack_position = _INDEX.pack  # a frame's position as its associated data holds it


@dataclass(frozen=True)
class FileHeader:
    """The 64-byte header of an encrypted file."""

    kind: int
    workspace_id: bytes
    file_id: bytes
    key_ref: bytes
    version: int = FORMAT_VERSION

    def pack(self) -> bytes:
        return _HEADER.pack(
            MAGIC, self.version, self.kind, 0, 0, self.workspace_id, self.file_id, self.key_ref
        )

    @classmethod
    def unpack(cls, data: bytes | memoryview, path: Path | None, kind: int) -> FileHeader:
        """Parse and check a header; ``kind`` is the kind the caller expects.

        Raises:
            IntegrityError: not an encrypted file, or one of another kind.
            FormatVersionError: written by another format version.
        """
        if len(data) < HEADER_SIZE or bytes(data[:8]) != MAGIC:
            raise IntegrityError(path)
        _magic, version, file_kind, flags, reserved, ws, fid, ref = _HEADER.unpack_from(data)
        if version != FORMAT_VERSION:
            raise FormatVersionError(
                f"{path} is in encrypted format version {version}, but this release reads "
                f"version {FORMAT_VERSION}; it was written by "
                f"{'a newer' if version > FORMAT_VERSION else 'an older'} governed_memory. "
                "Upgrade (or use the release that wrote it)"
            )
        if file_kind != kind or flags or reserved:
            raise IntegrityError(path, _KIND_NAMES.get(kind, "file"))
        return cls(kind=file_kind, workspace_id=ws, file_id=fid, key_ref=ref, version=version)


@dataclass(frozen=True)
class FrameKey:
    """Which data keys a frame is under: the agent key generation and an optional subject key."""

    agent_gen: int
    subject_ref: bytes = NO_SUBJECT
    subject_gen: int = 0

    @property
    def has_subject(self) -> bool:
        return self.subject_ref != NO_SUBJECT


@dataclass(frozen=True)
class RawFrame:
    """One complete frame as found on disk (not yet authenticated)."""

    index: int
    offset: int
    size: int
    flags: int
    key: FrameKey
    fixed: bytes
    nonce: bytes
    body: bytes


@dataclass(frozen=True)
class Scan:
    """The structure of an encrypted file (or of its tail).

    ``end`` is the offset just after the last complete frame; ``torn`` the
    number of bytes after it that belong to a frame a crash cut short.
    """

    frames: list[RawFrame]
    end: int
    torn: int


class FrameContext:
    """What binds frames to their place: file header, agent name and file name."""

    __slots__ = ("prefix",)

    def __init__(self, header: bytes, agent: str, name: str) -> None:
        a, n = agent.encode("utf-8"), name.encode("utf-8")
        self.prefix = _DOMAIN + header + _LEN16.pack(len(a)) + a + _LEN16.pack(len(n)) + n

    def aad(self, index: int, fixed: bytes) -> bytes:
        return self.prefix + _INDEX.pack(index) + fixed


def frame_fixed(key: FrameKey, flags: int = 0) -> bytes:
    """The 25 key bytes that follow a frame's prefix (authenticated, not encrypted)."""
    return _FIXED.pack(flags, key.agent_gen, key.subject_ref, key.subject_gen)


def parse_frame_key(fixed: bytes | memoryview) -> tuple[int, FrameKey]:
    """The flags and keys of a frame from its 25 key bytes (the inverse of :func:`frame_fixed`)."""
    flags, agent_gen, subject_ref, subject_gen = _FIXED.unpack(fixed)
    return flags, FrameKey(agent_gen, subject_ref, subject_gen)


def encrypt_frame(
    cipher: AESGCM,
    context: FrameContext,
    index: int,
    key: FrameKey,
    plaintext: bytes,
    nonce: bytes,
    flags: int = 0,
) -> bytes:
    """One frame, prefix included, for position ``index`` of the file ``context`` describes."""
    return seal_frame(cipher, context, index, frame_fixed(key, flags), plaintext, nonce)


def seal_frame(
    cipher: AESGCM, context: FrameContext, index: int, fixed: bytes, plaintext: bytes, nonce: bytes
) -> bytes:
    """:func:`encrypt_frame` with the key bytes already packed (the add() hot path)."""
    if len(plaintext) > MAX_PLAINTEXT:
        raise ValueError(
            f"a message of {len(plaintext)} bytes exceeds the {MAX_FRAME}-byte frame limit; "
            "split it into several messages"
        )
    sealed = cipher.encrypt(nonce, plaintext, context.prefix + _INDEX.pack(index) + fixed)
    return b"".join((frame_head(len(sealed)), fixed, nonce, sealed))


def frame_head(sealed_size: int) -> bytes:
    """The 10 bytes that open a frame whose sealed plaintext (tag included) has ``sealed_size`` bytes.

    Magic, body length and the CRC-32 of both; the key bytes, the nonce and
    the sealed plaintext follow.
    """
    head = _HEAD.pack(_FRAME_MAGIC, _BODY_OVERHEAD + sealed_size)
    return head + _U32.pack(zlib.crc32(head))


def decrypt_frame(cipher: AESGCM, context: FrameContext, frame: RawFrame) -> bytes:
    """The plaintext of ``frame`` (raises ``cryptography``'s ``InvalidTag`` on failure)."""
    return cipher.decrypt(frame.nonce, frame.body, context.aad(frame.index, frame.fixed))


def _zero(data: bytes | memoryview) -> bool:
    return not bytes(data).strip(b"\x00")


def frame_bounds(
    data: bytes | memoryview, path: Path | None, *, offset: int = HEADER_SIZE
) -> tuple[list[int], int]:
    """Where the complete frames of ``data[offset:]`` start: (bounds, torn).

    ``bounds`` holds each frame's offset followed by the offset just after
    the last complete frame, so frame ``i`` spans ``bounds[i]:bounds[i + 1]``.
    ``torn`` is as in :class:`Scan`. One pass over the prefixes, no objects
    per frame: the read path walks this table directly (see :func:`scan`).

    Raises:
        IntegrityError: a frame before the end is malformed.
    """
    buf = bytes(data)  # no copy for bytes; bytes slices are cheaper than memoryview ones
    total = len(buf)
    bounds: list[int] = []
    append = bounds.append
    unpack_prefix = _PREFIX.unpack_from
    crc32 = zlib.crc32
    prefix_size = _PREFIX.size
    pos = offset
    while pos < total:
        rest = total - pos
        if rest < prefix_size:
            head = buf[pos : pos + 2]
            if _FRAME_MAGIC.startswith(head) or _zero(buf[pos:]):
                append(pos)
                return bounds, rest
            raise IntegrityError(path)
        magic, length, crc = unpack_prefix(buf, pos)
        if (
            magic != _FRAME_MAGIC
            or crc != crc32(buf[pos : pos + 6])
            or not _MIN_BODY <= length <= MAX_FRAME
        ):
            if _zero(buf[pos:]):
                append(pos)
                return bounds, rest
            raise IntegrityError(path)
        append(pos)
        if rest < prefix_size + length:
            return bounds, rest
        pos += prefix_size + length
    append(pos)
    return bounds, 0


def scan(
    data: bytes | memoryview,
    path: Path | None,
    *,
    offset: int = HEADER_SIZE,
    index: int = 0,
) -> Scan:
    """Split ``data[offset:]`` into frames numbered from ``index``.

    A tail that is the start of a frame (or zero bytes, as a power cut can
    leave after an append) is reported as ``torn`` rather than raised:
    whether that is acceptable is the caller's decision (the active memory
    drops it; a sealed archive treats it as damage).

    Raises:
        IntegrityError: a frame before the end is malformed.
    """
    view = memoryview(data)
    bounds, torn = frame_bounds(data, path, offset=offset)
    frames: list[RawFrame] = []
    for number, (pos, stop) in enumerate(pairwise(bounds)):
        fixed_at, nonce_at, body_at = pos + KEY_AT, pos + NONCE_AT, pos + BODY_AT
        fixed = bytes(view[fixed_at:nonce_at])
        flags, agent_gen, subject_ref, subject_gen = _FIXED.unpack(fixed)
        frames.append(
            RawFrame(
                index=index + number,
                offset=pos,
                size=stop - pos,
                flags=flags,
                key=FrameKey(agent_gen, subject_ref, subject_gen),
                fixed=fixed,
                nonce=bytes(view[nonce_at:body_at]),
                body=bytes(view[body_at:stop]),
            )
        )
    return Scan(frames, bounds[-1], torn)
