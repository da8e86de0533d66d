"""Failures stay local (issue 13, findings 1, 2 and 7).

A damaged file, a symbolic link or a crashed compaction's temporary file in
one agent: the other agents are erased, opened and exported as before; the
erasure stays pending with the agent, file, error and fix; it resumes once
the cause is fixed; nothing is ever reported complete while data survives.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import shutil
from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS, conversation, memory_text, readable_text
from unreadable_helpers import damage, gov_of, link_agent, populate, source, tombs

from governed_memory import FixedClock, Governance, StorageError
from governed_memory._policy._model import Policy
from governed_memory._subjects import (
    PendingErasure,
    erase,
    erasure_receipts,
    pending_erasure,
    resume_erasures,
    run_due_erasures,
    schedule_erasure,
    scheduled_erasure_task,
)
from governed_memory.testing import RecordingAuditSink


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- a damaged file ------------------------------------------------------------


def test_a_damaged_agent_does_not_stop_the_others_and_the_erasure_stays_pending(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov)
    damage(gov, "A")
    with pytest.raises(StorageError, match=f"agent 'A', {source(gov, 'A')}"):
        erase(gov, subject="alice")
    for agent in ("B", "C"):
        text = memory_text(gov, agent)
        assert "alice secret" not in text and f"bob note {agent}" in text
    assert len(tombs(gov).pending()) == 1
    assert erasure_receipts(gov) == []


def test_the_pending_erasure_names_agent_file_error_and_fix_and_is_audited(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    sink = RecordingAuditSink()
    gov = gov_of(workspace, clock, kind, audit=sink)
    populate(gov)
    damage(gov, "A")
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    [tombstone] = tombs(gov).pending()
    found = pending_erasure(gov, tombstone.id)
    assert found is not None
    [item] = found.unfinished
    assert (item.agent, item.file) == ("A", source(gov, "A"))
    assert item.error in ("IntegrityError", "DecryptionError", "StorageError")
    assert "backup" in item.fix or "fix the cause" in item.fix
    [entry] = [e for e in sink.records if e["operation"] == "erase"]
    assert entry["outcome"] == "error" and entry["agents"] == ["A"]
    assert entry["pending"] is True and entry["agents_done"] == 2


def test_other_agents_open_while_one_agent_is_damaged(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """Opening B (or a new agent) completes only its own part; A's file never fails it."""
    gov = gov_of(workspace, clock, kind)
    populate(gov)
    damage(gov, "A")
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    conv = conversation(gov, "B")
    history = conv.return_history_as_string()
    assert "bob note B" in history and "alice" not in history
    conversation(gov, "NEW").add("Human", "hello")
    assert len(tombs(gov).pending()) == 1  # A is still to do


def test_the_damaged_agents_own_open_fails_clearly_and_preloads_nothing(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov)
    damage(gov, "A")
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    with pytest.raises(StorageError, match=r"agent 'A' cannot be opened.*erasure .* is pending"):
        conversation(gov, "A")


def test_the_erasure_resumes_once_the_file_is_fixed(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov)
    path, good = damage(gov, "A")
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    with pytest.raises(StorageError, match="is pending"):
        resume_erasures(gov)  # still damaged: still pending, said again
    path.write_bytes(good)  # restored from a backup
    [receipt] = resume_erasures(gov)
    assert receipt.state == "complete" and receipt.resumed
    assert receipt.agents == ["A", "B", "C"] and receipt.records == 3
    assert receipt.keys_shredded == (("subject",) if kind == "encrypted" else ())
    assert "alice secret" not in readable_text(gov)
    assert tombs(gov).pending() == []


def test_run_due_runs_every_due_erasure_when_one_fails(
    workspace: Path, clock: FixedClock, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    gov = gov_of(workspace, clock, kind)
    for agent, subject in (("A", "alice"), ("B", "bob"), ("C", "alice")):
        conv = conversation(gov, agent)
        conv.add("Human", f"{subject} secret {agent}", subject_id=subject)
        conv.store.close()  # type: ignore[union-attr]
    schedule_erasure(gov, subject="alice", grace="1d")
    schedule_erasure(gov, subject="bob", agent="B", grace="1d")
    damage(gov, "A")
    gov.clock = FixedClock(clock.now() + dt.timedelta(days=2))
    with caplog.at_level(logging.INFO, logger="governed_memory"):
        results = scheduled_erasure_task(gov)  # the scheduler's job: never raises for one
    pending = [r for r in results if isinstance(r, PendingErasure)]
    done = [r for r in results if not isinstance(r, PendingErasure)]
    assert [(p.scope.subject, p.agents) for p in pending] == [("alice", ["A"])]
    assert [r.scope.subject for r in done] == ["bob"]  # type: ignore[union-attr]
    assert "bob secret" not in memory_text(gov, "B")
    assert "alice secret" not in memory_text(gov, "C")
    assert "is pending" in caplog.text and "alice" not in caplog.text
    assert tombs(gov).scheduled() == []  # the pending tombstone carries alice's on
    again = run_due_erasures(gov)  # the next run tries it again
    assert [type(r) for r in again] == [PendingErasure]


# -- symbolic links --------------------------------------------------------------


def test_a_linked_agent_folder_leaves_the_erasure_pending_instead_of_complete(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "Evil"))
    outside = link_agent(gov, tmp_path)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    with pytest.raises(StorageError, match="agent 'Evil', agents/Evil: a symbolic link"):
        erase(gov, subject="alice")
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before  # not followed
    assert "alice secret" not in memory_text(gov, "A")
    [tombstone] = tombs(gov).pending()
    found = pending_erasure(gov, tombstone.id)
    assert found is not None
    [item] = found.unfinished
    assert (item.agent, item.file, item.error) == ("Evil", "agents/Evil", "SymbolicLink")
    assert "replace the link" in item.fix
    # Fixed: the real folder back in place, and the erasure finishes.
    (workspace / "agents" / "Evil").unlink()
    shutil.move(outside, workspace / "agents" / "Evil")
    [receipt] = resume_erasures(gov)
    assert receipt.agents == ["A", "Evil"]
    assert "alice secret" not in readable_text(gov)


def test_erase_of_a_linked_agent_is_refused_and_leaves_no_tombstone(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "Evil"))
    outside = link_agent(gov, tmp_path)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    for subject in (None, "alice"):
        with pytest.raises(
            StorageError, match=r"agents/Evil is a symbolic link.*nothing was erased"
        ):
            erase(gov, agent="Evil", subject=subject)
    assert tombs(gov).ids() == []
    assert (workspace / "agents" / "Evil").is_symlink()
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before


def test_a_link_inside_an_agent_leaves_that_agent_untouched_and_the_rest_erased(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "B"))
    conv = conversation(gov, "A")
    conv.compact("[Compressed Memory Summary] alice and bob")
    conv.store.close()  # type: ignore[union-attr]
    archive = workspace / "agents" / "A" / "archive"
    outside = tmp_path / "outside-archive"
    shutil.move(archive, outside)
    archive.symlink_to(outside, target_is_directory=True)
    with pytest.raises(StorageError, match="agents/A/archive: a symbolic link"):
        erase(gov, subject="alice")
    assert "alice secret" not in memory_text(gov, "B")
    [tombstone] = tombs(gov).pending()
    found = pending_erasure(gov, tombstone.id)
    assert found is not None and found.agents == ["A"]


# -- temporary files (finding 7) ----------------------------------------------


def test_erasure_removes_every_temporary_file_in_the_agents_folders(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """A crashed compaction's ``.gm-tmp-*`` holding the subject's text goes, wherever it is."""
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "B"))
    planted = [
        workspace / "agents" / "A" / ".gm-tmp-memory",
        workspace / "agents" / "A" / "archive" / ".gm-tmp-compaction",
        workspace / "agents" / "A" / "subjects" / ".gm-tmp-x",
        workspace / "agents" / "A" / "subjects" / ("0" * 32) / ".gm-tmp-y",
        workspace / "agents" / "A" / "subjects" / ("0" * 32) / "archive" / ".gm-tmp-z",
    ]
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("### Human\n\nalice secret A (an old memory)\n")
    erase(gov, subject="alice")
    assert [p for p in planted if p.exists()] == []
    assert not list((workspace / "agents").rglob(".gm-tmp-*"))
    assert "alice secret" not in readable_text(gov)


# -- subject memories (isolation = "subject") --------------------------------


def _subject_memories(gov: Governance) -> dict[str, Path]:
    """A holds alice's, bob's and carol's memories, B alice's; the folders of A's, by subject."""
    from governed_memory._format import render_block, render_header

    folders = {}
    for agent, subjects in (("A", ("alice", "bob", "carol")), ("B", ("alice",))):
        store = gov.store_factory(
            gov.workspace / "agents" / agent / "MEMORY.md",
            lambda agent=agent: render_header(f"{agent}_conv", "2026-11-30T10:00:00"),
        )
        for subject in subjects:
            memory = store.subject_store(subject)
            memory.append(
                render_block(
                    "Human",
                    "2026-11-30T10:00:00",
                    f"{subject} secret {agent}",
                    {"subject": subject},
                )
            )
            if agent == "A":
                folders[subject] = memory.folder  # type: ignore[attr-defined]
            memory.close()
        store.close()
    return folders


def test_a_damaged_subject_memory_leaves_the_agents_other_memories_erased(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = gov_of(workspace, clock, kind)
    folders = _subject_memories(gov)
    bob = next(folders["bob"].glob("MEMORY.md*"))
    data = bytearray(bob.read_bytes())
    if bob.suffix == ".gmenc":
        data[60] ^= 1
    else:
        data[len(data) // 2] = 0xFF
    bob.write_bytes(bytes(data))
    planted = folders["carol"] / "archive" / ".gm-tmp-old"
    planted.parent.mkdir()
    planted.write_text("alice secret A (a compaction killed at the link step)")
    with pytest.raises(StorageError, match="is pending") as info:
        erase(gov, subject="alice")
    assert bob.relative_to(workspace).as_posix() in str(info.value)
    assert not folders["alice"].exists()  # A's memory of alice went all the same
    assert not planted.exists()
    assert not (workspace / "agents" / "B" / "subjects").exists() or not any(
        (workspace / "agents" / "B" / "subjects").iterdir()
    )
    [tombstone] = tombs(gov).pending()
    found = pending_erasure(gov, tombstone.id)
    assert found is not None
    assert [(u.agent, u.file) for u in found.unfinished] == [
        ("A", bob.relative_to(workspace).as_posix())
    ]


def test_the_audit_log_names_the_agents_left_by_keyed_hash_never_raw(
    workspace: Path, clock: FixedClock
) -> None:
    from governed_memory import Settings
    from governed_memory._audit import audit_key_from_settings, audit_log_dir, iter_entries

    policy = Policy.model_validate({"audit": {"enabled": True}})
    gov = Governance(
        workspace=workspace, policy=policy, clock=clock, settings=Settings(audit_key="ab" * 32)
    )
    populate(gov)
    damage(gov, "A")
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    key = audit_key_from_settings(gov.settings)
    assert key is not None
    [entry] = [e for e in iter_entries(audit_log_dir(gov.policy, workspace)) if e.event == "erase"]
    assert entry.attrs["outcome"] == "error" and entry.attrs["pending"] is True
    assert entry.attrs["agent.hashes"] == [key.pseudonym("agent", "A")]
    assert entry.attrs["error.type"] == "StorageError" and entry.attrs["unfinished"] == 1
    assert '"A"' not in json.dumps(entry.attrs) and "alice" not in json.dumps(entry.attrs)


def test_erasing_a_whole_damaged_agent_deletes_it_all_the_same(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """The whole agent was asked for: an unreadable file goes too (its counts are 0, unknown)."""
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "B"))
    path, good = damage(gov, "A")  # one byte changed: the same size
    receipt = erase(gov, agent="A")
    assert receipt.state == "complete" and not (workspace / "agents" / "A").exists()
    [removal] = receipt.files
    assert removal.file == path.relative_to(workspace).as_posix() and removal.deleted
    assert (removal.records, removal.bytes_removed) == (0, len(good))
    assert receipt.keys_shredded == (("agent",) if kind == "encrypted" else ())
    assert "bob note B" in memory_text(gov, "B")
