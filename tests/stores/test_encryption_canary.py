"""No plaintext reaches disk: unique strings in every kind of content, then every byte is scanned."""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path

import pytest

from governed_memory import Conversation, Governance, memory_md_path
from governed_memory._crypto import KeyChain, LocalKeyProvider, generate_master_key
from governed_memory._keys._migration import encrypt_workspace
from governed_memory._keys._rotation import rotate
from governed_memory._policy._model import Policy
from governed_memory._policy._settings import Settings
from governed_memory._stores import PlaintextAgentStore

ENCRYPTED = Policy.model_validate({"encryption": {"enabled": True}})


def _canary(kind: str) -> str:
    return f"CANARY-{kind}-{secrets.token_hex(6)}"


def _every_file(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def test_no_canary_reaches_the_workspace_or_the_temp_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert tempfile.gettempdir() == str(tmpdir)
    workspace, keyring_dir = tmp_path / "ws", tmp_path / "keyring"

    canaries = {
        kind: _canary(kind)
        for kind in (
            "conversation",
            "user-message",
            "bot-message",
            "role",
            "subject",
            "summary",
            "second-summary",
            "dict-content",
            "rewritten",
            "migrated",
            "migrated-archive",
            "migrated-subject",
        )
    }

    # A plaintext agent written before encryption was enabled, then migrated.
    old = PlaintextAgentStore(
        memory_md_path("Legacy", workspace),
        lambda: (
            f"# Agent Memory\n\n**Conversation:** {canaries['migrated']}\n\n---\n\n## Interaction Log\n\n"
        ),
    )
    old.append(
        f'### User — 2026-11-30T09:00:00\n<!-- gm {{"subject":"{canaries["migrated-subject"]}"}} -->\n\n{canaries["migrated"]}\n\n---\n\n'
    )
    old.compact(f"### System — 2026-11-30T09:00:01\n\n{canaries['migrated-archive']}\n\n---\n\n")
    old.close()

    # The scan finds plaintext when there is some (a control for the scan itself).
    assert any(canaries["migrated"].encode() in p.read_bytes() for p in _every_file(workspace))

    key = generate_master_key()
    settings = Settings(master_key=key, keyring_dir=keyring_dir)
    encrypt_workspace(
        workspace, Governance(workspace=workspace, policy=ENCRYPTED, settings=settings).keyring
    )

    gov = Governance(workspace=workspace, policy=ENCRYPTED, settings=settings)
    conv = Conversation(
        name=canaries["conversation"],
        time_enabled=True,
        memory_md_path=memory_md_path("Agent", workspace),
        governance=gov,
    )
    conv.add("User", canaries["user-message"], subject_id=canaries["subject"])
    conv.add(canaries["role"], canaries["bot-message"])
    conv.add("Tool Executor", {"result": canaries["dict-content"]}, subject_id=canaries["subject"])
    conv.compact(canaries["summary"])  # archives the messages above
    conv.add("User", canaries["user-message"] + " again", subject_id=canaries["subject"])
    conv.compact(canaries["second-summary"])
    again = Conversation(
        name="x", memory_md_path=memory_md_path("Agent", workspace), governance=gov
    )
    assert canaries["second-summary"] in again.conversation_history[-1]["content"]
    store = again.store
    assert store is not None
    archive = store.list_archives()[0]
    assert canaries["user-message"] in store.read_archive(archive)
    store.rewrite_archive(archive, store.read_archive(archive) + canaries["rewritten"])

    # Rotation and re-encryption write keyring files and re-encrypted copies.
    new_key = generate_master_key()
    rotated = Governance(
        workspace=workspace,
        policy=ENCRYPTED,
        settings=settings,
        key_provider=KeyChain(
            LocalKeyProvider.from_base64(new_key), LocalKeyProvider.from_base64(key)
        ),
    )
    rotate(workspace, rotated.keyring, reencrypt_data=True)

    files = _every_file(workspace, keyring_dir, tmpdir)
    assert len(files) >= 8
    for path in files:
        data = path.read_bytes()
        for kind, canary in canaries.items():
            assert canary.encode() not in data, f"{kind} found in plaintext in {path}"
        assert b"Agent Memory" not in data, f"markdown header in {path}"
        assert not path.name.endswith(".md"), path
    # And it all still reads back.
    final = Governance(
        workspace=workspace,
        policy=ENCRYPTED,
        settings=Settings(master_key=new_key, keyring_dir=keyring_dir),
    )
    reopened = Conversation(
        name="x", memory_md_path=memory_md_path("Legacy", workspace), governance=final
    )
    assert canaries["migrated-archive"] in reopened.conversation_history[-1]["content"]
