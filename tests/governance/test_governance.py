"""The consent gate: every persist, preload, compaction, archive and summarize passes it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from governed_memory import (
    Allowed,
    ConsentRequiredError,
    Conversation,
    Decision,
    FixedClock,
    Governance,
    NullAuditSink,
    Outcome,
    Policy,
    Settings,
    Skip,
    UseLocal,
    memory_md_path,
    parse_memory,
)
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._governance._root import Operation
from governed_memory.testing import RecordingAuditSink


def make(
    workspace: Path,
    clock: FixedClock,
    on_missing: str = "memory_only",
    required_for: tuple[str, ...] = ("persist", "summarize"),
    consent_extra: dict[str, Any] | None = None,
    **sections: Any,
) -> tuple[Governance, RecordingAuditSink]:
    policy = Policy.model_validate(
        {
            "policy": {"id": "gate", "version": "3"},
            "consent": {
                "required_for": list(required_for),
                "on_missing": on_missing,
                **(consent_extra or {}),
            },
            **sections,
        }
    )
    sink = RecordingAuditSink()
    gov = Governance(
        workspace=workspace, policy=policy, settings=Settings(), clock=clock, audit=sink
    )
    return gov, sink


def conversation(gov: Governance, subject: str | None = "alice", **kw: Any) -> Conversation:
    return Conversation(
        memory_md_path=memory_md_path("Agent", gov.workspace),
        governance=gov,
        subject_id=subject,
        **kw,
    )


def body(gov: Governance) -> list[str]:
    text = memory_md_path("Agent", gov.workspace).read_text()
    return [r.content for r in parse_memory(text).records]


# -- the decision ----------------------------------------------------------


def test_decision_carries_the_policy_id_and_version(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(workspace, clock)
    decision = gov.check("persist", "Agent", "alice")
    assert isinstance(decision, Decision)
    assert (decision.policy_id, decision.policy_version) == ("gate", "3")
    assert decision.outcome is Outcome.MEMORY_ONLY and not decision.persist
    gov.grant("alice", "persist", actor="dpo")
    decision = gov.check("persist", "Agent", "alice")
    assert decision.persist and decision.reason == "consent granted"


def test_purpose_not_required_always_persists(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(workspace, clock, required_for=())
    assert gov.check("persist", "Agent", None).persist


def test_unknown_operation_is_refused(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(workspace, clock)
    with pytest.raises(ValueError):
        gov.check("publish", "Agent", "alice")


def test_policy_load_is_audited(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock)
    gov.grant("alice", "persist", actor="dpo")  # recorded before the first change it governs
    assert sink.records[0]["operation"] == "policy.load"
    assert sink.records[0]["policy_id"] == "gate"


def test_default_audit_sink_is_a_no_op(workspace: Path) -> None:
    gov = Governance(workspace=workspace, settings=Settings())
    assert isinstance(gov.audit, NullAuditSink)


# -- persist -------------------------------------------------------------


def test_persist_with_consent_writes_the_subject_on_disk(
    workspace: Path, clock: FixedClock
) -> None:
    gov, sink = make(workspace, clock)
    gov.grant("alice", "persist", actor="dpo")
    conv = conversation(gov)
    conv.add("Human", "hello")
    text = memory_md_path("Agent", workspace).read_text()
    assert '<!-- gm {"subject":"alice"} -->' in text
    assert parse_memory(text).records[0].subject_id == "alice"
    assert sink.outcomes("persist") == ["ok"]
    assert sink.records[-1]["policy_version"] == "3"


def test_persist_memory_only_keeps_working_and_warns_once(
    workspace: Path, clock: FixedClock, caplog: pytest.LogCaptureFixture
) -> None:
    gov, sink = make(workspace, clock)
    conv = conversation(gov)
    with caplog.at_level(logging.WARNING, logger="governed_memory"):
        conv.add("Human", "one")
        conv.add("Agent", "two")
    assert [m["content"] for m in conv.conversation_history] == ["one", "two"]
    assert body(gov) == []
    warnings = [r for r in caplog.records if "memory only" in r.getMessage()]
    assert len(warnings) == 1
    # Named by its keyed hash (logs leave the workspace), not the raw id.
    assert gov.gate.subject_ref("alice") in warnings[0].getMessage()
    assert "alice" not in warnings[0].getMessage()
    assert sink.outcomes("persist") == ["memory_only", "memory_only"]


def test_persist_deny_raises_naming_subject_and_purpose(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock, on_missing="deny")
    conv = conversation(gov)
    with pytest.raises(ConsentRequiredError) as info:
        conv.add("Human", "secret")
    assert info.value.subject_id == "alice" and info.value.purpose == "persist"
    assert "'alice'" in str(info.value) and "'persist'" in str(info.value)
    assert "consent grant --subject alice --purpose persist" in str(info.value)
    assert conv.conversation_history == []
    assert body(gov) == []
    assert sink.outcomes("persist") == ["denied"]


def test_persist_without_subject_needs_one(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(workspace, clock, on_missing="deny")
    conv = conversation(gov, subject=None)
    with pytest.raises(ConsentRequiredError, match="subject_id="):
        conv.add("Human", "who am I")


def test_per_message_subject_overrides_the_conversation_subject(
    workspace: Path, clock: FixedClock
) -> None:
    gov, _ = make(workspace, clock)
    gov.grant("bob", "persist", actor="dpo")
    conv = conversation(gov, subject="alice")
    conv.add("Human", "alice's", subject_id=None)
    conv.add("Human", "bob's", subject_id="bob")
    records = parse_memory(memory_md_path("Agent", workspace).read_text()).records
    assert [(r.content, r.subject_id) for r in records] == [("bob's", "bob")]


def test_blank_content_never_consults_the_gate(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock, on_missing="deny")
    conv = conversation(gov)
    conv.add("Human", "   ")
    assert sink.outcomes("persist") == []


def test_store_failure_is_audited_as_error(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock, required_for=())
    conv = conversation(gov)

    def broken(block: str) -> None:
        raise OSError("disk full")

    conv.store.append = broken  # type: ignore[method-assign,union-attr]
    with pytest.raises(OSError):
        conv.add("Human", "x")
    assert sink.outcomes("persist") == ["error"]
    assert sink.records[-1]["error"] == "OSError"


# -- preload -------------------------------------------------------------


def seed(workspace: Path, clock: FixedClock) -> None:
    """MEMORY.md with records of alice and bob, written while both consented."""
    gov, _ = make(workspace, clock)
    gov.grant("alice", "persist", actor="dpo")
    gov.grant("bob", "persist", actor="dpo")
    conv = conversation(gov)
    conv.add("Human", "alice talks")
    conv.add("Human", "bob talks", subject_id="bob")


def test_preload_leaves_out_subjects_without_consent(workspace: Path, clock: FixedClock) -> None:
    seed(workspace, clock)
    gov, sink = make(workspace, clock)
    gov.withdraw("bob", "persist", actor="bob")
    conv = conversation(gov)
    preload = conv.conversation_history[0]["content"]
    assert "alice talks" in preload and "bob talks" not in preload
    assert sorted(sink.outcomes("preload")) == ["memory_only", "ok"]


def test_preload_with_every_consent_is_the_whole_file(workspace: Path, clock: FixedClock) -> None:
    seed(workspace, clock)
    gov, _ = make(workspace, clock)
    text = memory_md_path("Agent", workspace).read_text()
    assert conversation(gov).conversation_history[0]["content"].endswith(text)


def test_preload_with_no_consent_left_preloads_nothing(workspace: Path, clock: FixedClock) -> None:
    seed(workspace, clock)
    gov, _ = make(workspace, clock)
    gov.withdraw("alice", "persist", actor="alice")
    gov.withdraw("bob", "persist", actor="bob")
    assert conversation(gov).conversation_history == []


def test_preload_deny_refuses_to_open(workspace: Path, clock: FixedClock) -> None:
    seed(workspace, clock)
    gov, sink = make(workspace, clock, on_missing="deny")
    gov.withdraw("bob", "persist", actor="bob")
    with pytest.raises(ConsentRequiredError, match="'bob'"):
        conversation(gov)
    assert "denied" in sink.outcomes("preload")


# -- compaction and archive ---------------------------------------------------


def test_compaction_with_consent_archives_and_writes_the_summary(
    workspace: Path, clock: FixedClock
) -> None:
    gov, sink = make(workspace, clock)
    gov.grant("alice", "persist", actor="dpo")
    conv = conversation(gov)
    conv.add("Human", "long story")
    conv.compact("short story")
    assert body(gov) == ["short story"]
    assert len(conv.store.list_archives()) == 1  # type: ignore[union-attr]
    assert sink.outcomes("archive") == ["ok"] and sink.outcomes("compact") == ["ok"]


@pytest.mark.parametrize("operation", ["archive", "compact"])
def test_compaction_memory_only_leaves_disk_untouched(
    workspace: Path, clock: FixedClock, operation: str
) -> None:
    seed(workspace, clock)
    gov, sink = make(workspace, clock)
    gov.withdraw("alice", "persist", actor="alice")
    conv = conversation(gov)
    before = memory_md_path("Agent", workspace).read_bytes()
    conv.compact("summary")
    assert conv.conversation_history[-1]["content"] == "summary"
    assert memory_md_path("Agent", workspace).read_bytes() == before
    assert conv.store.list_archives() == []  # type: ignore[union-attr]
    assert sink.outcomes(operation) == ["memory_only"]


def test_compaction_deny_changes_nothing(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock, on_missing="deny")
    gov.grant("alice", "persist", actor="dpo")
    conv = conversation(gov)
    conv.add("Human", "kept")
    gov.withdraw("alice", "persist", actor="alice")
    history = list(conv.conversation_history)
    before = memory_md_path("Agent", workspace).read_bytes()
    with pytest.raises(ConsentRequiredError):
        conv.compact("summary")
    assert conv.conversation_history == history
    assert memory_md_path("Agent", workspace).read_bytes() == before
    assert sink.outcomes("archive") == ["denied"]


# -- summarize -------------------------------------------------------------


def test_external_summarizer_needs_summarize_consent(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock)
    decision = gov.summarizer_decision("gpt-4o", ["alice"])
    assert isinstance(decision, UseLocal) and decision.model == "local/extractive"
    # The reason reaches logs: the subject by its keyed hash, never the raw id (issue 13, 7).
    assert gov.subject_ref("alice") in decision.reason and "alice" not in decision.reason
    gov.grant("alice", "summarize", actor="dpo")
    assert gov.summarizer_decision("gpt-4o", ["alice"]) == Allowed("gpt-4o")
    assert isinstance(gov.summarizer_decision("gpt-4o", ["alice", None]), UseLocal)
    assert sink.outcomes("summarize") == ["use_local", "allowed", "use_local"]


def test_local_summarizer_needs_no_consent(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(workspace, clock)
    assert isinstance(gov.summarizer_decision("local/extractive", ["alice"]), Allowed)


def test_skip_fallback_never_calls_any_summarizer(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock, summarization={"fallback": "skip"})
    decision = gov.summarizer_decision("gpt-4o", ["alice"])
    assert isinstance(decision, Skip)
    assert sink.outcomes("summarize") == ["skip"]


def test_external_models_off_by_policy(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(
        workspace,
        clock,
        required_for=(),
        summarization={"external_allowed": False, "allowed_models": ["local/*"]},
    )
    decision = gov.summarizer_decision("claude-haiku-4-5", [])
    assert isinstance(decision, UseLocal) and "external_allowed" in decision.reason


def test_model_outside_the_allowed_list_is_not_called(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(
        workspace, clock, required_for=(), summarization={"allowed_models": ["azure/*", "local/*"]}
    )
    assert isinstance(gov.summarizer_decision("azure/gpt-4o", []), Allowed)
    decision = gov.summarizer_decision("gpt-4o", [])
    assert isinstance(decision, UseLocal) and "allowed_models" in decision.reason


def test_every_operation_maps_to_a_purpose() -> None:
    assert {op.value: op.purpose for op in Operation} == {
        "persist": "persist",
        "preload": "persist",
        "compact": "persist",
        "archive": "persist",
        "summarize": "summarize",
    }


def test_consent_changes_are_audited(workspace: Path, clock: FixedClock) -> None:
    gov, sink = make(workspace, clock)
    gov.grant("alice", "persist", actor="dpo")
    gov.withdraw("alice", "persist", actor="alice")
    assert [r["operation"] for r in sink.records[1:]] == ["consent.grant", "consent.withdraw"]
    assert sink.records[-1]["actor"] == "alice"


def test_governance_folder_only_appears_when_consent_is_recorded(
    workspace: Path, clock: FixedClock
) -> None:
    gov, _ = make(workspace, clock)
    conv = conversation(gov)
    conv.add("Human", "kept in memory")
    assert not (workspace / GOVERNANCE_DIR).exists()
    gov.grant("alice", "persist", actor="dpo")
    assert (workspace / GOVERNANCE_DIR).is_dir()


# -- consequences of a withdrawal ---------------------------------------------


def test_withdrawal_under_on_withdraw_erase_erases_the_subject(
    workspace: Path, clock: FixedClock
) -> None:
    gov, _ = make(workspace, clock, consent_extra={"on_withdraw": "erase"})
    gov.grant("alice", "persist", actor="dpo")
    gov.grant("bob", "persist", actor="dpo")
    conv = conversation(gov)
    conv.add("Human", "alice's secret")
    conv.add("Human", "bob's note", subject_id="bob")
    gov.withdraw("alice", "persist", actor="alice")
    assert body(gov) == ["bob's note"]


def test_a_withdrawal_whose_erasure_is_held_warns_without_the_raw_id(
    workspace: Path, clock: FixedClock, caplog: pytest.LogCaptureFixture
) -> None:
    from governed_memory._records._holds import HoldRegistry

    gov, _ = make(workspace, clock, consent_extra={"on_withdraw": "erase"})
    gov.grant("alice", "persist", actor="dpo")
    conversation(gov).add("Human", "alice's secret")
    hold = HoldRegistry(gov.governance_dir, clock=clock).place(
        subject="alice", reason="litigation", actor="legal"
    )
    with caplog.at_level(logging.WARNING, logger="governed_memory"):
        gov.withdraw("alice", "persist", actor="alice")
    (warning,) = [r.getMessage() for r in caplog.records if "blocked" in r.getMessage()]
    assert gov.subject_ref("alice") in warning and hold.id in warning
    assert "alice" not in warning.replace(gov.subject_ref("alice"), "")
    assert body(gov) == ["alice's secret"]  # held: kept


def test_withdrawal_with_erase_grace_schedules_the_erasure(
    workspace: Path, clock: FixedClock
) -> None:
    from governed_memory._subjects import TombstoneStore

    gov, _ = make(workspace, clock, consent_extra={"on_withdraw": "erase", "erase_grace": "7d"})
    gov.grant("alice", "persist", actor="dpo")
    conversation(gov).add("Human", "alice's secret")
    gov.withdraw("alice", "persist", actor="alice")
    assert body(gov) == ["alice's secret"]  # kept until the grace period ends
    (scheduled,) = TombstoneStore(workspace / GOVERNANCE_DIR).scheduled()
    assert scheduled.scope.subject == "alice"


def test_withdrawal_of_summarize_erases_nothing(workspace: Path, clock: FixedClock) -> None:
    gov, _ = make(workspace, clock, consent_extra={"on_withdraw": "erase"})
    gov.grant("alice", "persist", actor="dpo")
    conversation(gov).add("Human", "alice's secret")
    gov.withdraw("alice", "summarize", actor="alice")
    assert body(gov) == ["alice's secret"]


# -- the Agent -----------------------------------------------------------------


def test_governed_agent_keeps_memory_in_the_governed_workspace(
    workspace: Path, clock: FixedClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from governed_memory import Agent

    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "elsewhere"))
    gov, _ = make(workspace, clock)
    gov.grant("alice", "persist", actor="dpo")
    agent = Agent("Teller", governance=gov, subject_id="alice")
    assert agent.short_memory.memory_md_path == memory_md_path("Teller", workspace)
    agent.short_memory.add("Human", "hello")
    assert parse_memory(memory_md_path("Teller", workspace).read_text()).records[0].subject_id == (
        "alice"
    )
    assert not (tmp_path / "elsewhere").exists()


# -- the compressor honours summarize consent ---------------------------------------


class _AgentLike:
    def __init__(self, memory: Conversation, url: str) -> None:
        self.short_memory = memory
        self.context_length = 100
        self.model_name = "gpt-4o-mini"
        self.agent_name = "Agent"
        self.api_base = url
        self.api_key = "sk-test"


def test_external_summarizer_is_never_called_without_summarize_consent(
    workspace: Path, clock: FixedClock, stub_llm: Any
) -> None:
    from governed_memory import ContextCompressor

    gov, sink = make(workspace, clock)
    gov.grant("alice", "persist", actor="dpo")
    conv = conversation(gov)
    for i in range(6):
        conv.add("Human", f"turn {i}: please remember the account details")
    agent = _AgentLike(conv, stub_llm.url)

    summary = ContextCompressor().compress(agent)
    assert stub_llm.requests == []  # the transcript never left the process
    assert summary is not None and sink.outcomes("summarize") == ["use_local"]

    gov.grant("alice", "summarize", actor="dpo")
    conv.add("Human", "one more turn")
    ContextCompressor().compress(agent)
    assert len(stub_llm.requests) == 1
    assert sink.outcomes("summarize") == ["use_local", "allowed"]


def test_a_governance_closes_as_a_context_manager_and_a_call_after_reopens_what_it_needs(
    workspace: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", "ab" * 32)
    policy = Policy.model_validate(
        {"policy": {"id": "closing", "version": "1"}, "audit": {"enabled": True}}
    )
    with Governance(workspace=workspace, policy=policy, settings=Settings(), clock=clock) as gov:
        gov.grant("alice", "persist", actor="dpo@bank.example")
        conversation(gov).add("user", "before the close")
    conversation(gov).add("user", "after the close")
    assert body(gov) == ["before the close", "after the close"]
    gov.close()  # (twice: nothing left to release)
    log = gov.audit.log
    assert log is not None
    assert [e.event for e in log.entries()].count("persist") == 2  # both audited
