"""Erasure: records, archives, derived summaries, holds, tombstones, live conversations."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from subjects_helpers import (
    STORE_KINDS,
    all_bytes,
    conversation,
    governance,
    killed_at_call,
    memory_text,
    readable_text,
)

from governed_memory import FixedClock, StorageError, parse_memory
from governed_memory._format._lineage import LINEAGE_KEY
from governed_memory._records._holds import HoldRegistry
from governed_memory._subjects import (
    ErasedDuringCompactionError,
    ErasureBlockedError,
    TombstoneStore,
    cancel_scheduled_erasure,
    erase,
    erasure_receipts,
    request_register,
    resume_erasures,
    run_due_erasures,
    schedule_erasure,
)


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Every erasure test runs on a plaintext and on an encrypted workspace."""
    return str(request.param)


def _populate(gov, agents=("A", "B")):  # type: ignore[no-untyped-def]
    """Each agent: alice+bob, compact (summary from both), then alice again, bob alone."""
    for agent in agents:
        conv = conversation(gov, agent)
        conv.add("Human", f"alice secret {agent}-1", subject_id="alice")
        conv.add("Human", f"bob note {agent}-1", subject_id="bob")
        conv.compact(f"[Compressed Memory Summary] mixed summary {agent}")
        conv.add("Human", f"alice secret {agent}-2", subject_id="alice")
        conv.add("Human", f"bob note {agent}-2", subject_id="bob")
        conv.store.close()  # type: ignore[union-attr]


def test_erase_subject_removes_records_from_memory_and_archives_of_every_agent(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    receipt = erase(gov, subject="alice", reason="ticket 7", actor="dpo@example.org")
    text = readable_text(gov)
    assert "alice secret" not in text
    assert "mixed summary" not in text  # derived from alice too
    for agent in ("A", "B"):
        assert f"bob note {agent}-1" in text and f"bob note {agent}-2" in text
    assert receipt.records == 4
    assert receipt.summaries == 2
    assert receipt.agents == ["A", "B"]
    memory = "MEMORY.md.gmenc" if kind == "encrypted" else "MEMORY.md"
    assert {f.file for f in receipt.files} >= {f"agents/A/{memory}", f"agents/B/{memory}"}
    assert receipt.keys_shredded == (("subject",) if kind == "encrypted" else ())
    assert receipt.requested_by == "dpo@example.org" and receipt.reason == "ticket 7"
    assert receipt.policy_id == "default"


def test_removed_summary_leaves_a_marker_record(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov, agents=("A",))
    erase(gov, subject="bob")
    records = parse_memory(memory_text(gov, "A")).records
    marker = records[0]
    assert marker.role == "System"
    assert (
        marker.content == "[Summary removed for erasure on 2026-11-30: earlier context is missing]"
    )
    assert LINEAGE_KEY not in marker.meta
    assert [r.content for r in records[1:]] == ["alice secret A-2"]


def test_other_records_keep_their_exact_bytes(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    conv = conversation(gov, "A")
    conv.add("Human", "keep ### me — exactly\n\n---\n\nplease", subject_id="carol")
    conv.add("Human", "drop me", subject_id="alice")
    conv.add("Human", "keep too", subject_id="carol")
    before = memory_text(gov, "A")
    erase(gov, subject="alice")
    after = memory_text(gov, "A")
    parsed = parse_memory(before)
    expected = parsed.preamble + parsed.records[0].raw + parsed.records[2].raw
    assert after == expected


def test_summary_of_a_summary_inherits_lineage(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    conv = conversation(gov, "A")
    conv.add("Human", "alice early", subject_id="alice")
    conv.compact("[Compressed Memory Summary] first")
    conv.add("Human", "bob later", subject_id="bob")
    conv.compact("[Compressed Memory Summary] second")
    summary = parse_memory(memory_text(gov, "A")).records[0]
    assert summary.meta[LINEAGE_KEY] == ["alice", "bob"]
    assert conv.conversation_history[-1][LINEAGE_KEY] == ["alice", "bob"]


def test_lineage_includes_the_preloaded_records_after_a_restart(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    first = conversation(gov, "A")
    first.add("Human", "alice from yesterday", subject_id="alice")
    first.store.close()  # type: ignore[union-attr]
    second = conversation(gov, "A")
    second.add("Human", "today", subject_id="bob")
    second.compact("[Compressed Memory Summary] both days")
    summary = parse_memory(memory_text(gov, "A")).records[0]
    assert summary.meta[LINEAGE_KEY] == ["alice", "bob"]


def test_default_mode_compaction_writes_no_lineage(workspace: Path, clock: FixedClock) -> None:
    """Without subject ids the summary block is the reference's, byte for byte."""
    from governed_memory import Conversation, memory_md_path

    conv = Conversation(memory_md_path=memory_md_path("A", workspace), clock=clock)
    conv.add("Human", "hello")
    conv.compact("summary")
    assert "<!-- gm" not in (workspace / "agents/A/MEMORY.md").read_text()
    assert LINEAGE_KEY not in conv.conversation_history[-1]


def test_erase_agent_deletes_the_whole_folder_only(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    before_b = all_bytes(workspace / "agents/B")
    receipt = erase(gov, agent="A")
    assert not (workspace / "agents/A").exists()
    assert all_bytes(workspace / "agents/B") == before_b
    assert receipt.agents == ["A"] and all(f.deleted for f in receipt.files)
    assert receipt.records == 4 and receipt.summaries == 1


def test_erase_subject_in_one_agent_leaves_other_agents(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    before_b = all_bytes(workspace / "agents/B")
    receipt = erase(gov, subject="alice", agent="A")
    assert all_bytes(workspace / "agents/B") == before_b
    assert "alice secret A" not in readable_text(gov)
    assert receipt.agents == ["A"]


def test_erase_of_unknown_agent_is_a_clear_error(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    from governed_memory import NotFoundError

    with pytest.raises(NotFoundError, match="agent 'ghost' has no folder"):
        erase(governance(workspace, clock, kind=kind), agent="ghost")


def test_erasure_of_a_subject_without_data_completes_with_zero_counts(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov, agents=("A",))
    before = all_bytes(workspace / "agents")
    receipt = erase(gov, subject="nobody")
    assert receipt.records == 0 and receipt.files == ()
    assert all_bytes(workspace / "agents") == before


def test_receipt_is_stored_and_holds_no_content(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    receipt = erase(gov, subject="alice")
    assert erasure_receipts(gov) == [receipt]
    stored = all_bytes(gov.governance_dir / "tombstones")
    assert [p.name for p in stored] == [f"{receipt.id}.json"]  # progress log and lock gone
    for body in stored.values():
        assert b"secret" not in body and b"mixed" not in body
    if kind == "encrypted":  # sealed: not even the subject id is readable on disk
        assert all(b"alice" not in body for body in stored.values())
    data = TombstoneStore(gov.governance_dir, sealing=gov.sealing).document(receipt.id)
    assert data is not None
    assert data["state"] == "complete" and data["receipt"]["totals"]["records"] == 4
    assert oct((gov.governance_dir / "tombstones").stat().st_mode & 0o777) == "0o700"


# -- legal holds -------------------------------------------------------------


def _holds(gov) -> HoldRegistry:  # type: ignore[no-untyped-def]
    return HoldRegistry(gov.governance_dir, clock=gov.clock, sealing=gov.sealing)


def test_hold_on_subject_blocks_and_names_the_hold(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    hold = _holds(gov).place(subject="alice", reason="litigation 2026-114", actor="legal@bank")
    before = all_bytes(workspace)
    with pytest.raises(ErasureBlockedError) as info:
        erase(gov, subject="alice")
    message = str(info.value)
    assert hold.id in message and "legal@bank" in message and "litigation 2026-114" in message
    after = all_bytes(workspace)
    # Nothing erased, not even a tombstone: only the request register (and, encrypted, its
    # purpose key) records the blocked erasure as a request to follow up.
    register = {
        p
        for p in after
        if p.name.startswith("requests.") or ("keyring" in p.parts and p not in before)
    }
    assert {p: b for p, b in after.items() if p not in register} == {
        p: b for p, b in before.items() if p not in register
    }
    assert not (gov.governance_dir / "tombstones").exists()
    (request,) = request_register(gov).requests()
    assert request.blockers[0].holds == (hold.id,)
    assert info.value.holds[0].id == hold.id


def test_hold_on_an_agent_blocks_erasing_a_subject_it_holds(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    conversation(gov, "C").add("Human", "only bob here", subject_id="bob")
    _holds(gov).place(agent="C", reason="audit", actor="legal")
    with pytest.raises(ErasureBlockedError, match="agent 'C'"):
        erase(gov, subject="bob")
    # alice has nothing in C: the hold does not concern her.
    assert erase(gov, subject="alice").records == 4


def test_hold_on_a_subject_blocks_erasing_an_agent_holding_their_records(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    conversation(gov, "C").add("Human", "carol only", subject_id="carol")
    _holds(gov).place(subject="bob", reason="case", actor="legal")
    with pytest.raises(ErasureBlockedError, match="subject 'bob'"):
        erase(gov, agent="A")
    erase(gov, agent="C")
    assert not (workspace / "agents/C").exists()


def test_released_hold_no_longer_blocks(workspace: Path, clock: FixedClock, kind: str) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    registry = _holds(gov)
    hold = registry.place(subject="alice", reason="case", actor="legal")
    registry.release(hold_id=hold.id, reason="closed", actor="legal")
    assert erase(gov, subject="alice").records == 4


# -- interrupted erasures ----------------------------------------------------


def _fail_second_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    from governed_memory._stores import AgentFolderStore  # both file stores' rewrites

    calls = {"n": 0}
    for method in ("rewrite_memory", "rewrite_archive"):
        real = getattr(AgentFolderStore, method)

        def flaky(self: object, *args: str, real: object = real) -> None:
            calls["n"] += 1
            if calls["n"] == 2:
                raise StorageError("disk full (injected)")
            real(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(AgentFolderStore, method, flaky)


def test_interrupted_erasure_resumes_with_exact_counts(
    workspace: Path,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    _fail_second_rewrite(monkeypatch)
    with pytest.raises(StorageError, match="injected"):
        erase(gov, subject="alice")
    monkeypatch.undo()
    [pending] = TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending()
    assert pending.scope.subject == "alice"
    [receipt] = resume_erasures(gov)
    assert receipt.resumed and receipt.records == 4 and receipt.summaries == 2
    assert "alice secret" not in readable_text(gov)
    assert TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending() == []


def test_opening_an_agent_completes_its_pending_erasure_before_preload(
    workspace: Path,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    _fail_second_rewrite(monkeypatch)
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    monkeypatch.undo()
    conv = conversation(gov, "B")
    assert "alice" not in conv.return_history_as_string()
    assert TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending() == []
    assert "alice secret" not in readable_text(gov)


# -- live conversations ------------------------------------------------------


def test_live_conversation_refuses_a_summary_built_from_erased_messages(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    live = conversation(gov, "A")
    live.add("Human", "alice secret live", subject_id="alice")
    live.add("Human", "bob live", subject_id="bob")
    erase(gov, subject="alice")  # e.g. from another process
    with pytest.raises(ErasedDuringCompactionError):
        live.compact("[Compressed Memory Summary] alice secret live and bob")
    assert "alice secret" not in live.return_history_as_string()
    assert "alice secret" not in readable_text(gov)
    live.compact("[Compressed Memory Summary] bob only")
    summary = parse_memory(memory_text(gov, "A")).records[0]
    assert summary.meta[LINEAGE_KEY] == ["bob"]


def test_drop_erased_reloads_a_clean_preload(workspace: Path, clock: FixedClock, kind: str) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov, agents=("A",))
    live = conversation(gov, "A", system_prompt="You are A.")
    assert "alice secret A-2" in live.return_history_as_string()
    erase(gov, subject="alice")
    assert live.drop_erased() == 1  # the preload message, re-read
    history = live.return_history_as_string()
    assert "alice secret" not in history and "bob note A-2" in history
    assert history.startswith("System: You are A.")
    assert live.drop_erased() == 0
    live.compact("[Compressed Memory Summary] bob")  # nothing erased since: accepted


def test_erasing_a_whole_agent_empties_a_live_conversation(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    live = conversation(gov, "A", system_prompt="sys")
    live.add("Human", "anything", subject_id="carol")
    erase(gov, agent="A")
    with pytest.raises(ErasedDuringCompactionError):
        live.compact("[Compressed Memory Summary] anything")
    assert live.return_history_as_string() == "System: sys"


# -- scheduling ----------------------------------------------------------------


def test_scheduled_erasure_runs_only_when_due(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    item = schedule_erasure(gov, subject="alice", grace="30d", reason="withdrawn")
    now = clock.now()
    assert run_due_erasures(gov, now + dt.timedelta(days=29)) == []
    assert "alice secret" in readable_text(gov)
    [receipt] = run_due_erasures(gov, now + dt.timedelta(days=30, seconds=1))
    assert receipt.id == item.id and receipt.records == 4  # type: ignore[union-attr]
    assert "alice secret" not in readable_text(gov)
    assert TombstoneStore(gov.governance_dir, sealing=gov.sealing).scheduled() == []


def test_cancelled_scheduled_erasure_never_runs(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    from governed_memory import NotFoundError

    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    item = schedule_erasure(gov, subject="alice", grace="1d")
    cancel_scheduled_erasure(gov, item.id)
    assert run_due_erasures(gov, clock.now() + dt.timedelta(days=2)) == []
    with pytest.raises(NotFoundError, match="no scheduled erasure"):
        cancel_scheduled_erasure(gov, item.id)


def test_due_erasure_blocked_by_a_hold_stays_scheduled(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    schedule_erasure(gov, subject="alice", grace="1d")
    _holds(gov).place(subject="alice", reason="case", actor="legal")
    [blocked] = run_due_erasures(gov, clock.now() + dt.timedelta(days=2))
    assert isinstance(blocked, ErasureBlockedError)
    assert len(TombstoneStore(gov.governance_dir, sealing=gov.sealing).scheduled()) == 1


@pytest.mark.parametrize("grace", ["forever", "soon", -5])
def test_bad_grace_is_refused(workspace: Path, clock: FixedClock, grace: object, kind: str) -> None:
    from governed_memory import ConfigurationError

    with pytest.raises(ConfigurationError, match="grace"):
        schedule_erasure(governance(workspace, clock, kind=kind), subject="alice", grace=grace)


def test_scope_needs_a_subject_or_an_agent(workspace: Path, clock: FixedClock, kind: str) -> None:
    from governed_memory import ConfigurationError

    with pytest.raises(ConfigurationError, match="needs a subject, an agent, or both"):
        erase(governance(workspace, clock, kind=kind))


def test_the_purge_scheduler_runs_due_erasures(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    from governed_memory._policy._model import Policy
    from governed_memory._scheduler import PurgeScheduler

    policy = Policy.model_validate({"schedule": {"purge_interval": "1d"}})
    gov = governance(workspace, clock, policy, kind=kind)
    _populate(gov)
    item = schedule_erasure(gov, subject="alice", grace="1h")
    scheduler = PurgeScheduler(gov)
    scheduler.run_once()
    assert "alice secret" in readable_text(gov)  # not due yet
    clock.advance(dt.timedelta(hours=2))
    scheduler.run_once()
    assert "alice secret" not in readable_text(gov)
    assert [r.id for r in erasure_receipts(gov)] == [item.id]


# -- kill -9 during erasure ------------------------------------------------------


def _erase_in_child_and_kill(gov, function: str, nth: int) -> bool:  # type: ignore[no-untyped-def]
    """Fork; the child erases alice and SIGKILLs itself at the ``nth`` call of ``os.<function>``.

    Returns whether the child died by the signal (False: it finished first).
    """
    return killed_at_call(function, nth, lambda: erase(gov, subject="alice"))


@pytest.mark.parametrize(
    ("function", "nth"),
    [("fsync", n) for n in range(1, 17)] + [("replace", n) for n in range(1, 8)],
)
def test_kill_9_at_any_durable_step_then_resume(
    workspace: Path,
    clock: FixedClock,
    function: str,
    nth: int,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    _erase_in_child_and_kill(gov, function, nth)
    if not TombstoneStore(gov.governance_dir, sealing=gov.sealing).ids():
        # Killed before the tombstone was durable: nothing was touched, and
        # the admin (who got no receipt) runs the erasure again.
        assert "alice secret A-1" in readable_text(gov)
        erase(gov, subject="alice")
    # Otherwise the erasure is complete, or pending and resumable.
    resume_erasures(gov)
    [receipt] = erasure_receipts(gov)
    assert receipt.records == 4 and receipt.summaries == 2
    text = readable_text(gov)
    assert "alice secret" not in text and "mixed summary" not in text
    for agent in ("A", "B"):
        assert f"bob note {agent}-1" in text and f"bob note {agent}-2" in text
    # No temporary file with content is left in agent folders (a crashed
    # tombstone temp file in the governance folder holds no content).
    assert not list((gov.workspace / "agents").rglob(".gm-tmp-*"))


def test_kill_9_then_the_next_open_of_the_agent_finishes(
    workspace: Path,
    clock: FixedClock,
    kind: str,
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    assert _erase_in_child_and_kill(gov, "fsync", 6)  # after the tombstone, mid-way
    assert TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending()
    conv = conversation(gov, "A")
    assert "alice" not in conv.return_history_as_string()
    assert TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending() == []
    assert "alice secret" not in readable_text(gov)


def test_opening_an_agent_reads_only_unfinished_erasures(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """Receipts pile up over the years; an agent open must not read them all."""
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    receipt = erase(gov, subject="alice")
    done = gov.governance_dir / "tombstones" / f"{receipt.id}.json"
    done.write_text("not json: an open that parsed every receipt would fail here")
    conv = conversation(gov, "A")
    assert "bob note A-2" in conv.return_history_as_string()


def test_an_agent_with_a_hidden_name_is_exported_and_erased_like_any(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    """'.hidden' is a valid agent name: its records must not escape export and erasure."""
    from governed_memory._subjects import export_subject

    gov = governance(workspace, clock, kind=kind)
    _populate(gov, agents=(".hidden", "A"))
    import json

    export_subject(gov, "alice", tmp_path / "export")
    document = json.loads((tmp_path / "export" / "export.json").read_text(encoding="utf-8"))
    assert {r["agent"] for r in document["records"]} == {".hidden", "A"}
    receipt = erase(gov, subject="alice")
    assert receipt.agents == [".hidden", "A"]
    assert "alice secret .hidden" not in memory_text(gov, ".hidden")
    assert "bob note .hidden-2" in memory_text(gov, ".hidden")
