"""Subject requests over subject memories (``agents/<agent>/subjects/<p>/``, isolation = "subject").

A subject's records may be in the agent's memory and archives (written before
isolation), in their own subject memory and its archives, and in another
subject's summary whose lineage names them: export, erasure, holds and the
erasure watch find them in all of these, on plaintext and encrypted workspaces.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from subjects_helpers import STORE_KINDS, all_bytes, governance, killed_at_call
from subjects_helpers import subject_block as _block

from governed_memory import FixedClock, Governance, StorageError, parse_memory
from governed_memory._format import ERASED_MARKER_KEY, render_header
from governed_memory._records._holds import HoldRegistry
from governed_memory._stores import AgentStore, isolate_subjects
from governed_memory._subjects import (
    ErasureBlockedError,
    ErasureGuard,
    TombstoneStore,
    erase,
    erasure_receipts,
    export_agent,
    export_subject,
    resume_erasures,
    subject_context,
)

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "export-schema.json").read_text())
ONLY_ALICE = "[Compressed Memory Summary] alice only"
SHARED = "[Compressed Memory Summary] bob and alice"


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _store(gov: Governance, agent: str) -> AgentStore:
    """The agent's own store (opening it creates nothing)."""
    return gov.store_factory(
        gov.workspace / "agents" / agent / "MEMORY.md",
        lambda: render_header(f"{agent}_conv", "2026-11-30T10:00:00"),
    )


def _partition(gov: Governance, agent: str, subject: str) -> str:
    store = _store(gov, agent)
    try:
        partition = store.subject_store(subject).partition
    finally:
        store.close()
    assert partition is not None and subject not in partition
    return partition


def _folder(gov: Governance, agent: str, subject: str) -> Path:
    return gov.workspace / "agents" / agent / "subjects" / _partition(gov, agent, subject)


def _populate(gov: Governance) -> None:
    """A: alice in its archive (before isolation), alice and bob moved to their memories.

    alice's memory: an archive (alice one), then her summary and alice two;
    bob's memory: his record and a summary derived from bob and alice. B holds
    alice in her memory there only.
    """
    a = _store(gov, "A")
    a.append(_block("alice archived", "alice"))
    a.append(_block("shared note"))
    a.compact(None)
    a.append(_block("alice moved", "alice"))
    a.append(_block("bob one", "bob"))
    a.append(_block(SHARED, "bob", ("alice", "bob")))
    assert isolate_subjects(a) == 3
    alice = a.subject_store("alice")
    alice.compact(_block(ONLY_ALICE, "alice", ("alice",)))
    alice.append(_block("alice two", "alice"))
    b = _store(gov, "B")
    b.subject_store("alice").append(_block("alice in B", "alice"))
    for store in (a, alice, b):
        store.close()


def _memories(gov: Governance) -> Iterator[tuple[str, AgentStore]]:
    for folder in sorted((gov.workspace / "agents").iterdir()):
        store = _store(gov, folder.name)
        yield folder.name, store
        yield from ((folder.name, s) for s in store.subject_stores())


def _readable(gov: Governance) -> str:
    """Every byte under the workspace, plus every memory's decrypted text (subject memories too)."""
    parts = [b.decode("utf-8", "replace") for b in all_bytes(gov.workspace).values()]
    for _agent, store in _memories(gov):
        parts.append(store.read_memory() or "")
        parts.extend(store.read_archive(a) for a in store.list_archives())
        store.close()
    return "\n".join(parts)


def _contents(gov: Governance, agent: str, subject: str) -> list[str]:
    store = _store(gov, agent).subject_store(subject)
    try:
        texts = [store.read_archive(a) for a in store.list_archives()] + [store.read_memory()]
        return [r.content for t in texts if t is not None for r in parse_memory(t).records]
    finally:
        store.close()


def _holds(gov: Governance) -> HoldRegistry:
    return HoldRegistry(gov.governance_dir, clock=gov.clock, sealing=gov.sealing)


def _memory_name(kind: str) -> str:
    return "MEMORY.md.gmenc" if kind == "encrypted" else "MEMORY.md"


# -- export ------------------------------------------------------------------


def test_export_finds_the_subjects_records_in_their_memory_and_its_archives(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    export_subject(gov, "alice", tmp_path / "out")
    document = json.loads((tmp_path / "out" / "export.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    records = [(r["agent"], r["source_file"], r["content"]) for r in document["records"]]
    p_a, p_b = _partition(gov, "A", "alice"), _partition(gov, "B", "alice")
    memory = _memory_name(kind)
    [(_, archived, _), (_, alice_archive, _), *rest] = records
    assert archived.startswith("agents/A/archive/history_")
    assert alice_archive.startswith(f"agents/A/subjects/{p_a}/archive/history_")
    assert [c for _, _, c in records] == [
        "alice archived",
        "alice moved",
        "alice two",
        "alice in B",
    ]
    assert rest == [
        ("A", f"agents/A/subjects/{p_a}/{memory}", "alice two"),
        ("B", f"agents/B/subjects/{p_b}/{memory}", "alice in B"),
    ]
    summaries = {s["content"]: s for s in document["summaries"]}
    assert summaries[ONLY_ALICE]["source_file"] == f"agents/A/subjects/{p_a}/{memory}"
    # bob's summary names alice in its lineage: listed, its content withheld.
    withheld = summaries[None]
    p_bob = _partition(gov, "A", "bob")
    assert withheld["source_file"] == f"agents/A/subjects/{p_bob}/{memory}"
    assert withheld["other_subjects"] == 1
    assert document["counts"]["agents"] == 2
    for name in ("export.json", "export.md"):
        assert "bob" not in (tmp_path / "out" / name).read_text(), name


def test_export_of_an_agent_includes_every_subject_memory(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    result = export_agent(gov, "A", tmp_path / "out")
    document = json.loads((tmp_path / "out" / "export.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    contents = {r["content"] for r in document["records"]}
    assert contents == {"alice archived", "shared note", "alice moved", "alice two", "bob one"}
    assert {s["content"] for s in document["summaries"]} == {ONLY_ALICE, SHARED}
    assert result.records == 5


# -- erasure -----------------------------------------------------------------


def test_erasure_deletes_the_subjects_memory_and_cites_its_files(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    folders = [_folder(gov, "A", "alice"), _folder(gov, "B", "alice")]
    alice = _store(gov, "A").subject_store("alice")
    [archive] = alice.list_archives()
    archived = f"agents/A/{alice.source(archive)}"
    receipt = erase(gov, subject="alice")
    assert not any(f.exists() for f in folders)  # no empty folder named after alice
    text = _readable(gov)
    assert "alice archived" not in text and "alice two" not in text and "alice in B" not in text
    assert ONLY_ALICE not in text and SHARED not in text
    assert "bob one" in text and "shared note" in text
    # bob's summary (derived from alice too) is replaced by the marker, in bob's memory.
    bob = parse_memory(_store(gov, "A").subject_store("bob").read_memory() or "").records
    assert bob[0].content == "bob one" and ERASED_MARKER_KEY in bob[1].meta
    assert receipt.records == 4 and receipt.summaries == 2
    assert receipt.agents == ["A", "B"]
    p_a, memory = folders[0].name, _memory_name(kind)
    deleted = {f.file: f for f in receipt.files if f.deleted}
    assert sorted(deleted) == sorted(
        [
            f"agents/A/subjects/{p_a}/{memory}",
            archived,
            f"agents/B/subjects/{folders[1].name}/{memory}",
        ]
    )
    assert archived.startswith(f"agents/A/subjects/{p_a}/archive/history_")
    assert deleted[archived].records == 1  # alice moved
    assert deleted[f"agents/A/subjects/{p_a}/{memory}"].records == 1  # alice two
    assert deleted[f"agents/A/subjects/{p_a}/{memory}"].summaries == 1
    assert all(f.bytes_written == 0 for f in deleted.values())
    assert receipt.keys_shredded == (("subject",) if kind == "encrypted" else ())


def test_erasing_one_subject_leaves_another_subjects_memory_byte_identical(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    alice_a, alice_b = _folder(gov, "A", "alice"), _folder(gov, "B", "alice")
    before = all_bytes(alice_a) | all_bytes(alice_b)
    bob = _folder(gov, "A", "bob")
    receipt = erase(gov, subject="bob")
    assert not bob.exists()
    assert all_bytes(alice_a) | all_bytes(alice_b) == before
    assert receipt.records == 1 and receipt.summaries == 1


def test_erasure_in_one_agent_deletes_the_subjects_memory_there_only(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    in_b = _folder(gov, "B", "alice")
    before = all_bytes(in_b)
    receipt = erase(gov, subject="alice", agent="A")
    assert not _folder(gov, "A", "alice").exists()
    assert all_bytes(in_b) == before
    assert receipt.agents == ["A"] and receipt.records == 3


def test_erasing_an_agent_removes_and_counts_its_subject_memories(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    p_alice, p_bob = _partition(gov, "A", "alice"), _partition(gov, "A", "bob")
    before_b = all_bytes(workspace / "agents" / "B")
    receipt = erase(gov, agent="A")
    assert not (workspace / "agents" / "A").exists()
    assert all_bytes(workspace / "agents" / "B") == before_b
    assert all(f.deleted for f in receipt.files)
    files = {f.file for f in receipt.files}
    assert f"agents/A/subjects/{p_alice}/{_memory_name(kind)}" in files
    assert f"agents/A/subjects/{p_bob}/{_memory_name(kind)}" in files
    assert receipt.records == 5 and receipt.summaries == 2


def test_the_receipt_names_subject_memories_only_by_their_folder_hash(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    receipt = erase(gov, subject="alice")
    assert all("alice" not in f.file for f in receipt.files)
    stored = all_bytes(gov.governance_dir / "tombstones")
    assert [p.name for p in stored] == [f"{receipt.id}.json"]  # progress log and lock gone
    for body in stored.values():
        assert b"alice two" not in body and b"alice only" not in body and b"bob one" not in body
        if kind == "encrypted":  # sealed: neither the id nor the folder hashes are readable
            assert b"alice" not in body and _partition(gov, "A", "alice").encode() not in body


# -- holds -------------------------------------------------------------------


def _h_and_t(gov: Governance) -> None:
    """H's memory: a summary of H and T-1 (H's); T-1's memory: T-1's words and a shared summary."""
    a = _store(gov, "A")
    a.subject_store("H").append(_block("[Compressed Memory Summary] H and T-1", "H", ("H", "T-1")))
    t1 = a.subject_store("T-1")
    t1.append(_block("T-1 words", "T-1"))
    t1.append(_block("[Compressed Memory Summary] T-1 with H", "T-1", ("H", "T-1")))
    a.close()


def test_a_hold_on_h_keeps_summaries_of_h_in_every_subject_memory(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _h_and_t(gov)
    hold = _holds(gov).place(subject="H", reason="litigation", actor="legal")
    h_folder, t_folder = _folder(gov, "A", "H"), _folder(gov, "A", "T-1")
    before = all_bytes(h_folder)
    receipt = erase(gov, subject="T-1")
    assert all_bytes(h_folder) == before  # H's summary, whose lineage names T-1, is held
    assert receipt.state == "partial" and receipt.blocking_holds == (hold.id,)
    memory = _memory_name(kind)
    assert sorted((b.file, b.summaries) for b in receipt.blocked) == sorted(
        [
            (f"agents/A/subjects/{h_folder.name}/{memory}", 1),
            (f"agents/A/subjects/{t_folder.name}/{memory}", 1),
        ]
    )
    # T-1's memory keeps the held summary, so it stays; T-1's own words are gone.
    assert _contents(gov, "A", "T-1") == ["[Compressed Memory Summary] T-1 with H"]
    assert receipt.records == 1 and receipt.keys_shredded == ()
    # Released, the next erasure removes the rest and T-1's folder with it.
    _holds(gov).release(hold_id=hold.id, reason="closed", actor="legal")
    again = erase(gov, subject="T-1")
    assert again.state == "complete" and again.summaries == 2
    assert not t_folder.exists()
    assert [f.deleted for f in again.files if t_folder.name in f.file] == [True]
    assert "T-1 with H" not in _readable(gov) and "H and T-1" not in _readable(gov)


def test_a_hold_on_a_subject_blocks_erasing_an_agent_holding_their_memory(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    _store(gov, "C").subject_store("carol").append(_block("carol only", "carol"))
    _holds(gov).place(subject="carol", reason="case", actor="legal")
    before = all_bytes(workspace)
    with pytest.raises(ErasureBlockedError, match="subject 'carol'"):
        erase(gov, agent="C")
    assert all_bytes(workspace) == before
    erase(gov, agent="A")  # carol has nothing in A


def test_a_hold_on_an_agent_blocks_erasing_a_subject_in_its_subject_memories(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    _store(gov, "C").subject_store("bob").append(_block("bob in C", "bob"))
    _holds(gov).place(agent="C", reason="audit", actor="legal")
    with pytest.raises(ErasureBlockedError, match="agent 'C'"):
        erase(gov, subject="bob")
    assert erase(gov, subject="alice").records == 4  # alice has nothing in C


# -- crashes -----------------------------------------------------------------


def _fail_first_subject_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    from governed_memory._stores import AgentFolderStore

    real = AgentFolderStore.delete

    def flaky(self: AgentFolderStore) -> None:
        if self.partition is not None:
            monkeypatch.setattr(AgentFolderStore, "delete", real)
            raise StorageError("disk gone (injected)")
        real(self)

    monkeypatch.setattr(AgentFolderStore, "delete", flaky)


def test_an_erasure_interrupted_at_a_subject_memory_resumes_with_exact_counts(
    workspace: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    folder = _folder(gov, "A", "alice")
    _fail_first_subject_delete(monkeypatch)
    with pytest.raises(StorageError, match="injected"):
        erase(gov, subject="alice")
    monkeypatch.undo()
    assert folder.exists()
    [receipt] = resume_erasures(gov)
    assert receipt.resumed and receipt.records == 4 and receipt.summaries == 2
    assert not folder.exists() and not _folder(gov, "B", "alice").exists()


def test_the_erasure_watch_finishes_an_erasure_in_the_subject_memories(
    workspace: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    _fail_first_subject_delete(monkeypatch)
    with pytest.raises(StorageError, match="injected"):
        erase(gov, subject="alice")
    monkeypatch.undo()
    ErasureGuard(subject_context(gov), "A").on_open()
    assert TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending() == []
    assert not _folder(gov, "A", "alice").exists()
    assert not _folder(gov, "B", "alice").exists()
    [receipt] = erasure_receipts(gov)
    assert receipt.records == 4


def _erase_in_child_and_kill(gov: Governance, function: str, nth: int) -> None:
    """Fork; the child erases alice and SIGKILLs itself at the ``nth`` call of ``os.<function>``."""
    killed_at_call(function, nth, lambda: erase(gov, subject="alice"))


@pytest.mark.parametrize(
    ("function", "nth"),
    [("fsync", n) for n in range(1, 15)]
    + [("unlink", n) for n in (1, 2, 3)]  # inside the deletion of A's, then B's, alice folder
    + [("rmdir", n) for n in (1, 2, 3)],
)
def test_kill_9_during_an_erasure_of_subject_memories_then_resume(
    workspace: Path, clock: FixedClock, function: str, nth: int, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    folders = [_folder(gov, "A", "alice"), _folder(gov, "B", "alice")]
    _erase_in_child_and_kill(gov, function, nth)
    if not TombstoneStore(gov.governance_dir, sealing=gov.sealing).ids():
        erase(gov, subject="alice")  # killed before the tombstone was durable
    resume_erasures(gov)
    [receipt] = erasure_receipts(gov)
    assert receipt.records == 4 and receipt.summaries == 2
    assert not any(f.exists() for f in folders)
    text = _readable(gov)
    assert "alice two" not in text and "alice in B" not in text and "bob one" in text
