"""Requests under subject isolation read the subject's memory, not every subject's (the lineage index).

Each agent's ``subjects/.gm-lineage.json`` lists the subject memories that
may hold another subject's data. With it, export and erasure of S read the
agent's own files, S's memory and the listed ones; without it, every memory,
and the erasure that walked them all writes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS, fail_nth_rewrite, governance
from subjects_helpers import subject_block as _block

from governed_memory import FixedClock, Governance
from governed_memory._format import render_header
from governed_memory._stores import LINEAGE_INDEX, AgentFolderStore, isolate_subjects
from governed_memory._subjects import erase, export_subject, resume_erasures

SHARED = "[Compressed Memory Summary] bob and alice"


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _store(gov: Governance, agent: str = "A") -> AgentFolderStore:
    store = gov.store_factory(
        gov.workspace / "agents" / agent / "MEMORY.md",
        lambda: render_header(f"{agent}_conv", "2026-11-30T10:00:00"),
    )
    assert isinstance(store, AgentFolderStore)
    return store


def _memories(gov: Governance, subjects: tuple[str, ...]) -> dict[str, Path]:
    """Agent A with one memory per subject; each subject's folder."""
    store = _store(gov)
    folders = {}
    for subject in subjects:
        memory = store.subject_store(subject)
        memory.append(_block(f"{subject} secret", subject))
        folders[subject] = memory.folder
        memory.close()
    store.close()
    return folders


def _damage(folder: Path) -> None:
    path = next(folder.glob("MEMORY.md*"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if path.suffix == ".md" else 60] ^= 0xFF
    path.write_bytes(bytes(data))


def test_the_first_erasure_reads_every_memory_and_writes_the_index(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _memories(gov, ("alice", "bob", "carol"))
    store = _store(gov)
    assert store.lineage_index() is None
    erase(gov, subject="alice")
    assert store.lineage_index() == frozenset()  # bob's and carol's hold only their own data
    assert (workspace / "agents" / "A" / "subjects" / LINEAGE_INDEX).stat().st_mode & 0o777 == 0o600
    store.close()


def test_with_the_index_an_erasure_never_reads_another_subjects_memory(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """bob's damaged memory would make the erasure pending if it were read; it is not."""
    gov = governance(workspace, clock, kind=kind)
    folders = _memories(gov, ("alice", "bob", "carol"))
    erase(gov, subject="alice")  # walks everything, writes the index
    _damage(folders["bob"])
    before = {p: p.read_bytes() for p in folders["bob"].rglob("*") if p.is_file()}
    receipt = erase(gov, subject="carol")
    assert receipt.state == "complete" and not folders["carol"].exists()
    assert {p: p.read_bytes() for p in folders["bob"].rglob("*") if p.is_file()} == before


def test_with_the_index_an_export_never_reads_another_subjects_memory(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = governance(workspace, clock, kind=kind)
    folders = _memories(gov, ("alice", "bob", "carol"))
    erase(gov, subject="alice")
    _damage(folders["bob"])
    result = export_subject(gov, "carol", tmp_path / "out")
    assert result.records == 1


def test_a_damaged_index_means_every_memory_is_read(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    folders = _memories(gov, ("alice", "bob", "carol"))
    erase(gov, subject="alice")
    (workspace / "agents" / "A" / "subjects" / LINEAGE_INDEX).write_text("{not json")
    _damage(folders["bob"])
    with pytest.raises(Exception, match="is pending"):
        erase(gov, subject="carol")  # bob's memory is read again, and cannot be
    assert not folders["carol"].exists()


def test_isolating_a_shared_summary_lists_its_memory_so_both_subjects_find_it(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    """A summary of bob's naming alice, moved to bob's memory after the index exists."""
    gov = governance(workspace, clock, kind=kind)
    _memories(gov, ("carol",))
    store = _store(gov)
    store.write_lineage_index([])
    store.append(_block("alice one", "alice"))
    store.append(_block(SHARED, "bob", ("alice", "bob")))
    assert isolate_subjects(store) == 2
    bob = store.subject_store("bob")
    assert store.lineage_index() == {bob.partition}
    exported = export_subject(gov, "alice", tmp_path / "out")
    assert (exported.records, exported.summaries) == (1, 1)
    receipt = erase(gov, subject="alice")
    assert receipt.summaries == 1
    text = bob.read_memory() or ""
    assert SHARED not in text and "Summary removed for erasure" in text
    bob.close()
    store.close()


def test_note_mixed_lineage_writes_nothing_without_an_index(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _memories(gov, ("alice",))
    store = _store(gov)
    store.note_mixed_lineage("0" * 32)
    assert store.lineage_index() is None
    store.write_lineage_index(["1" * 32])
    store.note_mixed_lineage("0" * 32)
    assert store.lineage_index() == {"0" * 32, "1" * 32}
    store.close()


def test_an_erasure_of_many_agents_killed_between_batches_resumes_with_exact_counts(
    workspace: Path, clock: FixedClock, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents go in batches; a failure in the second batch leaves the first erased and logged."""
    from governed_memory._subjects import _batches

    monkeypatch.setattr(_batches, "BATCH", 2)
    gov = governance(workspace, clock, kind=kind)
    for agent in ("A", "B", "C"):
        store = _store(gov, agent)
        store.append(_block(f"alice in {agent}", "alice"))
        store.append(_block(f"bob in {agent}", "bob"))
        store.close()
    fail_nth_rewrite(monkeypatch, 3, OSError("disk full (injected)"))
    with pytest.raises(Exception, match="is pending"):
        erase(gov, subject="alice")
    monkeypatch.undo()
    [receipt] = resume_erasures(gov)
    assert receipt.resumed and receipt.records == 3
    assert sorted(f.agent for f in receipt.files) == ["A", "B", "C"]


def test_with_the_index_links_are_looked_for_where_the_erasure_reads(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    """A link in carol's folder stops carol's erasure there; one in bob's does not."""
    gov = governance(workspace, clock, kind=kind)
    folders = _memories(gov, ("alice", "bob", "carol", "dave"))
    erase(gov, subject="alice")  # writes the index
    outside = tmp_path / "outside"
    outside.mkdir()
    (folders["bob"] / "archive").symlink_to(outside, target_is_directory=True)
    assert erase(gov, subject="dave").state == "complete"
    (folders["carol"] / "archive").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Exception, match="a symbolic link"):
        erase(gov, subject="carol")
    assert folders["carol"].exists()  # untouched until the link is resolved
