"""Holds follow lineage: a hold on any subject of a summary keeps it from another's erasure."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from subjects_helpers import (
    STORE_KINDS,
    conversation,
    fail_nth_rewrite,
    governance,
    memory_text,
    readable_text,
)

from governed_memory import FixedClock, Governance
from governed_memory._errors import StorageError
from governed_memory._format import LINEAGE_KEY, parse_memory
from governed_memory._records._holds import HoldRegistry
from governed_memory._subjects import (
    TombstoneStore,
    erase,
    erasure_receipts,
    resume_erasures,
)
from governed_memory._subjects._redact import strip_subject
from governed_memory.testing import RecordingAuditSink

SUMMARY = "[Compressed Memory Summary] H and T-1 discussed the case"


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _holds(gov: Governance) -> HoldRegistry:
    return HoldRegistry(gov.governance_dir, clock=gov.clock, sealing=gov.sealing)


def _mixed(gov: Governance, agent: str = "A") -> None:
    """T-1's conversation: H's and T-1's words, a summary of both, then T-1 alone."""
    conv = conversation(gov, agent, subject_id="T-1")
    conv.add("Human", f"H evidence {agent}", subject_id="H")
    conv.add("Human", f"T-1 words {agent}")
    conv.compact(SUMMARY)
    conv.add("Human", f"T-1 later {agent}")
    conv.store.close()  # type: ignore[union-attr]


def test_a_hold_on_h_keeps_the_summary_of_h_and_t1_from_t1s_erasure(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """Issue 12 #4: `erase --subject T-1` used to replace H's summary by the marker."""
    gov = governance(workspace, clock, kind=kind)
    _mixed(gov)
    hold = _holds(gov).place(subject="H", reason="litigation 7", actor="legal")
    receipt = erase(gov, subject="T-1", reason="request 9")
    records = parse_memory(memory_text(gov, "A")).records
    assert [r.content for r in records] == [SUMMARY]  # kept as it was; T-1's own record gone
    assert records[0].meta[LINEAGE_KEY] == ["H", "T-1"]
    assert receipt.state == "partial" and receipt.blocking_holds == (hold.id,)
    [blocked] = receipt.blocked
    memory = "MEMORY.md.gmenc" if kind == "encrypted" else "MEMORY.md"
    assert (blocked.agent, blocked.file, blocked.summaries) == ("A", f"agents/A/{memory}", 1)
    assert blocked.holds == (hold.id,)
    assert receipt.records == 2 and receipt.summaries == 0  # T-1 later; T-1 words (archive)
    assert receipt.keys_shredded == ()  # the kept summary may be sealed under T-1's keys
    assert "T-1 later" not in readable_text(gov)
    # The tombstone is complete (nothing to resume) and its stored receipt says partial.
    assert TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending() == []
    [stored] = erasure_receipts(gov)
    assert stored.state == "partial" and stored.blocked == receipt.blocked
    assert stored.to_dict()["state"] == "partial"


def test_after_the_release_erasing_again_removes_the_summary(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _mixed(gov)
    registry = _holds(gov)
    hold = registry.place(subject="H", reason="case", actor="legal")
    erase(gov, subject="T-1")
    registry.release(hold_id=hold.id, actor="legal", reason="closed")
    again = erase(gov, subject="T-1")
    assert again.state == "complete" and again.blocked == () and again.summaries == 1
    assert "state" not in again.to_dict() and "blocked" not in again.to_dict()
    assert again.keys_shredded == (("subject",) if kind == "encrypted" else ())
    assert SUMMARY not in readable_text(gov)


def test_a_summary_without_a_held_subject_is_still_removed(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _mixed(gov, "A")
    conv = conversation(gov, "B", subject_id="T-1")
    conv.add("Human", "T-1 and carol", subject_id="carol")
    conv.compact("[Compressed Memory Summary] carol and T-1")
    conv.store.close()  # type: ignore[union-attr]
    _holds(gov).place(subject="H", reason="case", actor="legal")
    receipt = erase(gov, subject="T-1")
    assert [b.agent for b in receipt.blocked] == ["A"]
    assert receipt.summaries == 1  # B's summary (carol, T-1) is not held: replaced by the marker
    assert "carol and T-1" not in readable_text(gov)


def test_an_interrupted_erasure_with_a_held_summary_resumes_with_exact_counts(
    workspace: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _mixed(gov, "A")
    _mixed(gov, "B")
    hold = _holds(gov).place(subject="H", reason="case", actor="legal")
    fail_nth_rewrite(monkeypatch, 2, StorageError("disk full (injected)"))
    with pytest.raises(StorageError, match="injected"):
        erase(gov, subject="T-1")
    monkeypatch.undo()
    [pending] = TombstoneStore(gov.governance_dir, sealing=gov.sealing).pending()
    assert pending.scope.subject == "T-1"
    [receipt] = resume_erasures(gov)
    assert receipt.resumed and receipt.state == "partial"
    assert [(b.agent, b.summaries, b.holds) for b in receipt.blocked] == [
        ("A", 1, (hold.id,)),
        ("B", 1, (hold.id,)),
    ]
    assert receipt.records == 4 and receipt.summaries == 0
    assert "T-1 later" not in readable_text(gov)
    for agent in ("A", "B"):
        assert [r.content for r in parse_memory(memory_text(gov, agent)).records] == [SUMMARY]


def test_a_hold_released_before_the_resume_leaves_nothing_blocked(
    workspace: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The resumed run removes the summary the first run kept: the receipt must not list it."""
    gov = governance(workspace, clock, kind=kind)
    _mixed(gov, "A")
    _mixed(gov, "B")
    registry = _holds(gov)
    hold = registry.place(subject="H", reason="case", actor="legal")
    fail_nth_rewrite(
        monkeypatch, 2, StorageError("disk full (injected)")
    )  # B's memory: A's plan (with its kept summary) is logged
    with pytest.raises(StorageError, match="injected"):
        erase(gov, subject="T-1")
    monkeypatch.undo()
    registry.release(hold_id=hold.id, actor="legal", reason="closed")
    [receipt] = resume_erasures(gov)
    assert receipt.state == "complete" and receipt.blocked == ()
    assert receipt.summaries == 2
    assert receipt.keys_shredded == (("subject",) if kind == "encrypted" else ())
    assert SUMMARY not in readable_text(gov)


def test_a_partial_erasure_is_audited_as_partial_with_the_hold(
    workspace: Path, clock: FixedClock
) -> None:
    sink = RecordingAuditSink()
    gov = Governance(workspace=workspace, clock=clock, audit=sink)
    _mixed(gov)
    hold = _holds(gov).place(subject="H", reason="case", actor="legal")
    erase(gov, subject="T-1")
    [entry] = [e for e in sink.of("erase") if e["outcome"] != "blocked"]
    assert entry["outcome"] == "partial" and entry["holds"] == hold.id


def test_strip_subject_keeps_a_summary_whose_lineage_names_a_held_subject() -> None:
    text = (
        "### System — 2026-11-30T10:00:00\n"
        '<!-- gm {"lineage":["H","T-1"],"subject":"T-1"} -->\n\n'
        "[Compressed Memory Summary] both\n\n---\n\n"
        "### Human — 2026-11-30T10:00:01\n"
        '<!-- gm {"subject":"T-1"} -->\n\n'
        "T-1 alone\n\n---\n\n"
    )
    day = dt.date(2026, 11, 30)
    edit = strip_subject(text, "T-1", erasure_id="e1", day=day, held={"H": ("h-1",)})
    assert edit is not None and edit.changed
    assert (edit.records, edit.summaries, edit.held_summaries, edit.holds) == (1, 0, 1, ("h-1",))
    assert "both" in edit.text and "T-1 alone" not in edit.text
    unheld = strip_subject(text, "T-1", erasure_id="e1", day=day, held={"X": ("h-2",)})
    assert unheld is not None and unheld.summaries == 1 and "both" not in unheld.text
    # The held subject's hold on itself is not "another subject's" hold.
    own = strip_subject(text, "T-1", erasure_id="e1", day=day, held={"T-1": ("h-3",)})
    assert own is not None and own.held_summaries == 0


def test_the_cli_erase_reports_the_kept_summary_and_its_hold(
    workspace: Path, clock: FixedClock
) -> None:
    from click.testing import CliRunner

    from governed_memory._cli import main

    _mixed(governance(workspace, clock))
    runner = CliRunner()
    ws = ["--workspace", str(workspace)]
    placed = runner.invoke(main, [*ws, "hold", "place", "--subject", "H", "--reason", "case"])
    assert placed.exit_code == 0, placed.output
    hold_id = placed.stdout.split()[1]
    result = runner.invoke(main, [*ws, "erase", "--subject", "T-1", "--yes"])
    assert result.exit_code == 0, result.output
    assert "partial: 1 summaries kept" in result.stdout and hold_id in result.stdout
    listed = runner.invoke(main, [*ws, "erasures", "list"])
    assert listed.exit_code == 0 and "partial" in listed.stdout
