"""Keyring entries are authenticated under the master key: an edited entry is refused, not used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from crypto_helpers import TEST_MASTER_KEY, make_keyring

from governed_memory import memory_md_path
from governed_memory._crypto._keyring import AGENT, SUBJECT, Keyring
from governed_memory._crypto._providers import KeyChain, LocalKeyProvider
from governed_memory._errors import DecryptionError, IntegrityError
from governed_memory._format._records import render_block, render_header
from governed_memory._keys._rotation import rotate
from governed_memory._stores._encrypted import EncryptedAgentStore

UNTAGGED = Path(__file__).parents[1] / "fixtures" / "encryption-v1-untagged"
HEADER = render_header("conv", "2026-11-30T10:00:00")
TAMPERED = r"keyring entry .*{name} was changed outside governed_memory: .*{why}.*Restore"


def block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject else None
    return render_block("User", "2026-11-30T10:00:01", text, meta)


def store(workspace: Path, keyring: Keyring, agent: str = "A") -> EncryptedAgentStore:
    return EncryptedAgentStore(memory_md_path(agent, workspace), lambda: HEADER, keyring=keyring)


def keyring_folder(workspace: Path) -> Path:
    return workspace / ".governed_memory" / "keyring"


def populated(workspace: Path) -> Keyring:
    keyring = make_keyring(keyring_folder(workspace))
    writer = store(workspace, keyring)
    writer.append(block("remember this", "customer-42"))
    writer.append(block("and this"))
    writer.close()
    return keyring


def entry_file(keyring: Keyring, kind: str, name: str) -> Path:
    return keyring.entry_path(keyring.ref(kind, name))


def edit(path: Path, **changes: object) -> None:
    doc = json.loads(path.read_bytes())
    doc.update(changes)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def test_an_entry_edited_into_a_shredded_one_is_refused_and_nothing_is_overwritten(
    workspace: Path,
) -> None:
    """Issue 13: the memory read back empty and the next add replaced MEMORY.md.gmenc."""
    keyring = populated(workspace)
    path = entry_file(keyring, AGENT, "A")
    doc = json.loads(path.read_bytes())
    edit(path, keys={}, shredded_through=doc["current"], shredded_at="2026-12-01T00:00:00")
    memory = memory_md_path("A", workspace).with_name("MEMORY.md.gmenc")
    before = memory.read_bytes()
    fresh = make_keyring(keyring_folder(workspace))
    expected = TAMPERED.format(name=path.name, why="tag does not match")
    with pytest.raises(IntegrityError, match=expected):
        store(workspace, fresh).read_memory()
    with pytest.raises(IntegrityError, match=expected):
        store(workspace, fresh).append(block("new"))
    assert memory.read_bytes() == before
    assert json.loads(path.read_bytes())["keys"] == {}  # the edited entry is left for inspection


def test_an_entry_whose_tag_was_removed_is_refused(workspace: Path) -> None:
    keyring = populated(workspace)
    path = entry_file(keyring, SUBJECT, "customer-42")
    doc = json.loads(path.read_bytes())
    del doc["tag"]
    path.write_text(json.dumps(doc))
    with pytest.raises(IntegrityError, match=TAMPERED.format(name=path.name, why="no auth")):
        store(workspace, make_keyring(keyring_folder(workspace))).read_memory()


def test_turning_the_keyring_back_into_the_untagged_format_breaks_its_index_key(
    workspace: Path,
) -> None:
    """The format that allows untagged entries is bound to the wrapped index key."""
    keyring = populated(workspace)
    path = entry_file(keyring, AGENT, "A")
    doc = json.loads(path.read_bytes())
    del doc["tag"]
    doc.update(keys={}, shredded_through=doc["current"])
    path.write_text(json.dumps(doc))
    edit(keyring_folder(workspace) / "keyring.json", format=1)
    with pytest.raises(DecryptionError, match=r"keyring\.json"):
        store(workspace, make_keyring(keyring_folder(workspace))).read_memory()


def test_an_entry_copied_over_another_ones_file_is_refused(workspace: Path) -> None:
    keyring = populated(workspace)
    agent = entry_file(keyring, AGENT, "A")
    shutil.copyfile(entry_file(keyring, SUBJECT, "customer-42"), agent)
    with pytest.raises(IntegrityError, match=TAMPERED.format(name=agent.name, why="another key")):
        store(workspace, make_keyring(keyring_folder(workspace))).read_memory()


def test_a_rotation_refuses_a_tampered_entry_and_changes_nothing(workspace: Path) -> None:
    keyring = populated(workspace)
    path = entry_file(keyring, AGENT, "A")
    edit(path, current=7)
    folder = keyring_folder(workspace)
    before = {p: p.read_bytes() for p in folder.rglob("*.json")}
    new = LocalKeyProvider(bytes(range(1, 33)))
    chain = KeyChain(new, LocalKeyProvider(TEST_MASTER_KEY))
    with pytest.raises(IntegrityError, match=path.name):
        rotate(workspace, make_keyring(folder, chain))
    after = {p: p.read_bytes() for p in folder.rglob("*.json")}
    assert {p: b for p, b in after.items() if p.name != "keyring.json"} == {
        p: b for p, b in before.items() if p.name != "keyring.json"
    }  # (the index key, checked first, may already be re-wrapped: resumable)


def test_a_rotation_re_authenticates_the_entries_it_rewraps(workspace: Path) -> None:
    populated(workspace)
    folder = keyring_folder(workspace)
    new = LocalKeyProvider(bytes(range(1, 33)))
    rotate(workspace, make_keyring(folder, KeyChain(new, LocalKeyProvider(TEST_MASTER_KEY))))
    only_new = make_keyring(folder, new)
    assert len(only_new.entries()) == 2  # every tag checks under the re-wrapped index key
    assert store(workspace, only_new).read_memory() is not None


def untagged_copy(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(UNTAGGED, tmp_path / "copy")
    return tmp_path / "copy" / "workspace", tmp_path / "copy" / "keyring"


def kat_store(workspace: Path, folder: Path) -> EncryptedAgentStore:
    keyring = Keyring(folder, LocalKeyProvider(TEST_MASTER_KEY))
    return EncryptedAgentStore(memory_md_path("KatAgent", workspace), lambda: "", keyring=keyring)


def test_a_keyring_from_before_tags_reads_and_its_first_change_migrates_it(tmp_path: Path) -> None:
    workspace, folder = untagged_copy(tmp_path)
    text = kat_store(workspace, folder).read_memory()
    assert text and "Thanks" in text
    assert (
        json.loads((folder / "keyring.json").read_bytes())["format"] == 1
    )  # a read changes nothing
    kat_store(workspace, folder).append(block("after the upgrade", "customer-7"))  # a new key
    assert json.loads((folder / "keyring.json").read_bytes())["format"] == 2
    entries = [json.loads(p.read_bytes()) for p in (folder / "keys").iterdir()]
    assert len(entries) == 3 and all("tag" in e for e in entries)
    after = kat_store(workspace, folder).read_memory()
    assert after is not None and after.startswith(text) and "after the upgrade" in after


def test_a_rotation_migrates_a_keyring_from_before_tags(tmp_path: Path) -> None:
    workspace, folder = untagged_copy(tmp_path)
    keyring = Keyring(folder, LocalKeyProvider(TEST_MASTER_KEY))
    rotate(workspace, keyring)  # the same master key: nothing to re-wrap, but tags to add
    assert json.loads((folder / "keyring.json").read_bytes())["format"] == 2
    path = next((folder / "keys").iterdir())
    edit(path, shredded_through=5)
    with pytest.raises(IntegrityError, match=path.name):
        Keyring(folder, LocalKeyProvider(TEST_MASTER_KEY)).entries()
