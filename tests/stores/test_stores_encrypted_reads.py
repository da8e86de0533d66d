"""The encrypted store's streamed reads: preload and compaction in one pass, tampering still caught.

``read_memory`` and ``compact`` read ``MEMORY.md.gmenc`` a chunk at a time
(the compaction seals the archive as it reads). A modified, reordered,
dropped or cut frame is still detected, by both, before anything changes:
the memory stays as it was and no archive (nor a temporary file) appears.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
from crypto_helpers import encrypted_store, workspace_keyring

from governed_memory import memory_md_path
from governed_memory._crypto import _stream
from governed_memory._crypto._frames import scan
from governed_memory._crypto._keyring import Keyring
from governed_memory._errors import DecryptionError, IntegrityError
from governed_memory._format._records import render_block, render_header
from governed_memory._stores._encrypted import EncryptedAgentStore

HEADER = render_header("conv", "2026-11-30T10:00:00")


@pytest.fixture
def keyring(workspace: Path) -> Keyring:
    return workspace_keyring(workspace)


def _store(workspace: Path, keyring: Keyring) -> EncryptedAgentStore:
    return encrypted_store(workspace, keyring, HEADER)


def _filled(workspace: Path, keyring: Keyring, count: int = 12) -> EncryptedAgentStore:
    store = _store(workspace, keyring)
    for n in range(count):
        subject = {"subject": f"s{n % 2}"} if n % 3 else None
        store.append(render_block("User", f"2026-11-30T10:00:{n:02d}", f"message {n} é", subject))
    store.close()
    return store


def _frames(data: bytes) -> tuple[bytes, list[bytes]]:
    found = scan(data, None)
    return data[:64], [data[f.offset : f.offset + f.size] for f in found.frames]


def _modified(data: bytes) -> bytes:
    head, frames = _frames(data)
    frame = bytearray(frames[5])
    frame[-3] ^= 0x20  # in the tag
    return head + b"".join([*frames[:5], bytes(frame), *frames[6:]])


def _reordered(data: bytes) -> bytes:
    head, frames = _frames(data)
    return head + b"".join([*frames[:4], frames[5], frames[4], *frames[6:]])


def _dropped(data: bytes) -> bytes:
    head, frames = _frames(data)
    return head + b"".join([*frames[:4], *frames[5:]])


def _cut_inside(data: bytes) -> bytes:
    """A frame cut short in the middle of the file (not a torn tail: frames follow it)."""
    head, frames = _frames(data)
    return head + b"".join([*frames[:4], frames[4][:30], *frames[5:]])


TAMPERING = {
    "modified": (_modified, DecryptionError),
    "reordered": (_reordered, DecryptionError),
    "dropped": (_dropped, DecryptionError),
    "cut-inside": (_cut_inside, IntegrityError),
}


@pytest.mark.parametrize("chunk", [1 << 20, 97], ids=["one-chunk", "small-chunks"])
@pytest.mark.parametrize("tampering", sorted(TAMPERING))
def test_tampered_frames_fail_the_read_and_the_compaction_and_change_nothing(
    workspace: Path, keyring: Keyring, tampering: str, chunk: int
) -> None:
    store = _filled(workspace, keyring)
    damage, error = TAMPERING[tampering]
    damaged = damage(store.memory_path.read_bytes())
    store.memory_path.write_bytes(damaged)
    fresh = _store(workspace, keyring)
    with mock.patch.object(_stream, "CHUNK", chunk):
        with pytest.raises(error):
            fresh.read_memory()
        with pytest.raises(error):
            fresh.compact(render_block("System", "2026-11-30T11:00:00", "summary"))
    assert store.memory_path.read_bytes() == damaged
    assert fresh.list_archives() == []
    archive = store.memory_path.parent / "archive"
    assert not archive.exists() or os.listdir(archive) == []  # no temporary file left


@pytest.mark.parametrize("chunk", [1 << 20, 97], ids=["one-chunk", "small-chunks"])
def test_a_compaction_archives_exactly_the_text_read(
    workspace: Path, keyring: Keyring, chunk: int
) -> None:
    store = _filled(workspace, keyring)
    text = store.read_memory()
    with mock.patch.object(_stream, "CHUNK", chunk):
        archive_id = store.compact(render_block("System", "2026-11-30T11:00:00", "summary"))
    assert archive_id is not None
    assert store.read_archive(archive_id) == text
    assert "summary" in (store.read_memory() or "")


def test_a_memory_without_the_log_marker_is_archived_as_before(
    workspace: Path, keyring: Keyring
) -> None:
    """Without ``## Interaction Log`` records may start anywhere: the whole text decides."""
    store = EncryptedAgentStore(memory_md_path("A", workspace), lambda: "", keyring=keyring)
    store.ensure()
    store.append("notes\n")
    store.append(render_block("User", "2026-11-30T10:00:00", "hello"))
    archive_id = store.compact(None)
    assert archive_id is not None
    assert store.read_archive(archive_id) == "notes\n" + render_block(
        "User", "2026-11-30T10:00:00", "hello"
    )


def test_a_memory_of_its_header_alone_is_authenticated_and_not_archived(
    workspace: Path, keyring: Keyring
) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    store.close()
    data = bytearray(store.memory_path.read_bytes())
    data[-1] ^= 1
    store.memory_path.write_bytes(bytes(data))
    with pytest.raises(DecryptionError):
        _store(workspace, keyring).compact(None)
    store.memory_path.write_bytes(bytes(data[:-1]) + bytes([data[-1] ^ 1]))
    assert _store(workspace, keyring).compact(None) is None


def test_a_torn_tail_is_left_out_of_the_archive(workspace: Path, keyring: Keyring) -> None:
    store = _filled(workspace, keyring, count=3)
    text = store.read_memory()
    with store.memory_path.open("ab") as handle:
        handle.write(b"GF\x00\x00")  # an append a crash cut short
    archive_id = _store(workspace, keyring).compact(None)
    assert archive_id is not None
    assert store.read_archive(archive_id) == text
