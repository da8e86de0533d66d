"""encrypt-workspace / decrypt-workspace over subject memories (``agents/<a>/subjects/<p>/``).

Each subject folder's files are converted like the agent's own, and the
folder then takes the name the new mode gives its subject (plaintext: the
unkeyed hash; encrypted: the keyring's keyed reference). A rerun after a
crash at any step finishes the job.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest
from crypto_helpers import make_keyring

from governed_memory import FixedClock, PlaintextAgentStore, memory_md_path, parse_memory
from governed_memory._crypto import SUBJECT
from governed_memory._crypto._keyring import Keyring
from governed_memory._errors import StorageError
from governed_memory._format._records import render_block, render_header
from governed_memory._keys import _migration
from governed_memory._keys._migration import decrypt_workspace, encrypt_workspace
from governed_memory._stores import plain_partition_name
from governed_memory._stores._encrypted import EncryptedAgentStore

SUBJECTS = ("alice", "bob")


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject else None
    return render_block("Human", "2026-11-30T10:00:01", text, meta)


def _populate(workspace: Path) -> None:
    """Two agents, each with its own memory and an archive, and two subject memories."""
    import datetime as dt

    for agent in ("A", "B"):
        clock = FixedClock(dt.datetime(2026, 11, 30, 10), tick=dt.timedelta(seconds=1))
        store = PlaintextAgentStore(memory_md_path(agent, workspace), _header, clock=clock)
        store.append(_block(f"{agent} shared"))
        for subject in SUBJECTS:
            mine = store.subject_store(subject)
            mine.append(_block(f"{agent} {subject} one", subject))
            mine.compact(_block(f"{agent} {subject} summary", subject))
            mine.append(_block(f"{agent} {subject} two", subject))
            mine.close()
        store.close()


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".governed_memory" not in p.parts
    }


def _keyring(workspace: Path) -> Keyring:
    return make_keyring(workspace / ".governed_memory" / "keyring")


def _texts(store: EncryptedAgentStore | PlaintextAgentStore) -> list[str]:
    return [store.read_archive(a) for a in store.list_archives()] + [store.read_memory() or ""]


def _plain_contents(workspace: Path) -> dict[tuple[str, str | None], list[str]]:
    out: dict[tuple[str, str | None], list[str]] = {}
    for agent in ("A", "B"):
        store = PlaintextAgentStore(memory_md_path(agent, workspace), _header)
        out[(agent, None)] = _texts(store)
        for subject in SUBJECTS:
            out[(agent, subject)] = _texts(store.subject_store(subject))
    return out


def _encrypted_contents(
    workspace: Path, keyring: Keyring
) -> dict[tuple[str, str | None], list[str]]:
    out: dict[tuple[str, str | None], list[str]] = {}
    for agent in ("A", "B"):
        store = EncryptedAgentStore(memory_md_path(agent, workspace), _header, keyring=keyring)
        out[(agent, None)] = _texts(store)
        for subject in SUBJECTS:
            out[(agent, subject)] = _texts(store.subject_store(subject))
    return out


def _subject_folders(workspace: Path, agent: str) -> list[str]:
    return sorted(p.name for p in (workspace / "agents" / agent / "subjects").iterdir())


def test_encrypt_converts_subject_memories_and_renames_their_folders(workspace: Path) -> None:
    _populate(workspace)
    before = _plain_contents(workspace)
    keyring = _keyring(workspace)
    report = encrypt_workspace(workspace, keyring)
    assert report.subjects == 4 and report.renamed == 4
    assert report.converted == 2 * (1 + 2 * 2)  # per agent: its memory, 2 subjects x 2 files
    for agent in ("A", "B"):
        assert _subject_folders(workspace, agent) == sorted(
            keyring.ref(SUBJECT, s).hex() for s in SUBJECTS
        )
        for name in _subject_folders(workspace, agent):
            files = _snapshot(workspace / "agents" / agent / "subjects" / name)
            assert files and all(f.endswith(".gmenc") for f in files)
    assert _encrypted_contents(workspace, keyring) == before
    for data in _snapshot(workspace).values():
        assert b"alice" not in data and b"shared" not in data


def test_decrypt_gives_back_the_plaintext_subject_folders_byte_for_byte(workspace: Path) -> None:
    _populate(workspace)
    original = _snapshot(workspace)
    encrypt_workspace(workspace, _keyring(workspace))
    report = decrypt_workspace(workspace, _keyring(workspace))
    assert report.subjects == 4 and report.renamed == 4
    assert _snapshot(workspace) == original
    for agent in ("A", "B"):
        assert _subject_folders(workspace, agent) == sorted(
            plain_partition_name(s) for s in SUBJECTS
        )


def test_running_twice_changes_nothing_in_subject_folders(workspace: Path) -> None:
    _populate(workspace)
    encrypt_workspace(workspace, _keyring(workspace))
    first = _snapshot(workspace)
    again = encrypt_workspace(workspace, _keyring(workspace))
    assert (again.converted, again.renamed, again.subjects) == (0, 0, 0)
    assert _snapshot(workspace) == first


def test_a_subject_folder_naming_no_subject_keeps_its_name(workspace: Path) -> None:
    folder = workspace / "agents" / "A" / "subjects" / ("0" * 32)
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text(_header() + _block("no subject here"))
    report = encrypt_workspace(workspace, _keyring(workspace))
    assert report.converted == 1 and report.renamed == 0
    assert sorted(os.listdir(folder)) == ["MEMORY.md.gmenc"]


def test_a_subject_folder_with_two_subjects_stops_the_run_and_changes_nothing_there(
    workspace: Path,
) -> None:
    folder = workspace / "agents" / "A" / "subjects" / plain_partition_name("alice")
    folder.mkdir(parents=True)
    text = _header() + _block("a", "alice") + _block("b", "bob")
    (folder / "MEMORY.md").write_text(text)
    with pytest.raises(StorageError, match=r"holds records of 2 data subjects"):
        encrypt_workspace(workspace, _keyring(workspace))
    assert sorted(os.listdir(folder)) == ["MEMORY.md"]
    assert (folder / "MEMORY.md").read_text() == text


def test_a_full_folder_under_the_new_name_stops_the_run(workspace: Path) -> None:
    _populate(workspace)
    keyring = _keyring(workspace)
    # alice's memory in both modes at once: the encrypted one is never overwritten.
    agent = EncryptedAgentStore(memory_md_path("A", workspace), _header, keyring=keyring)
    other = agent.subject_store("alice")
    other.append(_block("written encrypted meanwhile", "alice"))
    other.close()
    taken = _snapshot(other.folder)
    with pytest.raises(StorageError, match=r"cannot rename subject folder .* the same subject"):
        encrypt_workspace(workspace, keyring)
    assert _snapshot(other.folder) == taken


class _Crash(BaseException):
    """Stands for kill -9: nothing after it runs (no ``except`` catches it)."""


# The file steps go through the store (relative to the agent folder's descriptor),
# the folder rename through the migration's own helper.
_STEPS = (
    (EncryptedAgentStore, "write_file"),
    (EncryptedAgentStore, "remove_file"),
    (_migration, "_rename_folder"),
)


def _count_steps(monkeypatch: pytest.MonkeyPatch, limit: int | None) -> list[int]:
    """Count (and with ``limit``, crash at) each write, unlink+fsync and rename+fsync step."""
    calls = [0]
    for owner, name in _STEPS:
        real = getattr(owner, name)

        def step(*args: object, real: object = real) -> None:
            calls[0] += 1
            if limit is not None and calls[0] == limit:
                raise _Crash
            real(*args)  # type: ignore[operator]

        monkeypatch.setattr(owner, name, step)
    return calls


@pytest.mark.parametrize("direction", ["encrypt", "decrypt"])
def test_a_crash_at_any_step_is_finished_by_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direction: str
) -> None:
    """Every step of the conversion (file written; source removed; folder renamed) is a
    possible kill point; after each, a rerun leaves exactly what an uninterrupted run does."""
    base = tmp_path / "base"
    base.mkdir()
    _populate(base)
    plain, contents = _snapshot(base), _plain_contents(base)
    keyring = _keyring(base)
    keyring.ref(SUBJECT, "warm-up", create=True)  # the index key exists before the copies
    if direction == "decrypt":
        encrypt_workspace(base, keyring)
    run = encrypt_workspace if direction == "encrypt" else decrypt_workspace

    def expected(root: Path) -> object:
        if direction == "encrypt":
            return (_encrypted_contents(root, _keyring(root)), _listing(root))
        return _snapshot(root)

    clean = tmp_path / "clean"
    shutil.copytree(base, clean)
    calls = _count_steps(monkeypatch, None)
    run(clean, _keyring(clean))
    total = calls[0]
    monkeypatch.undo()
    assert total >= 20
    want = expected(clean)
    if direction == "encrypt":
        assert _encrypted_contents(clean, _keyring(clean)) == contents
    else:
        assert _snapshot(clean) == plain
    for limit in range(1, total + 1):
        root = tmp_path / f"crash-{limit}"
        shutil.copytree(base, root)
        _count_steps(monkeypatch, limit)
        with pytest.raises(_Crash):
            run(root, _keyring(root))
        monkeypatch.undo()
        run(root, _keyring(root))
        assert expected(root) == want, f"crash at step {limit} of {total}"
        shutil.rmtree(root)


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "agents").rglob("*"))


def test_kill9_during_encrypt_and_decrypt_is_finished_by_a_rerun(tmp_path: Path) -> None:
    """A real SIGKILL at a random moment, many times over, in both directions."""
    rng = random.Random(7)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _populate(workspace)
    original = _snapshot(workspace)
    contents = _plain_contents(workspace)
    interrupted = 0
    for round_ in range(12):
        run = encrypt_workspace if round_ % 2 == 0 else decrypt_workspace
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            code = 0
            try:
                run(workspace, _keyring(workspace))
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        time.sleep(rng.uniform(0, 0.03))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        interrupted += os.WIFSIGNALED(status)
        run(workspace, _keyring(workspace))
        if run is encrypt_workspace:
            assert _encrypted_contents(workspace, _keyring(workspace)) == contents
        else:
            assert _snapshot(workspace) == original
    assert interrupted >= 3  # the kills did land mid-run


def test_encrypted_subject_memories_read_back_through_the_subject_store(workspace: Path) -> None:
    _populate(workspace)
    keyring = _keyring(workspace)
    encrypt_workspace(workspace, keyring)
    store = EncryptedAgentStore(memory_md_path("A", workspace), _header, keyring=keyring)
    alice = store.subject_store("alice")
    assert [r.content for r in parse_memory(alice.read_memory() or "").records] == [
        "A alice summary",
        "A alice two",
    ]
    assert [s.partition for s in store.subject_stores()] == sorted(
        keyring.ref(SUBJECT, s).hex() for s in SUBJECTS
    )
