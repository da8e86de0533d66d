"""Requests through the register: closing with receipts, where each stands, audit, follow-ups.

Follow-ups: an erasure a legal hold blocks, one a file it cannot reach
leaves pending, and one a consent withdrawal starts become requests in the
register with their reason, and the erasure's receipt closes them.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest
from subjects_helpers import conversation

from governed_memory import (
    ConfigurationError,
    FixedClock,
    Governance,
    NotFoundError,
    Policy,
    Settings,
)
from governed_memory._errors import ErasureBlockedError
from governed_memory._subjects import (
    close_request,
    erase,
    extend_request,
    open_request,
    request_register,
    run_due_erasures,
    schedule_erasure,
    standing,
    standings,
    verify_request,
)
from governed_memory.testing import RecordingAuditSink

T0 = dt.datetime(2027, 1, 31, 10, 0)
AUDIT_KEY = "ab" * 32


def gov_with(workspace: Path, now: dt.datetime = T0, **sections: Any) -> Governance:
    policy = Policy.model_validate({"policy": {"id": "office", "version": "2"}, **sections})
    return Governance(
        workspace=workspace,
        policy=policy,
        settings=Settings(),
        clock=FixedClock(now),
        audit=RecordingAuditSink(),
    )


def sink(gov: Governance) -> RecordingAuditSink:
    inner: Any = gov.audit
    return inner._inner if hasattr(inner, "_inner") else inner  # the PolicyLoadSink's


def held(gov: Governance, subject: str = "alice") -> str:
    from governed_memory._records import HoldRegistry

    return (
        HoldRegistry(gov.governance_dir, clock=gov.clock)
        .place(subject=subject, reason="litigation 2027-4", actor="legal")
        .id
    )


def verified(gov: Governance, subject: str = "alice", kind: str = "erasure") -> str:
    request = open_request(gov, subject=subject, kind=kind, received="2027-01-31", actor="dpo")
    verify_request(gov, request.id, by="dpo", method="id document")
    return request.id


# -- closing with the receipt that answered --------------------------------------------


def test_an_erasure_request_closes_with_its_erasure_receipt(workspace: Path) -> None:
    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "alice's note", subject_id="alice")
    request_id = verified(gov)
    receipt = erase(gov, subject="alice", reason="DSR-1", actor="dpo")
    closed = close_request(gov, request_id, actor="dpo", receipt=receipt.id)
    assert closed.closing is not None and closed.closing.receipt == receipt.id
    assert closed.closing.outcome == "answered"


def test_a_receipt_of_another_kind_or_subject_or_unknown_is_refused(workspace: Path) -> None:
    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "bob's note", subject_id="bob")
    bob = erase(gov, subject="bob", reason="DSR-2", actor="dpo")
    access = verified(gov, kind="access")
    with pytest.raises(ConfigurationError, match=r"is an erasure receipt.*access request"):
        close_request(gov, access, actor="dpo", receipt=bob.id)
    mine = verified(gov)
    with pytest.raises(ConfigurationError, match="not about the subject of request"):
        close_request(gov, mine, actor="dpo", receipt=bob.id)
    with pytest.raises(NotFoundError, match="no receipt 'nope'"):
        close_request(gov, mine, actor="dpo", receipt="nope")
    with pytest.raises(ConfigurationError, match="answered by an erasure receipt; give --receipt"):
        close_request(gov, mine, actor="dpo")
    assert request_register(gov).get(mine).open


def test_an_access_request_closes_with_its_exports_receipt(workspace: Path, tmp_path: Path) -> None:
    from governed_memory import export_subject

    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "alice's note", subject_id="alice")
    conversation(gov, "A").add("Human", "bob's note", subject_id="bob")
    alice = export_subject(gov, "alice", tmp_path / "alice", actor="dpo")
    bob = export_subject(gov, "bob", tmp_path / "bob", actor="dpo")
    request_id = verified(gov, kind="access")
    erasure = verified(gov)
    with pytest.raises(ConfigurationError, match=r"is an export receipt.*erasure request"):
        close_request(gov, erasure, actor="dpo", receipt=alice.id)
    closed = close_request(gov, request_id, actor="dpo", receipt=alice.id)
    assert closed.closing is not None and closed.closing.receipt == alice.id
    assert bob.id != alice.id


def test_a_rectification_request_closes_with_its_rectification_receipt(workspace: Path) -> None:
    from governed_memory import rectify, subject_records

    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "born 1970-01-01", subject_id="alice")
    [record] = subject_records(gov, "alice")
    receipt = rectify(gov, subject="alice", record=record.id, text="born 1971-01-01", actor="dpo")
    request_id = verified(gov, kind="rectification")
    bobs = verified(gov, subject="bob", kind="rectification")
    with pytest.raises(ConfigurationError, match="not about the subject of request"):
        close_request(gov, bobs, actor="dpo", receipt=receipt.id)
    closed = close_request(gov, request_id, actor="dpo", receipt=receipt.id)
    assert closed.closing is not None and closed.closing.receipt == receipt.id


def test_a_partial_erasure_closes_a_request_only_as_partial(workspace: Path) -> None:
    gov = gov_with(workspace, memory={"isolation": "agent"})
    conv = conversation(gov, "A")
    conv.add("Human", "alice here", subject_id="alice")
    conv.add("Human", "hal here", subject_id="hal")
    conv.compact("a summary of alice and hal")
    held(gov, "hal")
    receipt = erase(gov, subject="alice", reason="DSR-3", actor="dpo")
    assert receipt.state == "partial"
    request_id = verified(gov)
    with pytest.raises(ConfigurationError, match=r"is partial \(held by hold-.*--outcome partial"):
        close_request(gov, request_id, actor="dpo", receipt=receipt.id)
    closed = close_request(
        gov, request_id, actor="dpo", receipt=receipt.id, outcome="partial", reason="held summary"
    )
    assert closed.closing is not None and closed.closing.outcome == "partial"


def test_restriction_and_refusals_close_without_a_receipt(workspace: Path) -> None:
    gov = gov_with(workspace)
    restriction = verified(gov, kind="restriction")
    done = close_request(gov, restriction, actor="dpo", reason="consent 'summarize' withdrawn")
    assert done.closing is not None and done.closing.outcome == "answered"
    access = open_request(gov, subject="bob", kind="access", received="2027-01-30", actor="dpo")
    refused = close_request(
        gov, access.id, actor="dpo", outcome="refused", reason="identity not proven"
    )
    assert refused.closing is not None and refused.closing.reason == "identity not proven"


# -- where a request stands ------------------------------------------------------------


@pytest.mark.parametrize(
    ("today", "state", "days_left"),
    [
        (dt.date(2027, 1, 31), "open", 21),  # internal deadline 21 February
        (dt.date(2027, 2, 14), "due_soon", 7),
        (dt.date(2027, 2, 21), "due_soon", 0),
        (dt.date(2027, 2, 22), "late", -1),  # past the internal deadline
        (dt.date(2027, 2, 28), "late", -7),  # the legal due date
        (dt.date(2027, 3, 1), "overdue", -8),
    ],
)
def test_where_a_request_stands_under_an_internal_deadline(
    workspace: Path, today: dt.date, state: str, days_left: int
) -> None:
    gov = gov_with(workspace)
    request = open_request(gov, subject="c", kind="access", received="2027-01-31", actor="dpo")
    found = standing(
        request, today, internal=dt.timedelta(days=21), warn_within=dt.timedelta(days=7)
    )
    assert (found.state, found.days_left) == (state, days_left)
    assert found.deadline == dt.date(2027, 2, 21) and request.due == dt.date(2027, 2, 28)


def test_an_extension_moves_both_deadlines_and_a_closed_request_stands_closed(
    workspace: Path,
) -> None:
    gov = gov_with(workspace, requests={"internal_deadline": "21d"})
    request_id = verified(gov, kind="access")
    extend_request(gov, request_id, months=1, reason="complex", actor="dpo")
    gov.clock = FixedClock(dt.datetime(2027, 3, 20, 9, 0))
    (found,) = standings(gov)
    assert (found.request.due, found.deadline, found.state) == (
        dt.date(2027, 3, 31),
        dt.date(2027, 3, 24),
        "due_soon",
    )
    close_request(gov, request_id, actor="dpo", outcome="withdrawn", reason="person withdrew")
    assert standings(gov)[0].state == "closed"


# -- audit -------------------------------------------------------------------------------


def test_every_change_is_audited_with_the_actor_and_never_the_subject_in_clear(
    workspace: Path,
) -> None:
    policy = Policy.model_validate({"policy": {"id": "office"}, "audit": {"enabled": True}})
    gov = Governance(
        workspace=workspace,
        policy=policy,
        settings=Settings(audit_key=AUDIT_KEY),
        clock=FixedClock(T0),
    )
    request_id = verified(gov, subject="C-1042-secret", kind="access")
    extend_request(gov, request_id, months=2, reason="C-1042-secret's many files", actor="dpo")
    close_request(gov, request_id, actor="dpo", outcome="refused", reason="C-1042-secret")
    entries = [
        e
        for e in gov.audit.entries_for(subject_id="C-1042-secret")  # type: ignore[attr-defined]
        if e["event"].startswith("request.")
    ]
    assert [(e["event"], e["attrs"]["outcome"]) for e in entries] == [
        ("request.open", "ok"),
        ("request.verify", "ok"),
        ("request.extend", "ok"),
        ("request.close", "refused"),
    ]
    dpo = gov.audit.subject_hash("dpo")  # type: ignore[attr-defined]
    assert all(e["attrs"]["actor.hash"] == dpo for e in entries)
    assert all(e["attrs"]["request_id"] == request_id for e in entries)
    assert entries[2]["attrs"]["due"] == "2027-04-30" and entries[2]["attrs"]["months"] == 2
    raw = b"".join(p.read_bytes() for p in (gov.governance_dir / "audit").glob("*.jsonl"))
    assert b"C-1042-secret" not in raw and b"dpo" not in raw


# -- follow-ups: erasures the library could not finish, or started --------------------


def test_an_erasure_blocked_by_a_hold_becomes_a_request_once(workspace: Path) -> None:
    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "alice's note", subject_id="alice")
    hold = held(gov)
    for _ in range(2):  # asked twice: one request, one blocker
        with pytest.raises(ErasureBlockedError):
            erase(gov, subject="alice", reason="DSR-9", actor="dpo")
    (request,) = request_register(gov).requests()
    assert (request.kind, request.subject, request.source) == (
        "erasure",
        "alice",
        "erasure-blocked",
    )
    assert [b.reason for b in request.blockers] == [f"erasure blocked by legal hold(s) {hold}"]
    assert request.blockers[0].holds == (hold,)
    assert ("request.block", "ok") in sink(gov).events()


def test_the_erasure_run_after_the_hold_is_released_closes_the_follow_up(
    workspace: Path,
) -> None:
    from governed_memory._records import HoldRegistry

    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "alice's note", subject_id="alice")
    held(gov)
    with pytest.raises(ErasureBlockedError):
        erase(gov, subject="alice", reason="DSR-9", actor="dpo")
    HoldRegistry(gov.governance_dir, clock=gov.clock).release(subject="alice", actor="legal")
    receipt = erase(gov, subject="alice", reason="DSR-9", actor="dpo")
    (request,) = request_register(gov).requests()
    assert request.closing is not None
    assert (request.closing.outcome, request.closing.receipt) == ("answered", receipt.id)


def test_an_erasure_left_pending_by_an_unreachable_file_becomes_a_request(
    workspace: Path,
) -> None:
    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "alice in A", subject_id="alice")
    conversation(gov, "B").add("Human", "alice in B", subject_id="alice")
    (workspace / "agents" / "B" / "MEMORY.md").write_bytes(b"\xff damaged")
    with pytest.raises(Exception, match="pending"):
        erase(gov, subject="alice", reason="DSR-5", actor="dpo")
    (request,) = request_register(gov).requests()
    assert request.open and request.erasure_id is not None
    assert "left pending" in request.blockers[0].reason
    assert "agents/B/MEMORY.md" in request.blockers[0].reason


def test_a_scheduled_erasure_blocked_when_due_is_one_request_however_often_it_is_retried(
    workspace: Path,
) -> None:
    gov = gov_with(workspace)
    conversation(gov, "A").add("Human", "alice's note", subject_id="alice")
    item = schedule_erasure(gov, subject="alice", grace="1d", reason="DSR-6", actor="dpo")
    held(gov)
    later = T0 + dt.timedelta(days=2)
    for day in range(3):
        run_due_erasures(gov, later + dt.timedelta(days=day))
    (request,) = request_register(gov).requests()
    assert len(request.blockers) == 1 and request.blockers[0].erasure_id == item.id


def _withdrawing(workspace: Path, **consent: Any) -> Governance:
    gov = gov_with(
        workspace,
        consent={"required_for": ["persist"], "on_withdraw": "erase", **consent},
    )
    gov.grant("alice", "persist", actor="dpo")
    conversation(gov, "A").add("Human", "alice's secret", subject_id="alice")
    return gov


def test_a_withdrawal_blocked_by_a_hold_is_an_open_request_with_the_reason(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gov = _withdrawing(workspace)
    hold = held(gov)
    with caplog.at_level(logging.WARNING, logger="governed_memory"):
        gov.withdraw("alice", "persist", actor="alice-by-email")
    (request,) = request_register(gov).requests()
    assert (request.source, request.kind, request.opened_by) == (
        "consent-withdrawal",
        "erasure",
        "alice-by-email",
    )
    assert request.note is not None and "consent 'persist' withdrawn" in request.note
    assert [b.holds for b in request.blockers] == [(hold,)]
    assert request.verification is not None  # the withdrawal's actor: no second verification
    (line,) = [r.getMessage() for r in caplog.records if "blocked" in r.getMessage()]
    assert "requests list" in line and "alice" not in line.replace(gov.subject_ref("alice"), "")


def test_a_withdrawal_erased_at_once_is_a_closed_request_with_its_receipt(
    workspace: Path,
) -> None:
    gov = _withdrawing(workspace)
    gov.withdraw("alice", "persist", actor="alice")
    (request,) = request_register(gov).requests()
    assert request.closing is not None and request.closing.outcome == "answered"
    assert request.closing.receipt is not None and request.source == "consent-withdrawal"


def test_a_withdrawal_with_a_grace_period_stays_open_until_the_erasure_runs(
    workspace: Path,
) -> None:
    gov = _withdrawing(workspace, erase_grace="7d")
    gov.withdraw("alice", "persist", actor="alice")
    (request,) = request_register(gov).requests()
    assert request.open and request.due == dt.date(2027, 2, 28)
    (receipt,) = run_due_erasures(gov, T0 + dt.timedelta(days=8))
    (request,) = request_register(gov).requests()
    assert request.closing is not None
    assert request.closing.receipt == receipt.id  # type: ignore[union-attr]
