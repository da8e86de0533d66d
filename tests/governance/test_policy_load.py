"""Building a Governance writes nothing; ``policy.load`` is recorded before the first change it governs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governed_memory import (
    AuditWriteError,
    Conversation,
    FixedClock,
    Governance,
    NullAuditSink,
    Policy,
    Retention,
    Settings,
    memory_md_path,
)
from governed_memory._audit import AuditKey, AuditLog, AuditTrail
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto import generate_master_key
from governed_memory._governance._policy_load import PolicyLoadSink
from governed_memory.testing import RecordingAuditSink

AUDIT_KEY = "ab" * 32
MASTER_KEY = generate_master_key()


def policy(**sections: Any) -> Policy:
    return Policy.model_validate(
        {"policy": {"id": "bank", "version": "7"}, "consent": {"required_for": []}, **sections}
    )


def recorded(workspace: Path, clock: FixedClock, **sections: Any) -> tuple[Governance, Any]:
    sink = RecordingAuditSink()
    gov = Governance(
        workspace=workspace, policy=policy(**sections), settings=Settings(), clock=clock, audit=sink
    )
    return gov, sink


def add(gov: Governance, *contents: str) -> Conversation:
    conv = Conversation(
        memory_md_path=memory_md_path("Agent", gov.workspace), governance=gov, subject_id="s-1"
    )
    for content in contents:
        conv.add("Human", content)
    return conv


def test_building_an_audited_encrypted_governance_creates_no_file_or_folder(
    workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[audit]\nenabled = true\n\n[encryption]\nenabled = true\n")
    settings = Settings(policy=path, audit_key=AUDIT_KEY, master_key=MASTER_KEY)
    gov = Governance(workspace=workspace, settings=settings)
    assert isinstance(gov.audit, AuditTrail)
    assert list(workspace.iterdir()) == []


def test_building_records_nothing(workspace: Path, clock: FixedClock) -> None:
    _, sink = recorded(workspace, clock)
    assert sink.records == []


def test_a_governed_add_records_policy_load_then_the_persist_once(
    workspace: Path, clock: FixedClock
) -> None:
    gov, sink = recorded(workspace, clock)
    add(gov, "one", "two")
    assert sink.events() == [("policy.load", "ok"), ("persist", "ok"), ("persist", "ok")]
    assert sink.records[0] == {
        "operation": "policy.load",
        "agent": None,
        "subject_id": None,
        "outcome": "ok",
        "policy_id": "bank",
        "policy_version": "7",
        "source": gov.policy.source,
    }


def test_the_audit_log_holds_policy_load_then_the_persist(workspace: Path) -> None:
    key = AuditKey.from_text(AUDIT_KEY)
    gov = Governance(
        workspace=workspace,
        policy=policy(audit={"enabled": True}),
        settings=Settings(audit_key=AUDIT_KEY),
    )
    assert not (workspace / GOVERNANCE_DIR).exists()
    add(gov, "hello")
    log = AuditLog(workspace / GOVERNANCE_DIR / "audit", key)
    events = [e.event for e in log.entries()]
    log.close()
    assert events == ["audit.segment", "policy.load", "persist"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda gov: gov.grant("s-1", "persist", actor="dpo"), id="consent.grant"),
        pytest.param(
            lambda gov: gov.withdraw("s-1", "persist", actor="dpo"), id="consent.withdraw"
        ),
        pytest.param(
            lambda gov: Retention(gov).holds.place(subject="s-1", reason="r", actor="legal"),
            id="hold.place",
        ),
        pytest.param(lambda gov: Retention(gov).purge(), id="purge"),
        pytest.param(lambda gov: gov.summarizer_decision("local/extractive"), id="summarize"),
    ],
)
def test_every_kind_of_first_change_is_preceded_by_policy_load(
    workspace: Path, clock: FixedClock, change: Any
) -> None:
    gov, sink = recorded(workspace, clock)
    change(gov)
    operations = [r["operation"] for r in sink.records]
    assert operations[0] == "policy.load" and operations.count("policy.load") == 1
    assert len(operations) > 1


def test_reading_through_a_governance_records_nothing(workspace: Path, clock: FixedClock) -> None:
    gov, sink = recorded(workspace, clock)
    gov.consent.status("s-1")
    gov.consent.history()
    gov.check("persist", "Agent", "s-1")
    Retention(gov).plan()
    Retention(gov).purge(dry_run=True)
    assert sink.records == []


def test_each_governance_records_its_own_policy_load(workspace: Path, clock: FixedClock) -> None:
    sink = RecordingAuditSink()
    for _ in range(2):
        gov = Governance(workspace=workspace, policy=policy(), clock=clock, audit=sink)
        gov.grant("s-1", "persist", actor="dpo")
    assert [r["operation"] for r in sink.records] == [
        "policy.load",
        "consent.grant",
        "policy.load",
        "consent.grant",
    ]


def test_an_explicit_policy_load_does_not_count_as_the_first_change(
    workspace: Path, clock: FixedClock
) -> None:
    gov, sink = recorded(workspace, clock)
    gov.audit.record("policy.load", agent=None, subject_id=None, outcome="ok")
    gov.grant("s-1", "persist", actor="dpo")
    assert [r["operation"] for r in sink.records] == ["policy.load", "policy.load", "consent.grant"]


def test_the_audit_attribute_is_still_the_sink_it_was_given(
    workspace: Path, clock: FixedClock
) -> None:
    gov, sink = recorded(workspace, clock)
    assert isinstance(gov.audit, RecordingAuditSink)
    assert type(gov.audit) is PolicyLoadSink and gov.audit.sink is sink  # type: ignore[attr-defined]
    gov.grant("s-1", "persist", actor="dpo")
    assert gov.audit.records is sink.records  # type: ignore[attr-defined]


def test_a_null_sink_is_not_wrapped(workspace: Path) -> None:
    gov = Governance(workspace=workspace, policy=Policy(), settings=Settings())
    assert type(gov.audit) is NullAuditSink


def test_a_failed_policy_load_fails_the_change_and_is_tried_again(
    workspace: Path, clock: FixedClock
) -> None:
    class FailingOnce(RecordingAuditSink):
        failed = False

        def record(self, operation: str, **entry: Any) -> None:
            if operation == "policy.load" and not self.failed:
                self.failed = True
                raise AuditWriteError("cannot append to the audit log: disk full")
            super().record(operation, **entry)

    sink = FailingOnce()
    gov = Governance(workspace=workspace, policy=policy(), clock=clock, audit=sink)
    with pytest.raises(AuditWriteError, match="disk full"):
        gov.grant("s-1", "persist", actor="dpo")
    gov.grant("s-2", "persist", actor="dpo")
    assert [r["operation"] for r in sink.records] == [
        "consent.grant",  # offered to the sink all the same (a trail marks its span)
        "policy.load",
        "consent.grant",
    ]
