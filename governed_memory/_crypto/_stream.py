"""Reading an encrypted file frame by frame: authenticate and decrypt as the bytes arrive.

One pass with bounded memory: the file is read in chunks of :data:`CHUNK`
bytes (a frame larger than that is read whole), and each complete frame is
authenticated, decrypted and handed on before the next chunk is read, so no
copy of the whole ciphertext is ever held. The checks are a whole-file
read's: the header (by the caller's ``open_header``), every frame's prefix
(magic, length, CRC), its flags, its associated data (workspace, agent, file
name, file id, position, keys) and its tag. An archive must end with its
seal and a seal anywhere else is damage; a torn tail is damage unless the
caller accepts it (the active memory).

Damage further on raises only when the stream reaches it: a caller must not
act on what a stream yielded (replace a file, return text) before the stream
ended. :attr:`FrameStream.count` and the other totals are final then.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._errors import DecryptionError, GovernedMemoryError, IntegrityError
from ._frames import (
    BODY_AT,
    FLAG_SEAL,
    HEADER_SIZE,
    KEY_AT,
    KIND_ARCHIVE,
    NONCE_AT,
    FrameKey,
    frame_bounds,
    pack_position,
)

__all__ = ["CHUNK", "FrameStream", "Reader", "bytes_reader", "fd_reader", "whole_chars"]

CHUNK = 1 << 20  # bytes read at a time
Reader = Callable[[int, int], bytes]  # (size, offset) -> at most size bytes; b"" at the end
Keys = Callable[[bytes], tuple[FrameKey, AESGCM | None]]  # 25 key bytes -> keys, cipher
_LENGTH = struct.Struct(">I")
_PREFIX_SIZE = KEY_AT


def fd_reader(fd: int) -> Reader:
    """A :data:`Reader` over an open file (``os.pread``: the descriptor's offset is unused)."""

    def read(size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    return read


def bytes_reader(data: bytes) -> Reader:
    """A :data:`Reader` over bytes already in memory."""

    def read(size: int, offset: int) -> bytes:
        return data[offset : offset + size]

    return read


def whole_chars(data: bytes) -> bool:
    """Whether ``data`` neither starts nor ends inside a UTF-8 character.

    Every frame holds whole characters (the writer encodes each piece of text
    on its own). Frames that pass this check and whose concatenation decodes
    are each valid UTF-8, so the text of many frames is decoded once, not
    frame by frame.
    """
    if not data:
        return True
    if 0x80 <= data[0] < 0xC0:  # a continuation byte cannot start a character
        return False
    if data[-1] < 0x80:
        return True
    start = len(data) - 1
    while start > len(data) - 4 and start > 0 and 0x80 <= data[start] < 0xC0:
        start -= 1
    lead = data[start]
    size = (
        2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 0
    )
    return size == len(data) - start


class FrameStream:
    """The readable frames of one encrypted file, in order: ``(plaintext, keys)`` pairs.

    Iterate once. Frames whose key was shredded are not yielded (counted in
    ``skipped``). After the iteration: ``header`` (64 bytes), ``count``
    (complete frames), ``end`` (offset after the last one), ``torn`` (bytes
    of a frame cut short), ``first_shredded`` and ``raw_keys`` (the keys of
    every frame, readable or not).

    Args:
        read: where the bytes come from.
        path: named by errors.
        kind: the kind of file expected (memory or archive).
        open_header: checks the header bytes (raising on a file from
            elsewhere) and returns the associated-data prefix of its frames.
        keys: the keys and cipher of frames with given key bytes.
        torn_ok: whether a torn tail is dropped (else: damage).
    """

    def __init__(
        self,
        read: Reader,
        path: Path,
        kind: int,
        open_header: Callable[[bytes], bytes],
        keys: Keys,
        *,
        torn_ok: bool,
    ) -> None:
        self._read, self.path, self.kind = read, path, kind
        self._open_header, self._keys, self._torn_ok = open_header, keys, torn_ok
        self.header = b""
        self.count = 0
        self.end = HEADER_SIZE
        self.torn = 0
        self.skipped = 0
        self.first_shredded = False
        self.raw_keys: list[FrameKey] = []

    def __iter__(self) -> Iterator[tuple[bytes, FrameKey]]:
        path, read = self.path, self._read
        header = read(HEADER_SIZE, 0)
        prefix = self._open_header(header)
        self.header = header
        known: dict[bytes, tuple[FrameKey, AESGCM | None]] = {}
        add_raw = self.raw_keys.append
        archive = self.kind == KIND_ARCHIVE
        index, offset, buf, want = 0, HEADER_SIZE, b"", CHUNK
        while True:
            chunk = read(want, offset + len(buf))
            buf = buf + chunk if buf else chunk
            bounds, _ = frame_bounds(buf, path, offset=0)
            # The last complete frame waits for the next chunk: whether it is
            # the file's last (an archive's seal) is known only then.
            ready = len(bounds) - 1 if not chunk else len(bounds) - 2
            for i in range(max(ready, 0)):
                start, stop = bounds[i], bounds[i + 1]
                last = not chunk and i == ready - 1
                fixed = buf[start + KEY_AT : start + NONCE_AT]
                flags = fixed[0]  # checked before the keys are looked up
                try:
                    if (flags or (archive and last)) and (
                        flags != FLAG_SEAL or not archive or not last
                    ):
                        raise IntegrityError(path)
                    entry = known.get(fixed)
                    if entry is None:
                        entry = known[fixed] = self._keys(fixed)
                    frame_key, cipher = entry
                    add_raw(frame_key)
                    if cipher is None:  # erased on purpose (the seal too, when the agent key was)
                        self.skipped += 1
                        self.first_shredded = self.first_shredded or index == 0
                        index += 1
                        continue
                    try:
                        plaintext = cipher.decrypt(
                            buf[start + NONCE_AT : start + BODY_AT],
                            buf[start + BODY_AT : stop],
                            prefix + pack_position(index) + fixed,
                        )
                    except InvalidTag:
                        raise DecryptionError(path) from None
                    if flags and plaintext:  # the seal: authenticated, empty, not data
                        raise IntegrityError(path)
                except GovernedMemoryError:
                    # A whole-file read checks the structure first: damage further on wins.
                    self._check_rest(offset + stop, buf[stop:])
                    raise
                index += 1
                if not flags:
                    yield plaintext, frame_key
            consumed = bounds[max(ready, 0)]
            offset += consumed
            buf = buf[consumed:]
            self.count, self.end = index, offset
            if not chunk:
                break
            # A frame longer than a chunk is read whole: its length is in its prefix.
            want = CHUNK
            rest = len(buf) - (bounds[-1] - consumed)  # bytes of the frame being read
            if rest >= _PREFIX_SIZE:
                head = bounds[-1] - consumed
                want = max(CHUNK, _PREFIX_SIZE + _LENGTH.unpack_from(buf, head + 2)[0] - rest)
        self.torn = len(buf)
        if (self.torn and not self._torn_ok) or (archive and index == 0):
            raise IntegrityError(path)

    def _check_rest(self, offset: int, buf: bytes) -> None:
        """Raise :class:`IntegrityError` if the file from ``offset`` on (``buf`` read already) is damaged."""
        while True:
            chunk = self._read(CHUNK, offset + len(buf))
            buf = buf + chunk if buf else chunk
            bounds, torn = frame_bounds(buf, self.path, offset=0)
            offset += bounds[-1]
            buf = buf[bounds[-1] :]
            if not chunk:
                if torn and not self._torn_ok:
                    raise IntegrityError(self.path)
                return
