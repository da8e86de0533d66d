"""Reading an encrypted file as a stream of chunks: the whole-file result, in bounded memory.

:class:`FrameStream` reads :data:`CHUNK` bytes at a time; the reference is
the whole-file read of ``test_crypto_decode_table`` (the definition the read
path replaced). Whatever the chunk size, damage anywhere gives the same
result or the same error, a frame longer than a chunk is read whole, and the
text is decoded once with exactly the checks a frame-by-frame decode makes.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
from crypto_helpers import make_keyring
from hypothesis import given, settings
from hypothesis import strategies as st
from test_crypto_decode_table import MEMORY, _outcome, _reference

from governed_memory._crypto import _stream
from governed_memory._crypto._codec import AgentCodec
from governed_memory._crypto._frames import (
    HEADER_SIZE,
    KIND_ARCHIVE,
    KIND_MEMORY,
    FrameContext,
    FrameKey,
    encrypt_frame,
)
from governed_memory._crypto._stream import bytes_reader, fd_reader, whole_chars
from governed_memory._errors import IntegrityError
from governed_memory._format._records import render_block, render_header
from governed_memory.testing import SeededRandom

ARCHIVE = "history_20261130_100000.gmenc"


def _streamed(codec: AgentCodec, data: bytes, kind: int, name: str, torn_ok: bool) -> object:
    d = codec.decode(data, Path(name), kind, name, torn_ok=torn_ok)
    return (d.header, [p.data for p in d.frames], list(d.keys), d.count, d.end, d.torn, d.skipped,
            d.first_shredded, list(d.raw_keys))  # fmt: skip


@pytest.fixture(scope="module")
def codec(tmp_path_factory: pytest.TempPathFactory) -> AgentCodec:
    keyring = make_keyring(tmp_path_factory.mktemp("stream") / "keyring")
    return AgentCodec(keyring, "Agent", random=SeededRandom())


def _text(count: int) -> str:
    return render_header("conv", "2026-11-30T10:00:00") + "".join(
        render_block("User", f"2026-11-30T10:00:{n:02d}", f"message {n} " + "é" * (n * 7 % 30))
        for n in range(count)
    )


@settings(max_examples=200, deadline=None)
@given(
    chunk=st.integers(1, 400),
    which=st.sampled_from(["memory", "archive"]),
    damage=st.sampled_from(["none", "cut", "flip", "zeros"]),
    at=st.floats(0, 1, exclude_max=True),
    bit=st.integers(0, 7),
    torn_ok=st.booleans(),
)
def test_any_chunk_size_gives_the_whole_file_result_or_error(
    codec: AgentCodec, chunk: int, which: str, damage: str, at: float, bit: int, torn_ok: bool
) -> None:
    kind, name = (KIND_MEMORY, MEMORY) if which == "memory" else (KIND_ARCHIVE, ARCHIVE)
    data = codec.encode_text(kind, name, _text(6))
    pos = int(at * len(data))
    if damage == "cut":
        data = data[:pos]
    elif damage == "flip":
        data = data[:pos] + bytes([data[pos] ^ (1 << bit)]) + data[pos + 1 :]
    elif damage == "zeros":
        data = data[:pos] + bytes(len(data) - pos)
    with mock.patch.object(_stream, "CHUNK", chunk):
        streamed = _outcome(_streamed, codec, data, kind, name, torn_ok)
    assert streamed == _outcome(_reference, codec, data, kind, name, torn_ok)


def test_a_frame_longer_than_a_chunk_is_read_whole(codec: AgentCodec) -> None:
    text = render_header("conv", "2026-11-30T10:00:00") + render_block(
        "User", "2026-11-30T10:00:00", "long " * 2000
    )
    data = codec.encode_text(KIND_MEMORY, MEMORY, text)
    asked: list[int] = []

    def read(size: int, offset: int) -> bytes:
        asked.append(size)
        return data[offset : offset + size]

    with mock.patch.object(_stream, "CHUNK", 64):
        read_back, stream = codec.read_text(read, Path(MEMORY), KIND_MEMORY, MEMORY, torn_ok=False)
    assert read_back == text
    assert stream.count == 2 and stream.end == len(data)
    assert max(asked) > 64  # the long frame in one read, not grown 64 bytes at a time
    assert len(asked) < 10


def test_read_text_reads_a_file_a_chunk_at_a_time(codec: AgentCodec, tmp_path: Path) -> None:
    """The ciphertext is never held whole: no read asks for more than a chunk (frames are small)."""
    text = _text(60)
    path = tmp_path / MEMORY
    path.write_bytes(codec.encode_text(KIND_MEMORY, MEMORY, text))
    sizes: list[int] = []
    pread = os.pread

    def counting(fd: int, size: int, offset: int) -> bytes:
        sizes.append(size)
        return pread(fd, size, offset)

    fd = os.open(path, os.O_RDONLY)
    try:
        with mock.patch.object(_stream, "CHUNK", 512), mock.patch.object(os, "pread", counting):
            read_back, stream = codec.read_text(
                fd_reader(fd), path, KIND_MEMORY, MEMORY, torn_ok=False
            )
    finally:
        os.close(fd)
    assert read_back == text and stream.count == 61
    assert sizes and max(sizes) <= 512
    assert len(sizes) >= path.stat().st_size // 512


@pytest.mark.parametrize(
    ("data", "whole"),
    [
        (b"", True),
        (b"ascii", True),
        ("é".encode(), True),
        ("a€".encode(), True),
        ("a😀".encode(), True),
        ("a€".encode()[:-1], False),  # ends inside a character
        ("😀".encode()[:-1], False),
        ("é".encode()[1:], False),  # starts inside one
        (b"\x80\x80\x80\x80", False),
        (b"a\xf8", False),  # not a lead byte of UTF-8
    ],
)
def test_whole_chars_tells_a_cut_character(data: bytes, whole: bool) -> None:
    assert whole_chars(data) is whole


def _frames_file(codec: AgentCodec, pieces: list[bytes]) -> bytes:
    header = codec.new_header(KIND_MEMORY)
    context = FrameContext(header, codec.agent, MEMORY)
    frame_key, cipher = codec.key_for(None)
    return header + b"".join(
        encrypt_frame(cipher, context, i, frame_key, piece, bytes([i]) * 12)
        for i, piece in enumerate(pieces)
    )


@pytest.mark.parametrize(
    "pieces",
    [
        ["café".encode()[:-1], "café".encode()[-1:]],  # a character cut between two frames
        [b"ok", b"\xff"],  # not UTF-8 at all
        [b"ok", "é".encode() + b"\xc3"],
    ],
)
def test_text_that_a_frame_by_frame_decode_refuses_is_refused(
    codec: AgentCodec, pieces: list[bytes]
) -> None:
    data = _frames_file(codec, [render_header("c", "t").encode(), *pieces])
    with pytest.raises(IntegrityError):
        codec.decode(data, Path(MEMORY), KIND_MEMORY, MEMORY, torn_ok=False)
    with pytest.raises(IntegrityError):
        codec.read_text(bytes_reader(data), Path(MEMORY), KIND_MEMORY, MEMORY, torn_ok=False)


def test_read_text_is_the_decoded_text_and_totals(codec: AgentCodec) -> None:
    text = _text(20)
    data = codec.encode_text(KIND_MEMORY, MEMORY, text) + b"GF\x00"  # and a torn tail
    decoded = codec.decode(data, Path(MEMORY), KIND_MEMORY, MEMORY, torn_ok=True)
    read_back, stream = codec.read_text(
        bytes_reader(data), Path(MEMORY), KIND_MEMORY, MEMORY, torn_ok=True
    )
    assert read_back == decoded.text() == text
    assert (stream.header, stream.count, stream.end, stream.torn) == (
        data[:HEADER_SIZE],
        decoded.count,
        decoded.end,
        3,
    )
    assert stream.raw_keys == decoded.raw_keys == [FrameKey(1)] * 21
