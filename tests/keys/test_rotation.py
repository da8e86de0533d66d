"""Key rotation: re-wrapping under a new master key and re-encrypting under fresh data keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crypto_helpers import make_keyring

from governed_memory import memory_md_path
from governed_memory._crypto._frames import scan
from governed_memory._crypto._keyring import Keyring
from governed_memory._crypto._providers import KeyChain, KeyProvider, LocalKeyProvider
from governed_memory._errors import KeyUnavailableError
from governed_memory._format._records import render_block, render_header
from governed_memory._keys._rotation import REENCRYPT_FILE, rotate
from governed_memory._stores._encrypted import EncryptedAgentStore

OLD = LocalKeyProvider(bytes(range(32)))
NEW = LocalKeyProvider(bytes(range(1, 33)))


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _block(text: str, subject: str | None = None) -> str:
    return render_block(
        "User", "2026-11-30T10:00:01", text, {"subject": subject} if subject else None
    )


def _store(workspace: Path, keyring: Keyring, agent: str) -> EncryptedAgentStore:
    return EncryptedAgentStore(memory_md_path(agent, workspace), _header, keyring=keyring)


def _populate(workspace: Path, keyring: Keyring) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = {}
    for agent in ("A", "B", "C"):
        store = _store(workspace, keyring, agent)
        for i in range(3):
            store.append(_block(f"{agent} message {i}", f"subject-{i}"))
        store.compact(_block(f"{agent} summary"))
        store.append(_block(f"{agent} after", "subject-0"))
        store.close()
        texts[agent] = _texts(workspace, keyring, agent)
    return texts


def _texts(workspace: Path, keyring: Keyring, agent: str) -> list[str]:
    store = _store(workspace, keyring, agent)
    return [store.read_memory() or ""] + [store.read_archive(p) for p in store.list_archives()]


def _wrapped_by(keyring: Keyring) -> set[str]:
    ids = {json.loads((keyring.folder / "keyring.json").read_bytes())["index_key"]["wrapped_by"]}
    for _, entry in keyring.entries():
        ids.update(w["wrapped_by"] for w in entry.keys.values())
    return ids


def test_rotation_rewraps_everything_and_loses_nothing(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    texts = _populate(workspace, make_keyring(folder, OLD))
    report = rotate(workspace, make_keyring(folder, KeyChain(NEW, OLD)))
    assert report.rewrapped == 1 + 3 + 3  # index key, three agents, three subjects
    assert report.from_key_ids == [OLD.key_id] and report.to_key_id == NEW.key_id
    only_new = make_keyring(folder, NEW)
    assert _wrapped_by(only_new) == {NEW.key_id}
    for agent, expected in texts.items():
        assert _texts(workspace, only_new, agent) == expected
    with pytest.raises(KeyUnavailableError):
        _texts(workspace, make_keyring(folder, OLD), "A")


def test_rotation_without_the_old_key_names_it_and_changes_nothing(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    _populate(workspace, make_keyring(folder, OLD))
    before = {p: p.read_bytes() for p in folder.rglob("*.json")}
    with pytest.raises(KeyUnavailableError, match=OLD.key_id):
        rotate(workspace, make_keyring(folder, NEW))
    assert {p: p.read_bytes() for p in folder.rglob("*.json")} == before


class FailingAfter:
    """A provider that fails (like a crash or a network error) after ``n`` wraps."""

    def __init__(self, inner: KeyProvider, n: int) -> None:
        self.inner, self.left = inner, n

    @property
    def key_id(self) -> str:
        return self.inner.key_id

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        if self.left <= 0:
            raise KeyUnavailableError("the key service went away")
        self.left -= 1
        return self.inner.wrap(data_key, context)

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes) -> bytes:
        return self.inner.unwrap(key_id, wrapped, context)


def test_interrupted_rotation_resumes(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    texts = _populate(workspace, make_keyring(folder, OLD))
    with pytest.raises(KeyUnavailableError):
        rotate(workspace, make_keyring(folder, KeyChain(FailingAfter(NEW, 3), OLD)))
    assert _wrapped_by(make_keyring(folder, OLD)) == {OLD.key_id, NEW.key_id}
    report = rotate(workspace, make_keyring(folder, KeyChain(NEW, OLD)))
    assert report.rewrapped == 7 - 3 and report.already_current == 3
    for agent, expected in texts.items():
        assert _texts(workspace, make_keyring(folder, NEW), agent) == expected


def _generations(workspace: Path) -> set[tuple[int, int]]:
    gens = set()
    for path in workspace.rglob("*.gmenc"):
        for frame in scan(path.read_bytes(), path).frames:
            gens.add((frame.key.agent_gen, frame.key.subject_gen))
    return gens


def test_reencrypt_moves_all_data_to_fresh_keys_and_retires_the_old(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    texts = _populate(workspace, make_keyring(folder, OLD))
    assert _generations(workspace) == {(1, 0), (1, 1)}
    keyring = make_keyring(folder, KeyChain(NEW, OLD))
    report = rotate(workspace, keyring, reencrypt_data=True)
    assert report.new_generations == 6 and report.generations_retired == 6
    assert report.files_reencrypted == 6  # a memory and an archive per agent
    assert _generations(workspace) == {(2, 0), (2, 2)}
    assert not (folder / REENCRYPT_FILE).exists()
    for _, entry in keyring.entries():
        assert sorted(entry.keys) == [2]
    for agent, expected in texts.items():
        assert _texts(workspace, make_keyring(folder, NEW), agent) == expected


def test_interrupted_reencryption_resumes(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    texts = _populate(workspace, make_keyring(folder, OLD))
    import governed_memory._keys._rotation as rotation

    real = rotation._reencrypt_agent
    calls = {"n": 0}

    def crash_on_second(*args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyUnavailableError("interrupted")
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rotation, "_reencrypt_agent", crash_on_second)
    with pytest.raises(KeyUnavailableError):
        rotate(workspace, make_keyring(folder, KeyChain(NEW, OLD)), reencrypt_data=True)
    assert (folder / REENCRYPT_FILE).exists()
    monkeypatch.setattr(rotation, "_reencrypt_agent", real)
    # Resumed by a plain rotate: the plan on disk says a re-encryption is pending.
    report = rotate(workspace, make_keyring(folder, NEW))
    assert report.new_generations == 0
    assert _generations(workspace) == {(2, 0), (2, 2)}
    for agent, expected in texts.items():
        assert _texts(workspace, make_keyring(folder, NEW), agent) == expected


def test_reencrypt_drops_frames_of_shredded_subjects(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    keyring = make_keyring(folder, OLD)
    store = _store(workspace, keyring, "A")
    store.append(_block("keep"))
    store.append(_block("erase me", "gone"))
    keyring.shred_subject("gone")
    report = rotate(workspace, make_keyring(folder, OLD), reencrypt_data=True)
    assert report.frames_dropped == 1
    data = store.memory_path.read_bytes()
    assert len(scan(data, None).frames) == 2  # header + "keep"


def test_a_live_store_keeps_writing_readable_frames_across_a_reencryption(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    live = _store(workspace, make_keyring(folder, OLD), "A")
    live.append(_block("before", "s"))  # remembers generation 1 of both keys
    rotate(workspace, make_keyring(folder, KeyChain(NEW, OLD)), reencrypt_data=True)
    live.keyring.provider = KeyChain(NEW, OLD)  # the process was restarted with both keys
    live.append(_block("after", "s"))
    assert _generations(workspace) == {(2, 0), (2, 2)}  # nothing under a retired generation
    fresh = _store(workspace, make_keyring(folder, NEW), "A")
    assert fresh.read_memory() == _header() + _block("before", "s") + _block("after", "s")


def _subject_texts(workspace: Path, keyring: Keyring) -> dict[str, list[str]]:
    store = _store(workspace, keyring, "A")
    return {
        str(s.partition): [s.read_memory() or ""] + [s.read_archive(a) for a in s.list_archives()]
        for s in store.subject_stores()
    }


def test_reencrypt_moves_subject_memories_to_fresh_keys_too(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "keyring"
    keyring = make_keyring(folder, OLD)
    agent = _store(workspace, keyring, "A")
    agent.append(_block("shared"))
    for subject in ("alice", "bob"):
        mine = agent.subject_store(subject)
        mine.append(_block(f"{subject} one", subject))
        mine.compact(_block(f"{subject} summary", subject))
        mine.close()
    agent.close()
    texts = _subject_texts(workspace, keyring)
    assert len(texts) == 2
    report = rotate(workspace, make_keyring(folder, KeyChain(NEW, OLD)), reencrypt_data=True)
    assert report.files_reencrypted == 1 + 2 * 2  # the agent's memory; each subject's two files
    assert _generations(workspace) == {(2, 0), (2, 2)}  # no frame left under a retired key
    assert _subject_texts(workspace, make_keyring(folder, NEW)) == texts


def test_a_reencryption_interrupted_inside_a_subject_memory_resumes(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import governed_memory._keys._rotation as rotation

    folder = workspace / ".governed_memory" / "keyring"
    keyring = make_keyring(folder, OLD)
    agent = _store(workspace, keyring, "A")
    agent.append(_block("shared"))
    for subject in ("alice", "bob"):
        mine = agent.subject_store(subject)
        mine.append(_block(f"{subject} one", subject))
        mine.close()
    agent.close()
    texts = _subject_texts(workspace, keyring)
    real = rotation._reencrypt_store
    calls = {"n": 0}

    def crash_in_the_second_subject(*args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # the agent's own, alice's or bob's first, then this one
            raise KeyUnavailableError("interrupted")
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rotation, "_reencrypt_store", crash_in_the_second_subject)
    with pytest.raises(KeyUnavailableError):
        rotate(workspace, make_keyring(folder, KeyChain(NEW, OLD)), reencrypt_data=True)
    monkeypatch.setattr(rotation, "_reencrypt_store", real)
    rotate(workspace, make_keyring(folder, NEW))  # the plan on disk resumes it
    assert _generations(workspace) == {(2, 0), (2, 2)}
    assert _subject_texts(workspace, make_keyring(folder, NEW)) == texts
