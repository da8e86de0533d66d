"""encrypt-workspace / decrypt-workspace: idempotent, crash-safe, lossless."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from crypto_helpers import make_keyring

from governed_memory import Conversation, memory_md_path
from governed_memory._crypto._frames import KIND_MEMORY
from governed_memory._crypto._keyring import Keyring
from governed_memory._errors import StorageError
from governed_memory._keys._migration import decrypt_workspace, encrypt_workspace
from governed_memory._stores._encrypted import EncryptedAgentStore, encrypted_store_factory


@pytest.fixture
def reference_workspace(fixtures_dir: Path, tmp_path: Path) -> Path:
    """A workspace the reference (swarms 16.0.3) wrote: MEMORY.md + archive/history_*.md."""
    target = tmp_path / "ref"
    shutil.copytree(fixtures_dir / "write_compact" / "workspace", target)
    return target


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".governed_memory" not in p.parts
    }


def _keyring(root: Path) -> Keyring:
    return make_keyring(root / ".governed_memory" / "keyring")


def test_encrypt_then_decrypt_gives_back_the_reference_bytes(reference_workspace: Path) -> None:
    original = _snapshot(reference_workspace)
    report = encrypt_workspace(reference_workspace, _keyring(reference_workspace))
    assert report.converted == 2 and report.agents == 1
    encrypted = _snapshot(reference_workspace)
    assert sorted(encrypted) == [
        "agents/QuantAgent/MEMORY.md.gmenc",
        "agents/QuantAgent/archive/history_2026-11-30_04-00-25.gmenc",
    ]
    back = decrypt_workspace(reference_workspace, _keyring(reference_workspace))
    assert back.converted == 2
    assert _snapshot(reference_workspace) == original


def test_encrypted_reference_workspace_preloads_like_the_plaintext_one(
    reference_workspace: Path, fixtures_dir: Path
) -> None:
    plain = Conversation(
        name="x",
        memory_md_path=memory_md_path("QuantAgent", fixtures_dir / "preload" / "workspace"),
    )
    encrypt_workspace(reference_workspace, _keyring(reference_workspace))
    store_factory = encrypted_store_factory(_keyring(reference_workspace))
    enc = Conversation(
        name="x",
        memory_md_path=memory_md_path("QuantAgent", reference_workspace),
        store_factory=store_factory,
    )
    assert enc.conversation_history == plain.conversation_history
    expected = json.loads((fixtures_dir / "preload" / "history_after_construct.json").read_text())
    assert enc.conversation_history[-1]["content"] == expected[-1]["content"]


def test_running_twice_changes_nothing(reference_workspace: Path) -> None:
    encrypt_workspace(reference_workspace, _keyring(reference_workspace))
    first = _snapshot(reference_workspace)
    again = encrypt_workspace(reference_workspace, _keyring(reference_workspace))
    assert again.converted == 0 and again.already_done == 0
    assert _snapshot(reference_workspace) == first


def test_crash_after_writing_before_removing_plaintext_is_finished_by_a_rerun(
    reference_workspace: Path,
) -> None:
    folder = reference_workspace / "agents" / "QuantAgent"
    plain = (folder / "MEMORY.md").read_bytes()
    keyring = _keyring(reference_workspace)
    # What a crash between "encrypted copy verified" and "plaintext removed" leaves.
    store = EncryptedAgentStore(folder / "MEMORY.md", lambda: "", keyring=keyring)
    (folder / "MEMORY.md.gmenc").write_bytes(
        store.codec.encode_text(KIND_MEMORY, "MEMORY.md.gmenc", plain.decode())
    )
    report = encrypt_workspace(reference_workspace, keyring)
    assert report.already_done == 1 and report.converted == 1
    assert not (folder / "MEMORY.md").exists()
    assert store.read_memory() == plain.decode()


def test_conflicting_copies_stop_the_run_and_remove_nothing(reference_workspace: Path) -> None:
    folder = reference_workspace / "agents" / "QuantAgent"
    keyring = _keyring(reference_workspace)
    store = EncryptedAgentStore(folder / "MEMORY.md", lambda: "", keyring=keyring)
    other = store.codec.encode_text(KIND_MEMORY, "MEMORY.md.gmenc", "# other text\n")
    (folder / "MEMORY.md.gmenc").write_bytes(other)
    before = _snapshot(reference_workspace)
    with pytest.raises(StorageError, match=r"both .*MEMORY.md and .*MEMORY.md.gmenc exist"):
        encrypt_workspace(reference_workspace, keyring)
    after = _snapshot(reference_workspace)
    assert after["agents/QuantAgent/MEMORY.md"] == before["agents/QuantAgent/MEMORY.md"]


def test_stale_temp_files_are_removed_because_they_may_hold_plaintext(
    reference_workspace: Path,
) -> None:
    folder = reference_workspace / "agents" / "QuantAgent"
    (folder / ".gm-tmp-deadbeef").write_text("plaintext a crashed writer left")
    encrypt_workspace(reference_workspace, _keyring(reference_workspace))
    assert not (folder / ".gm-tmp-deadbeef").exists()


def test_non_utf8_plaintext_is_refused_and_kept(reference_workspace: Path) -> None:
    path = reference_workspace / "agents" / "QuantAgent" / "MEMORY.md"
    path.write_bytes(b"\xff\xfe broken")
    with pytest.raises(StorageError, match="not valid UTF-8"):
        encrypt_workspace(reference_workspace, _keyring(reference_workspace))
    assert path.read_bytes() == b"\xff\xfe broken"
