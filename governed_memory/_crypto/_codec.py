"""One agent's encrypted files as text: MEMORY.md text in, framed ciphertext out.

The codec splits text into the pieces the plaintext store would write (the
header, then one piece per message block), picks each piece's keys (the agent
key, plus the subject key of a block whose metadata names a subject), and
encrypts each as a frame. Decoding authenticates every frame and joins the
plaintexts, so the text read back is exactly the text written. Reads go
through :class:`._stream.FrameStream` (a chunk at a time): :meth:`AgentCodec.read_text`
for a whole text, :meth:`AgentCodec.encode_stream` to seal a stream's frames
into another file as they are read (a compaction's archive).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._errors import DecryptionError, IntegrityError, KeyUnavailableError
from .._format import HEADER_MARKER, META_CLOSE, META_OPEN, parse_memory
from ._frames import (
    FLAG_SEAL,
    KIND_ARCHIVE,
    KIND_MEMORY,
    MAX_PLAINTEXT,
    FileHeader,
    FrameContext,
    FrameKey,
    encrypt_frame,
    frame_fixed,
    frame_head,
    pack_position,
    parse_frame_key,
    seal_frame,
)
from ._keyring import AGENT, SUBJECT, Keyring, KeySnapshot
from ._providers import RandomSource
from ._stream import FrameStream, Reader, bytes_reader, whole_chars

__all__ = ["AgentCodec", "Decoded", "Plain", "lone_subject", "split_segments"]

NONCE_BYTES = 12
_MEMO_SIZE = 4096  # subjects whose current keys an agent's codec remembers
_HEADS_KEPT = 1024  # frame heads a sealing pass remembers (one per distinct size)


_HEADER_LINE = b"### "
_NEXT_HEADER = b"\n### "
_EM_DASH = " \u2014 ".encode()
_BODY_MARK = HEADER_MARKER.encode()
_META_MARK = META_OPEN.encode()
_META_CLOSE = META_CLOSE.encode()
_META_LINES_KEPT = 64  # metadata lines a caller's ``known`` remembers (one per subject)
_SPLIT = (False, None)  # lone_subject's answer for text only split_segments can cut


def split_segments(text: str) -> list[tuple[str, str | None]]:
    """``text`` cut before every block header, each piece with its subject id (or None).

    The pieces join back to ``text`` exactly. The leading piece (the file
    header) has no subject.
    """
    if "\n### " not in text and META_OPEN not in text:
        return [(text, None)] if text else []
    parsed = parse_memory(text)
    tail = sum(len(record.raw) for record in parsed.records)
    head = text[: len(text) - tail]
    pieces: list[tuple[str, str | None]] = [(head, None)] if head else []
    pieces.extend((record.raw, record.subject_id) for record in parsed.records)
    return pieces


def lone_subject(data: bytes, known: dict[bytes, str | None]) -> tuple[bool, str | None]:
    """``(True, subject)`` when ``data`` is one block, its subject as :func:`split_segments` finds it.

    ``Conversation.add`` writes one block with a metadata line naming its
    subject: the append paths of the file and database stores seal that block
    as it is, under its subject's keys, without parsing it. The answer is the
    subject (or None) only when ``data`` is certainly a single record from its
    first byte: it opens with a block header line (no ``\\r`` in it, so the
    header rule cannot differ), holds no other line starting ``### `` and no
    ``## Interaction Log`` marker, and its metadata line (if any) is a JSON
    object. Anything else gives :data:`_SPLIT`, ``(False, None)``: the caller
    cuts the text with :func:`split_segments`. ``known`` remembers the
    metadata lines already read, at most 64 (one per subject, usually).
    """
    line_end = data.find(b"\n")
    if (
        not data.startswith(_HEADER_LINE)
        or line_end < 0
        or _EM_DASH not in data[:line_end]
        or b"\r" in data[:line_end]
        or _NEXT_HEADER in data
        or _BODY_MARK in data
    ):
        return _SPLIT
    start = line_end + 1
    if not data.startswith(_META_MARK, start):
        return True, None  # the mark is in the content: a block without metadata
    meta_end = data.find(b"\n", start)
    if meta_end < 0:
        return _SPLIT
    line = data[start:meta_end]
    if line in known:
        return True, known[line]
    if not line.endswith(_META_CLOSE):
        return _SPLIT
    try:
        meta = json.loads(line[len(_META_MARK) : -len(_META_CLOSE)].decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return _SPLIT
    if not isinstance(meta, dict):
        return _SPLIT
    subject = meta.get("subject")
    found = subject if isinstance(subject, str) else None
    if len(known) >= _META_LINES_KEPT:
        known.clear()
    known[line] = found
    return True, found


@dataclass(frozen=True)
class Plain:
    """A decrypted frame: its plaintext and the keys it was under."""

    data: bytes
    key: FrameKey


@dataclass
class Decoded:
    """An encrypted file, authenticated and decrypted.

    ``pieces`` are the readable frames' plaintexts in order, as text (each
    frame holds whole characters: the writer encodes each piece of text on
    its own), and ``keys`` the keys each was under (:attr:`frames` pairs
    them); frames whose key was shredded are counted in ``skipped`` (that
    data was erased on purpose). ``raw_keys`` are the keys of every frame,
    readable or not.
    """

    header: bytes
    pieces: list[str]
    keys: list[FrameKey]
    count: int
    end: int
    torn: int
    skipped: int = 0
    first_shredded: bool = False
    raw_keys: list[FrameKey] = field(default_factory=list)

    @property
    def frames(self) -> list[Plain]:
        """The readable frames: each plaintext with its keys."""
        return [
            Plain(piece.encode("utf-8"), key)
            for piece, key in zip(self.pieces, self.keys, strict=True)
        ]

    def text(self, path: Path | None = None) -> str:
        """The file's text (``path`` is kept for callers; decoding already checked UTF-8)."""
        return "".join(self.pieces)


class AgentCodec:
    """Encrypts and decrypts the files of one agent.

    Args:
        keyring: the workspace keyring.
        agent: the agent's name (bound into every frame).
        random: nonce and file-id source (pin it to freeze bytes in tests).
    """

    def __init__(self, keyring: Keyring, agent: str, *, random: RandomSource = os.urandom) -> None:
        self.keyring = keyring
        self.agent = agent
        self.random = random
        self._agent_ref: bytes | None = None
        # subject -> (keyring epoch, frame key, cipher, packed key bytes): current keys, remembered
        self._memo: dict[str | None, tuple[int, FrameKey, AESGCM, bytes]] = {}

    @property
    def agent_ref(self) -> bytes:
        if self._agent_ref is None:
            self._agent_ref = self.keyring.ref(AGENT, self.agent)
        return self._agent_ref

    def new_header(self, kind: int) -> bytes:
        """A header for a new file (fresh random file id); creates the agent key if needed."""
        self.keyring.current(AGENT, self.agent)
        return FileHeader(kind, self.keyring.workspace_id, self.random(16), self.agent_ref).pack()

    def context(self, header: bytes, name: str) -> FrameContext:
        return FrameContext(header, self.agent, name)

    def key_for(self, subject_id: str | None) -> tuple[FrameKey, AESGCM]:
        """The current keys for new data (of ``subject_id``), and their cipher."""
        _, frame_key, cipher, _ = self._current(subject_id)
        return frame_key, cipher

    def current(self, subject_id: str | None) -> tuple[int, FrameKey, AESGCM, bytes]:
        """:meth:`_current`, for a writer that keeps the keys while the change counter holds."""
        return self._current(subject_id)

    def _current(self, subject_id: str | None) -> tuple[int, FrameKey, AESGCM, bytes]:
        """(keyring epoch, frame key, cipher, packed key bytes) for new data of ``subject_id``.

        The keys are remembered while the keyring's change counter stays the
        same (a rotation or shredding in any process bumps it), so an
        ordinary add costs no keyring I/O. Callers hold the agent lock: a
        change made before they took it is always seen.
        """
        keyring = self.keyring
        epoch = keyring.epoch()  # read before the keys, so a change in between is seen next time
        memo = self._memo.get(subject_id)
        if memo is not None and memo[0] == epoch:
            return memo
        agent = keyring.current(AGENT, self.agent)
        checked = {agent.ref}
        if subject_id is None:
            frame_key = FrameKey(agent.gen)
        else:
            subject = keyring.current(SUBJECT, subject_id)
            checked.add(subject.ref)
            frame_key = FrameKey(agent.gen, subject.ref, subject.gen)
        found = keyring.frame_cipher(agent.ref, frame_key, checked)
        assert found is not None  # current keys are never shredded
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
        memo = self._memo[subject_id] = (epoch, frame_key, found, frame_fixed(frame_key))
        return memo

    def frame_at_epoch(
        self, epoch: int, context: FrameContext, index: int, data: bytes, subject_id: str | None
    ) -> bytes | None:
        """:meth:`frame_utf8` under the keys remembered at keyring epoch ``epoch``, reading nothing.

        None when no keys of ``subject_id`` are remembered at that epoch. For a
        writer whose transaction commits only while the epoch is still
        ``epoch`` (the PostgreSQL store's guarded append): keys of an older
        epoch never reach the stored memory.
        """
        memo = self._memo.get(subject_id)
        if memo is None or memo[0] != epoch:
            return None
        return seal_frame(memo[2], context, index, memo[3], data, self.random(NONCE_BYTES))

    def frame(self, context: FrameContext, index: int, text: str, subject_id: str | None) -> bytes:
        """One frame holding ``text`` at ``index``, under the current keys."""
        return self.frame_utf8(context, index, text.encode("utf-8"), subject_id)

    def frame_utf8(
        self, context: FrameContext, index: int, data: bytes, subject_id: str | None
    ) -> bytes:
        """:meth:`frame` for text already encoded as UTF-8."""
        _, _, cipher, fixed = self._current(subject_id)
        nonce = self.random(NONCE_BYTES)
        return seal_frame(cipher, context, index, fixed, data, nonce)

    def encode_text(self, kind: int, name: str, text: str) -> bytes:
        """A whole new file holding ``text`` under the current keys."""
        header = self.new_header(kind)
        context = self.context(header, name)
        parts = [header]
        for index, (piece, subject) in enumerate(split_segments(text)):
            parts.append(self.frame(context, index, piece, subject))
        if kind == KIND_ARCHIVE:
            parts.append(self._seal(context, len(parts) - 1))
        return b"".join(parts)

    def encode_frames(self, kind: int, name: str, frames: list[Plain]) -> bytes:
        """A whole new file of already-decrypted frames, each under its own keys."""
        return b"".join(self.encode_stream(kind, name, ((p.data, p.key) for p in frames)))

    def encode_stream(
        self,
        kind: int,
        name: str,
        frames: Iterable[tuple[bytes, FrameKey]],
        *,
        keys: KeySnapshot | None = None,
    ) -> Iterator[bytes]:
        """:meth:`encode_frames` as it is sealed: the header, each frame, then the seal.

        ``frames`` may be a :class:`FrameStream` of another file (a
        compaction's archive), consumed as the output is. ``keys``: the
        operation's view of the keyring (a fresh one by default); a frame
        whose key was shredded since it was read is erased, not copied.
        """
        snapshot = keys if keys is not None else self.keyring.snapshot()
        header = self.new_header(kind)
        context = self.context(header, name)
        yield header
        agent_ref, random, prefix = self.agent_ref, self.random, context.prefix
        sealing: dict[FrameKey, tuple[AESGCM | None, bytes]] = {}
        heads: dict[int, bytes] = {}  # frame heads by sealed size (records have few sizes)
        last_key: FrameKey | None = None
        cipher: AESGCM | None = None
        fixed = b""
        index = 0
        # seal_frame, inlined: this loop runs once per frame of a whole file.
        for data, frame_key in frames:
            if frame_key is not last_key:  # a stream's frames share their keys' objects
                found = sealing.get(frame_key)
                if found is None:
                    found = sealing[frame_key] = (
                        snapshot.frame_cipher(agent_ref, frame_key),
                        frame_fixed(frame_key),
                    )
                last_key, (cipher, fixed) = frame_key, found
            if cipher is None:  # shredded since it was read: erased, not copied
                continue
            nonce = random(NONCE_BYTES)
            if len(data) > MAX_PLAINTEXT:
                seal_frame(cipher, context, index, fixed, data, nonce)  # raises its error
            sealed = cipher.encrypt(nonce, data, prefix + pack_position(index) + fixed)
            head = heads.get(len(sealed))
            if head is None:
                if len(heads) >= _HEADS_KEPT:
                    heads.clear()
                head = heads[len(sealed)] = frame_head(len(sealed))
            yield b"".join((head, fixed, nonce, sealed))
            index += 1
        if kind == KIND_ARCHIVE:
            yield self._seal(context, index)

    def _seal(self, context: FrameContext, index: int) -> bytes:
        frame_key, cipher = self.key_for(None)
        nonce = self.random(NONCE_BYTES)
        return encrypt_frame(cipher, context, index, frame_key, b"", nonce, flags=FLAG_SEAL)

    def open_for_append(
        self, data: bytes, path: Path, name: str
    ) -> tuple[FrameContext, int, int] | None:
        """Authenticate a memory file before appending to it: (context, end, frame count).

        Every frame is checked, so nothing is ever appended to a file that
        does not decrypt (a wrong keyring or key, or damage, fails first). A
        torn final frame is left for the caller to cut. None when the first
        frame's key was shredded (the file is erased data).
        """
        decoded = self.decode(data, path, KIND_MEMORY, name, torn_ok=True)
        if decoded.first_shredded:
            return None
        return self.context(decoded.header, name), decoded.end, decoded.count

    def _report(self, path: Path, exc: Exception) -> None:
        self.keyring.observer.record(
            "decrypt",
            agent=self.agent,
            subject_id=None,
            outcome="error",
            file=str(path),
            error=type(exc).__name__,
        )

    def decode(
        self,
        data: bytes,
        path: Path,
        kind: int,
        name: str,
        *,
        torn_ok: bool,
        keys: KeySnapshot | None = None,
    ) -> Decoded:
        """Authenticate and decrypt a whole file.

        Raises:
            DecryptionError: a frame fails to authenticate, or the file
                belongs to another workspace or agent.
            IntegrityError: the structure is damaged (a torn tail counts as
                damage unless ``torn_ok``; an archive must end with its seal).
            KeyUnavailableError: a key the file needs is not in the keyring.
        """
        stream = self.stream(
            bytes_reader(bytes(data)), path, kind, name, torn_ok=torn_ok, keys=keys
        )
        pieces: list[str] = []
        frame_keys: list[FrameKey] = []
        add_piece, add_key = pieces.append, frame_keys.append
        for plaintext, frame_key in stream:
            try:
                # Decoded frame by frame: the freed plaintext's memory is
                # reused by the next frame, where one joined copy would not be.
                add_piece(plaintext.decode("utf-8"))
            except UnicodeDecodeError:
                raise IntegrityError(path) from None
            add_key(frame_key)
        return Decoded(
            stream.header,
            pieces,
            frame_keys,
            stream.count,
            stream.end,
            stream.torn,
            stream.skipped,
            stream.first_shredded,
            stream.raw_keys,
        )

    def read_text(
        self, read: Reader, path: Path, kind: int, name: str, *, torn_ok: bool
    ) -> tuple[str, FrameStream]:
        """A file's text read in one pass, and its (finished) stream.

        The plaintexts are gathered as bytes and decoded once: at its peak
        the read holds a chunk of ciphertext, the plaintext's bytes and the
        text, as a plaintext read holds the file's bytes and its text.

        Raises:
            as :meth:`decode`.
        """
        stream = self.stream(read, path, kind, name, torn_ok=torn_ok)
        gathered = bytearray()
        extend = gathered.extend
        for plaintext, _ in stream:
            # Edges in ASCII (the usual case: a block ends with its separator) are whole.
            if plaintext and (plaintext[-1] | plaintext[0]) >= 0x80 and not whole_chars(plaintext):
                raise IntegrityError(path)
            extend(plaintext)
        try:
            text = gathered.decode("utf-8")
        except UnicodeDecodeError:
            raise IntegrityError(path) from None
        return text, stream

    def stream(
        self,
        read: Reader,
        path: Path,
        kind: int,
        name: str,
        *,
        torn_ok: bool,
        keys: KeySnapshot | None = None,
    ) -> FrameStream:
        """The frames of a file as they are read (:class:`FrameStream`); errors as :meth:`decode`.

        ``keys``: the operation's view of the keyring (a fresh one by default):
        each key entry is checked once per operation, not once per frame.
        """
        snapshot = keys if keys is not None else self.keyring.snapshot()

        def open_header(data: bytes) -> bytes:
            header = FileHeader.unpack(data, path, kind)
            try:
                workspace_id, agent_ref = self.keyring.workspace_id, self.agent_ref
            except KeyUnavailableError as exc:
                raise KeyUnavailableError(f"{path} cannot be read: {exc}", path) from None
            if header.workspace_id != workspace_id or header.key_ref != agent_ref:
                raise DecryptionError(path)
            return self.context(data, name).prefix

        def frame_keys(fixed: bytes) -> tuple[FrameKey, AESGCM | None]:
            _, frame_key = parse_frame_key(fixed)
            try:
                return frame_key, snapshot.frame_cipher(self.agent_ref, frame_key)
            except KeyUnavailableError as exc:
                raise KeyUnavailableError(f"{path} cannot be read: {exc}", path) from None

        return _Reported(self, read, path, kind, open_header, frame_keys, torn_ok=torn_ok)


class _Reported(FrameStream):
    """A codec's stream: a frame that fails to authenticate is reported to the observer."""

    def __init__(self, codec: AgentCodec, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._codec = codec

    def __iter__(self) -> Iterator[tuple[bytes, FrameKey]]:
        try:
            yield from super().__iter__()
        except DecryptionError as exc:
            self._codec._report(self.path, exc)
            raise
