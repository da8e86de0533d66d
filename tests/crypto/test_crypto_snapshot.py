"""KeySnapshot: the keyring as one operation sees it, each key entry checked once.

A long read (a preload, a compaction) asks for a frame's cipher per frame;
through a snapshot each entry costs one ``stat`` per operation, not per frame.
A key changed by another keyring (another process) before an operation began
is seen by it; one changed during it, by the next.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
from crypto_helpers import make_keyring

from governed_memory import memory_md_path
from governed_memory._crypto import _keyring
from governed_memory._crypto._frames import FrameKey
from governed_memory._crypto._keyring import AGENT, SUBJECT, Keyring
from governed_memory._format._records import render_block, render_header
from governed_memory._stores._encrypted import EncryptedAgentStore


def _entry_stats(keyring: Keyring) -> tuple[list[str], mock._patch[object]]:
    """A patch counting ``stat`` calls on the keyring's entries."""
    seen: list[str] = []
    stat = os.stat
    keys = os.fspath(keyring.keys_dir)

    def counting(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if isinstance(path, str) and path.startswith(keys):
            seen.append(path)
        return stat(path, *args, **kwargs)  # type: ignore[arg-type]

    return seen, mock.patch.object(_keyring.os, "stat", counting)


def _keys(keyring: Keyring) -> tuple[bytes, FrameKey]:
    agent = keyring.current(AGENT, "A")
    subject = keyring.current(SUBJECT, "alice")
    return agent.ref, FrameKey(agent.gen, subject.ref, subject.gen)


def test_a_snapshot_checks_each_entry_once_however_many_frames(tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "keyring")
    agent_ref, frame_key = _keys(keyring)
    seen, patch = _entry_stats(keyring)
    with patch:
        snapshot = keyring.snapshot()
        ciphers = {id(snapshot.frame_cipher(agent_ref, frame_key)) for _ in range(1000)}
    assert len(ciphers) == 1
    assert len(seen) == 2  # the agent's entry and the subject's, once each
    with patch:
        keyring.snapshot().frame_cipher(agent_ref, frame_key)
    assert len(seen) == 4  # a new operation checks again


def test_a_key_shredded_by_another_process_is_seen_by_the_next_operation(tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "keyring")
    other = make_keyring(tmp_path / "keyring")  # another process: its own caches
    agent_ref, frame_key = _keys(keyring)
    during = keyring.snapshot()
    assert during.frame_cipher(agent_ref, frame_key) is not None
    other.shred_subject("alice")
    assert during.frame_cipher(agent_ref, frame_key) is not None  # this operation's view
    assert keyring.snapshot().frame_cipher(agent_ref, frame_key) is None  # the next one's
    assert keyring.frame_cipher(agent_ref, frame_key) is None


def test_a_rotated_key_is_used_by_the_next_operation(tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "keyring")
    other = make_keyring(tmp_path / "keyring")
    agent_ref, frame_key = _keys(keyring)
    keyring.snapshot().frame_cipher(agent_ref, frame_key)
    with other.locked():
        entry = other.entry(agent_ref)
        assert entry is not None
        generation = other.add_generation(entry)
    rotated = FrameKey(generation, frame_key.subject_ref, frame_key.subject_gen)
    assert keyring.snapshot().frame_cipher(agent_ref, rotated) is not None


@pytest.mark.parametrize("records", [1, 40])
def test_a_compaction_checks_each_key_entry_once(tmp_path: Path, records: int) -> None:
    keyring = make_keyring(tmp_path / ".governed_memory" / "keyring")
    store = EncryptedAgentStore(
        memory_md_path("A", tmp_path), lambda: render_header("c", "t"), keyring=keyring
    )
    for n in range(records):
        store.append(render_block("User", "t", f"m{n}", {"subject": f"s{n % 3}"}))
    seen, patch = _entry_stats(keyring)
    with patch:
        assert store.compact(render_block("System", "t", "summary")) is not None
    # Each entry once for the read and the archive's frames, and the agent's
    # once more for each new file's header (the archive, the fresh memory).
    assert len(set(seen)) == 1 + min(records, 3)
    assert len(seen) == len(set(seen)) + 2
    assert "m0" in store.read_archive(store.list_archives()[0])
