"""The frame format: known-answer bytes, round trips, and how damage is told from a torn tail."""

from __future__ import annotations

import zlib

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory._crypto._frames import (
    FLAG_SEAL,
    HEADER_SIZE,
    KIND_ARCHIVE,
    KIND_MEMORY,
    FileHeader,
    FrameContext,
    FrameKey,
    decrypt_frame,
    encrypt_frame,
    scan,
)
from governed_memory._errors import FormatVersionError, IntegrityError

KEY = bytes(range(32))
HEADER = FileHeader(KIND_MEMORY, b"W" * 16, b"F" * 16, b"R" * 16)
CONTEXT = FrameContext(HEADER.pack(), "Agent", "MEMORY.md.gmenc")
NONCE = bytes(range(12))


AGENT_ONLY = FrameKey(1)


def _frame(index: int, text: bytes, key: FrameKey = AGENT_ONLY) -> bytes:
    return encrypt_frame(AESGCM(KEY), CONTEXT, index, key, text, NONCE)


def test_header_known_answer() -> None:
    assert HEADER.pack().hex() == (
        "89474d454e430d0a0001010000000000" + "57" * 16 + "46" * 16 + "52" * 16
    )
    assert len(HEADER.pack()) == HEADER_SIZE == 64


def test_frame_known_answer() -> None:
    """Pins the frame layout and the associated data: any change here breaks old files."""
    frame = _frame(3, b"hello", FrameKey(2, b"S" * 16, 7))
    length = 25 + 12 + 5 + 16
    assert frame[:6] == b"GF" + length.to_bytes(4, "big")
    assert frame[6:10] == zlib.crc32(frame[:6]).to_bytes(4, "big")
    assert frame[10:35] == b"\x00" + (2).to_bytes(4, "big") + b"S" * 16 + (7).to_bytes(4, "big")
    assert frame[35:47] == NONCE
    # The associated data, spelled out from docs/encryption.md.
    aad = (
        b"governed-memory frame v1\x00"
        + HEADER.pack()
        + (5).to_bytes(2, "big")
        + b"Agent"
        + (15).to_bytes(2, "big")
        + b"MEMORY.md.gmenc"
        + (3).to_bytes(8, "big")
        + frame[10:35]
    )
    assert frame[47:] == AESGCM(KEY).encrypt(NONCE, b"hello", aad)
    assert frame.hex() == (
        "47460000003ab220ef2c00000000025353535353535353535353535353535300000007"
        "000102030405060708090a0b2f67ba77aacf84eb8a7deb08982d0142d9c7033a97"
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_frames_round_trip(texts: list[bytes]) -> None:
    data = HEADER.pack() + b"".join(_frame(i, t) for i, t in enumerate(texts))
    found = scan(data, None)
    assert found.torn == 0 and found.end == len(data)
    assert [decrypt_frame(AESGCM(KEY), CONTEXT, f) for f in found.frames] == texts


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=100), min_size=1, max_size=5), st.data())
def test_any_cut_inside_the_last_frame_is_a_torn_tail(
    texts: list[bytes], data: st.DataObject
) -> None:
    whole = HEADER.pack() + b"".join(_frame(i, t) for i, t in enumerate(texts))
    last_start = len(whole) - len(_frame(len(texts) - 1, texts[-1]))
    cut = data.draw(st.integers(last_start + 1, len(whole) - 1))
    found = scan(whole[:cut], None)
    assert len(found.frames) == len(texts) - 1
    assert found.end == last_start and found.torn == cut - last_start


def test_zero_filled_tail_after_a_power_cut_is_torn_not_damage() -> None:
    data = HEADER.pack() + _frame(0, b"a") + bytes(40)
    found = scan(data, None)
    assert len(found.frames) == 1 and found.torn == 40


@pytest.mark.parametrize("position", ["magic", "length", "crc"])
def test_damaged_prefix_of_a_middle_frame_is_an_integrity_error(position: str) -> None:
    first = bytearray(_frame(0, b"first"))
    first[{"magic": 0, "length": 4, "crc": 8}[position]] ^= 0x40
    data = HEADER.pack() + bytes(first) + _frame(1, b"second")
    with pytest.raises(IntegrityError):
        scan(data, None)


def test_flipped_body_byte_fails_authentication_at_decrypt() -> None:
    frame = bytearray(_frame(0, b"secret"))
    frame[-3] ^= 1
    found = scan(HEADER.pack() + bytes(frame), None)
    with pytest.raises(InvalidTag):
        decrypt_frame(AESGCM(KEY), CONTEXT, found.frames[0])


@pytest.mark.parametrize(
    "context",
    [
        FrameContext(HEADER.pack(), "OtherAgent", "MEMORY.md.gmenc"),
        FrameContext(HEADER.pack(), "Agent", "history_x.gmenc"),
        FrameContext(
            FileHeader(KIND_MEMORY, b"W" * 16, b"G" * 16, b"R" * 16).pack(),
            "Agent",
            "MEMORY.md.gmenc",
        ),
        FrameContext(
            FileHeader(KIND_MEMORY, b"X" * 16, b"F" * 16, b"R" * 16).pack(),
            "Agent",
            "MEMORY.md.gmenc",
        ),
    ],
    ids=["other-agent", "other-file-name", "other-file-id", "other-workspace"],
)
def test_frame_moved_elsewhere_fails(context: FrameContext) -> None:
    found = scan(HEADER.pack() + _frame(0, b"secret"), None)
    with pytest.raises(InvalidTag):
        decrypt_frame(AESGCM(KEY), context, found.frames[0])


def test_frame_moved_to_another_position_fails() -> None:
    found = scan(HEADER.pack() + _frame(1, b"was second") + _frame(0, b"was first"), None)
    with pytest.raises(InvalidTag):
        decrypt_frame(AESGCM(KEY), CONTEXT, found.frames[0])


def test_header_checks_kind_magic_and_version() -> None:
    packed = HEADER.pack()
    assert FileHeader.unpack(packed, None, KIND_MEMORY) == HEADER
    with pytest.raises(IntegrityError):
        FileHeader.unpack(packed, None, KIND_ARCHIVE)
    with pytest.raises(IntegrityError):
        FileHeader.unpack(b"# Agent Memory\n" + packed, None, KIND_MEMORY)
    newer = packed[:8] + (2).to_bytes(2, "big") + packed[10:]
    with pytest.raises(FormatVersionError, match=r"version 2.*reads version 1.*newer"):
        FileHeader.unpack(newer, None, KIND_MEMORY)


def test_seal_flag_is_part_of_the_authenticated_data() -> None:
    sealed = encrypt_frame(AESGCM(KEY), CONTEXT, 0, FrameKey(1), b"", NONCE, flags=FLAG_SEAL)
    forged = bytearray(sealed)
    forged[10] = 0
    found = scan(HEADER.pack() + bytes(forged), None)
    with pytest.raises(InvalidTag):
        decrypt_frame(AESGCM(KEY), CONTEXT, found.frames[0])
