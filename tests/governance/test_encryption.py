"""From settings and policy to an encrypted workspace (governed_memory/_encryption.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from crypto_helpers import TEST_MASTER_KEY

from governed_memory import Conversation, Governance, memory_md_path
from governed_memory._crypto import (
    InMemoryKeyProvider,
    KeyChain,
    LocalKeyProvider,
    generate_master_key,
)
from governed_memory._errors import ConfigurationError, KeyProviderError
from governed_memory._governance._encryption import default_keyring_dir, key_provider, open_keyring
from governed_memory._governance._storage import open_storage
from governed_memory._policy._model import Policy
from governed_memory._policy._settings import Settings

ENCRYPTED = Policy.model_validate({"encryption": {"enabled": True}})


def _key_file(path: Path, text: str | None = None) -> Path:
    path.write_text((text or generate_master_key()) + "\n")
    os.chmod(path, 0o600)
    return path


def test_master_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = generate_master_key()
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", text)
    provider = key_provider(Settings())
    assert provider.key_id == LocalKeyProvider.from_base64(text).key_id


def test_master_key_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY_FILE", str(_key_file(tmp_path / "k")))
    assert key_provider(Settings()).key_id.startswith("local:")


def test_no_master_key_says_how_to_configure_one() -> None:
    with pytest.raises(KeyProviderError, match=r"GOVERNED_MEMORY_MASTER_KEY .*keys generate"):
        key_provider(Settings())


def test_both_master_key_forms_are_refused(tmp_path: Path) -> None:
    settings = Settings(master_key=generate_master_key(), master_key_file=_key_file(tmp_path / "k"))
    with pytest.raises(KeyProviderError, match="set only one"):
        key_provider(settings)


def test_old_master_key_is_chained_for_unwrapping(tmp_path: Path) -> None:
    settings = Settings(master_key=generate_master_key(), master_key_old=generate_master_key())
    provider = key_provider(settings)
    assert isinstance(provider, KeyChain) and len(provider.previous) == 1


def test_keyring_folder_defaults_into_the_governance_folder_or_follows_the_setting(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    settings = Settings(master_key=generate_master_key())
    assert (
        open_keyring(open_storage(settings, Policy(), ws), settings).folder
        == default_keyring_dir(ws)
        == ws / ".governed_memory" / "keyring"
    )
    moved = Settings(master_key=generate_master_key(), keyring_dir=tmp_path / "keys")
    assert open_keyring(open_storage(moved, Policy(), ws), moved).folder == tmp_path / "keys"


def test_governance_builds_encrypted_stores_when_the_policy_says_so(workspace: Path) -> None:
    gov = Governance(workspace=workspace, policy=ENCRYPTED, key_provider=InMemoryKeyProvider())
    conv = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    conv.add("User", "hello", subject_id="s")
    folder = workspace / "agents" / "A"
    assert [p.name for p in folder.iterdir()] == ["MEMORY.md.gmenc"]
    again = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    assert "hello" in again.conversation_history[-1]["content"]


def test_governance_reads_the_master_key_from_settings(workspace: Path) -> None:
    settings = Settings(master_key=generate_master_key())
    gov = Governance(workspace=workspace, policy=ENCRYPTED, settings=settings)
    Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov).add(
        "User", "x"
    )
    assert (workspace / "agents" / "A" / "MEMORY.md.gmenc").exists()


def test_encrypted_memory_is_refused_when_encryption_is_off(workspace: Path) -> None:
    gov = Governance(
        workspace=workspace, policy=ENCRYPTED, key_provider=LocalKeyProvider(TEST_MASTER_KEY)
    )
    Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov).add(
        "User", "x"
    )
    plain = Governance(workspace=workspace, policy=Policy())
    with pytest.raises(ConfigurationError, match="decrypt-workspace"):
        Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=plain)


def test_keyring_is_the_key_shredder_erasure_uses(workspace: Path) -> None:
    gov = Governance(workspace=workspace, policy=ENCRYPTED, key_provider=InMemoryKeyProvider())
    conv = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    conv.add("User", "about s", subject_id="s")
    gov.keyring.shred_subject("s")
    again = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    assert all("about s" not in str(m["content"]) for m in again.conversation_history)


def test_erasing_a_subject_crypto_shreds_copies_taken_before(tmp_path: Path) -> None:
    """With the keyring outside the workspace, a backup of the workspace loses the subject too."""
    import shutil

    from governed_memory._stores._encrypted import EncryptedAgentStore
    from governed_memory._subjects import erase

    workspace = tmp_path / "ws"
    settings = Settings(master_key=generate_master_key(), keyring_dir=tmp_path / "keyring")
    gov = Governance(workspace=workspace, policy=ENCRYPTED, settings=settings)
    conv = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    conv.add("User", "alice's diagnosis", subject_id="alice")
    conv.add("User", "bob's note", subject_id="bob")
    backup = tmp_path / "backup"
    shutil.copytree(workspace, backup)

    receipt = erase(gov, subject="alice")
    assert receipt.keys_shredded == ("subject",)

    restored = EncryptedAgentStore(memory_md_path("A", backup), lambda: "", keyring=gov.keyring)
    text = restored.read_memory() or ""
    assert "bob's note" in text and "alice" not in text


def test_threads_sharing_a_governance_get_one_keyring(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The configured policy's Governance is shared by every thread: its keyring is built once."""
    import threading

    from governed_memory._governance import _encryption

    built: list[object] = []
    real = _encryption.open_keyring
    barrier = threading.Barrier(8)

    def counting_open(*args: Any, **kwargs: Any) -> Any:
        keyring = real(*args, **kwargs)
        built.append(keyring)
        return keyring

    monkeypatch.setattr(_encryption, "open_keyring", counting_open)
    gov = Governance(workspace=workspace, policy=ENCRYPTED, key_provider=InMemoryKeyProvider())
    seen: list[object] = []

    def use() -> None:
        barrier.wait(5)
        seen.append(gov.keyring)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(built) == 1
    assert len(seen) == 8 and all(k is built[0] for k in seen)
