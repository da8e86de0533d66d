"""The encrypted store's watched append path: as safe as the full check it skips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from crypto_helpers import make_keyring

from governed_memory import Conversation, memory_md_path
from governed_memory._crypto._frames import NO_SUBJECT
from governed_memory._crypto._keyring import Keyring
from governed_memory._format._records import render_block, render_header
from governed_memory._stores import _watch
from governed_memory._stores._encrypted import EncryptedAgentStore, encrypted_store_factory

HEADER = render_header("conv", "2026-11-30T10:00:00")


@pytest.fixture
def keyring(workspace: Path) -> Keyring:
    return make_keyring(workspace / ".governed_memory" / "keyring")


def _store(workspace: Path, keyring: Keyring) -> EncryptedAgentStore:
    return EncryptedAgentStore(memory_md_path("A", workspace), lambda: HEADER, keyring=keyring)


def _block(text: str, subject: str | None = None) -> bytes:
    meta = {"subject": subject} if subject else None
    return render_block("User", "2026-11-30T10:00:01", text, meta).encode()


def test_conversation_adds_take_the_watched_path_one_frame_each(
    workspace: Path, keyring: Keyring
) -> None:
    conv = Conversation(
        name="conv",
        memory_md_path=memory_md_path("A", workspace),
        store_factory=encrypted_store_factory(keyring),
    )
    for n in range(5):
        conv.add("User", f"message {n}")
    store = conv.store
    assert isinstance(store, EncryptedAgentStore)
    assert store._armed is not None  # the later adds took the watched path
    decoded = store.decode_memory()
    assert decoded is not None
    assert decoded.count == 6  # the header, then one frame per add
    text = store.read_memory()
    assert text is not None
    assert [line for line in text.splitlines() if line.startswith("message")] == [
        f"message {n}" for n in range(5)
    ]
    store.close()


def test_a_key_shredded_by_another_process_is_never_written_under_again(
    workspace: Path, keyring: Keyring
) -> None:
    store = _store(workspace, keyring)
    store.append_utf8(_block("one"))
    store.append_utf8(_block("two"))
    assert store._armed is not None
    make_keyring(keyring.folder).shred_agent("A")  # another process
    store.append_utf8(_block("three"))
    decoded = store.decode_memory()
    assert decoded is not None
    gens = [key.agent_gen for key in decoded.raw_keys]
    assert gens[-1] != gens[0]  # the new frame is under the new generation
    assert decoded.pieces == [_block("three").decode()]  # the shredded frames are erased
    store.close()


def test_memory_replaced_by_another_process_is_followed(workspace: Path, keyring: Keyring) -> None:
    store, other = _store(workspace, keyring), _store(workspace, keyring)
    store.append_utf8(_block("one"))
    store.append_utf8(_block("two"))
    other.compact(_block("fresh").decode())  # renames a new memory over the open one
    store.append_utf8(_block("three"))
    assert store.read_memory() == HEADER + _block("fresh").decode() + _block("three").decode()
    os.unlink(store.memory_path)  # removed: the next append starts a new memory
    store.append_utf8(_block("four"))
    assert store.read_memory() == HEADER + _block("four").decode()
    store.close()
    other.close()


def test_frames_appended_by_another_process_are_counted_before_ours(
    workspace: Path, keyring: Keyring
) -> None:
    store, other = _store(workspace, keyring), _store(workspace, keyring)
    store.append_utf8(_block("one"))
    store.append_utf8(_block("two"))
    other.append_utf8(_block("theirs"))
    store.append_utf8(_block("three"))  # position 4: the associated data must say so
    expected = ["one", "two", "theirs", "three"]
    assert store.read_memory() == HEADER + "".join(_block(t).decode() for t in expected)
    store.close()
    other.close()


def test_subject_metadata_still_goes_under_the_subject_key(
    workspace: Path, keyring: Keyring
) -> None:
    store = _store(workspace, keyring)
    store.append_utf8(_block("plain"))
    store.append_utf8(_block("hers", subject="alice") + _block("his", subject="bob"))
    decoded = store.decode_memory()
    assert decoded is not None
    subjects = [key.subject_ref != NO_SUBJECT for key in decoded.keys]
    assert subjects == [False, False, True, True]
    store.close()


def test_a_subjects_blocks_take_the_watched_path_under_the_subjects_keys(
    workspace: Path, keyring: Keyring
) -> None:
    store = _store(workspace, keyring)
    for n in range(3):
        store.append_utf8(_block(f"hers {n}", subject="alice"))
    assert store._armed is not None and "alice" in store._keys
    store.append_utf8(_block("his", subject="bob"))  # another subject: its own keys
    store.append_utf8(_block("plain"))
    decoded = store.decode_memory()
    assert decoded is not None
    alice = keyring.ref("subject", "alice")
    bob = keyring.ref("subject", "bob")
    assert [key.subject_ref for key in decoded.keys] == [
        NO_SUBJECT,
        alice,
        alice,
        alice,
        bob,
        NO_SUBJECT,
    ]
    assert decoded.pieces[1:] == [
        *(_block(f"hers {n}", subject="alice").decode() for n in range(3)),
        _block("his", subject="bob").decode(),
        _block("plain").decode(),
    ]
    store.close()


def test_a_subjects_key_shredded_by_another_process_is_never_written_under_again(
    workspace: Path, keyring: Keyring
) -> None:
    store = _store(workspace, keyring)
    store.append_utf8(_block("one", subject="alice"))
    store.append_utf8(_block("two", subject="alice"))
    make_keyring(keyring.folder).shred_subject("alice")  # another process
    store.append_utf8(_block("three", subject="alice"))
    decoded = store.decode_memory()
    assert decoded is not None
    assert decoded.pieces[1:] == [_block("three", subject="alice").decode()]
    store.close()


def test_without_inotify_every_append_checks_with_stat(
    workspace: Path, keyring: Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_watch, "watch", lambda fd, dirfd, folder: None)
    store, other = _store(workspace, keyring), _store(workspace, keyring)
    store.append_utf8(_block("one"))
    assert store._armed is None
    other.compact(_block("fresh").decode())
    store.append_utf8(_block("two"))
    assert store.read_memory() == HEADER + _block("fresh").decode() + _block("two").decode()
    store.close()
    other.close()
