"""The read path's one-pass frame table decodes exactly what frame-by-frame authentication does.

``AgentCodec.decode`` walks :func:`frame_bounds` and looks keys up by their
packed bytes; the reference below is the definition it replaced (``scan``
into frame objects, then each frame's cipher from the keyring and
:func:`decrypt_frame`). Damage anywhere, a torn tail, subject keys and a
shredded subject must give the same result or the same error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crypto_helpers import make_keyring
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory._crypto._codec import AgentCodec
from governed_memory._crypto._frames import (
    FLAG_SEAL,
    HEADER_SIZE,
    KIND_ARCHIVE,
    KIND_MEMORY,
    FileHeader,
    FrameContext,
    FrameKey,
    encrypt_frame,
    frame_bounds,
    scan,
)
from governed_memory._errors import DecryptionError, GovernedMemoryError, IntegrityError
from governed_memory._format._records import render_block, render_header
from governed_memory.testing import SeededRandom

MEMORY = "MEMORY.md.gmenc"
ARCHIVE = "history_20261130_100000.gmenc"
SUBJECTS = [None, "s1", "s2", None, "s2", "s1", None, None]

Summary = tuple[bytes, list[bytes], list[object], int, int, int, int, bool, list[object]]


def _reference(codec: AgentCodec, data: bytes, kind: int, name: str, torn_ok: bool) -> Summary:
    header = FileHeader.unpack(data, None, kind)
    if header.workspace_id != codec.keyring.workspace_id or header.key_ref != codec.agent_ref:
        raise DecryptionError(None)
    found = scan(data, None)
    if found.torn and not torn_ok:
        raise IntegrityError(None)
    context = codec.context(data[:HEADER_SIZE], name)
    plaintexts: list[bytes] = []
    keys: list[object] = []
    raw_keys: list[object] = []
    skipped, first_shredded = 0, False
    last = len(found.frames) - 1
    for raw in found.frames:
        sealed = bool(raw.flags & FLAG_SEAL)
        if raw.flags & ~FLAG_SEAL or sealed != (kind == KIND_ARCHIVE and raw.index == last):
            raise IntegrityError(None)
        raw_keys.append(raw.key)
        cipher = codec.keyring.frame_cipher(codec.agent_ref, raw.key)
        if cipher is None:
            skipped += 1
            first_shredded = first_shredded or raw.index == 0
            continue
        try:
            plaintext = cipher.decrypt(raw.nonce, raw.body, context.aad(raw.index, raw.fixed))
        except InvalidTag:
            raise DecryptionError(None) from None
        if sealed:
            if plaintext:
                raise IntegrityError(None)
            continue
        plaintexts.append(plaintext)
        keys.append(raw.key)
    if kind == KIND_ARCHIVE and last < 0:
        raise IntegrityError(None)
    header_bytes = data[:HEADER_SIZE]
    return (header_bytes, plaintexts, keys, len(found.frames), found.end, found.torn, skipped,
            first_shredded, raw_keys)  # fmt: skip


def _fast(codec: AgentCodec, data: bytes, kind: int, name: str, torn_ok: bool) -> Summary:
    d = codec.decode(data, Path(name), kind, name, torn_ok=torn_ok)
    return (d.header, [p.data for p in d.frames], list(d.keys), d.count, d.end, d.torn, d.skipped,
            d.first_shredded, list(d.raw_keys))  # fmt: skip


def _outcome(
    decode: object, codec: AgentCodec, data: bytes, kind: int, name: str, torn_ok: bool
) -> tuple[str, object]:
    try:
        return "ok", decode(codec, data, kind, name, torn_ok)  # type: ignore[operator]
    except GovernedMemoryError as exc:
        return "error", type(exc)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[AgentCodec, bytes, bytes]:
    """A memory and an archive with agent-only and subject frames; subject s2 then shredded."""
    keyring = make_keyring(tmp_path_factory.mktemp("decode") / "keyring")
    codec = AgentCodec(keyring, "Agent", random=SeededRandom())
    text = render_header("conv", "2026-11-30T10:00:00") + "".join(
        render_block(
            "User",
            f"2026-11-30T10:00:{n:02d}",
            f"message {n} " + "é" * (n * 13 % 40),
            {"subject": subject} if subject else None,
        )
        for n, subject in enumerate(SUBJECTS)
    )
    memory = codec.encode_text(KIND_MEMORY, MEMORY, text)
    archive = codec.encode_text(KIND_ARCHIVE, ARCHIVE, text)
    assert codec.decode(memory, Path(MEMORY), KIND_MEMORY, MEMORY, torn_ok=False).text() == text
    keyring.shred_subject("s2")
    return codec, memory, archive


def test_intact_files_match_the_reference_and_skip_the_shredded_subject(
    corpus: tuple[AgentCodec, bytes, bytes],
) -> None:
    codec, memory, archive = corpus
    for data, kind, name in ((memory, KIND_MEMORY, MEMORY), (archive, KIND_ARCHIVE, ARCHIVE)):
        fast = _fast(codec, data, kind, name, False)
        assert fast == _reference(codec, data, kind, name, False)
        assert fast[6] == SUBJECTS.count("s2")  # skipped: the shredded subject's frames
        assert any(key.has_subject for key in fast[2])  # type: ignore[attr-defined]
        text = b"".join(fast[1]).decode("utf-8")
        assert "message 1 " in text and "message 2 " not in text


@settings(max_examples=150, deadline=None)
@given(
    which=st.sampled_from(["memory", "archive"]),
    damage=st.sampled_from(["cut", "flip", "zeros"]),
    at=st.floats(0, 1, exclude_max=True),
    bit=st.integers(0, 7),
    torn_ok=st.booleans(),
)
def test_damaged_files_give_the_reference_result_or_error(
    corpus: tuple[AgentCodec, bytes, bytes],
    which: str,
    damage: str,
    at: float,
    bit: int,
    torn_ok: bool,
) -> None:
    codec, memory, archive = corpus
    data, kind, name = (
        (memory, KIND_MEMORY, MEMORY) if which == "memory" else (archive, KIND_ARCHIVE, ARCHIVE)
    )
    pos = int(at * len(data))
    if damage == "cut":
        data = data[:pos]
    elif damage == "flip":
        data = data[:pos] + bytes([data[pos] ^ (1 << bit)]) + data[pos + 1 :]
    else:  # a power cut after an append: the tail reads back as zeros
        data = data[:pos] + bytes(len(data) - pos)
    assert _outcome(_fast, codec, data, kind, name, torn_ok) == _outcome(
        _reference, codec, data, kind, name, torn_ok
    )


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 3))
def test_frame_bounds_is_scan_without_the_objects(tail: bytes, frames: int) -> None:
    header = FileHeader(KIND_MEMORY, b"W" * 16, b"F" * 16, b"R" * 16).pack()
    context = FrameContext(header, "Agent", MEMORY)
    good = b"".join(
        encrypt_frame(AESGCM(bytes(32)), context, i, FrameKey(1), b"x" * i, bytes(12))
        for i in range(frames)
    )
    data = header + good + tail
    try:
        found = scan(data, None)
    except IntegrityError:
        with pytest.raises(IntegrityError):
            frame_bounds(data, None)
        return
    bounds, torn = frame_bounds(data, None)
    assert bounds == [f.offset for f in found.frames] + [found.end]
    assert torn == found.torn
