"""Consent follows lineage: a summary reaches disk only with the consent of every subject in it."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from subjects_helpers import STORE_KINDS, all_bytes, governance, memory_text, readable_text

from governed_memory import (
    ConsentRequiredError,
    ContextCompressor,
    Conversation,
    FixedClock,
    Governance,
    memory_md_path,
)
from governed_memory._policy._model import Policy
from governed_memory.testing import RecordingAuditSink

SECRET = "B-SECRET: the account number of B-2 is 12345678."


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def policy(on_missing: str = "memory_only") -> Policy:
    return Policy.model_validate(
        {
            "policy": {"id": "lineage", "version": "2"},
            "consent": {"required_for": ["persist", "summarize"], "on_missing": on_missing},
        }
    )


def setup(
    workspace: Path,
    clock: FixedClock,
    kind: str,
    *,
    b_state: str,
    on_missing: str = "memory_only",
    rules: Policy | None = None,
) -> tuple[Governance, RecordingAuditSink, Conversation]:
    """A-1 consents; B-2 never did, or did and withdrew after B-SECRET was stored."""
    gov = governance(workspace, clock, rules or policy(on_missing), kind=kind)
    sink = RecordingAuditSink()
    gov.audit = sink
    gov.grant("A-1", "persist", actor="dpo")
    if b_state == "withdrawn":
        gov.grant("B-2", "persist", actor="dpo")
    conv = Conversation(
        name="teller",
        memory_md_path=memory_md_path("Teller", workspace),
        governance=gov,
        subject_id="A-1",
    )
    conv.add("Human", "A-1 asks about the opening hours.")
    conv.add("Human", SECRET, subject_id="B-2")
    if b_state == "withdrawn":
        gov.withdraw("B-2", "persist", actor="B-2")
    return gov, sink, conv


def compact(conv: Conversation, how: str) -> None:
    if how == "manual":
        conv.compact(f"[Compressed Memory Summary] A-1 asked about hours. {SECRET}")
        return
    agent = SimpleNamespace(short_memory=conv, context_length=100, model_name="gpt-4o-mini")
    compressor = ContextCompressor(summarizer_model="local/extractive")
    assert compressor.compress(agent) is not None


def _summaries(gov: Governance) -> str:
    from governed_memory import parse_memory

    records = parse_memory(memory_text(gov, "Teller")).records
    return "".join(r.content for r in records if r.content.startswith("[Compressed"))


@pytest.mark.parametrize("b_state", ["never", "withdrawn"])
@pytest.mark.parametrize("how", ["manual", "local-extractive"])
def test_a_summary_of_an_unconsented_subject_stays_in_memory(
    workspace: Path,
    clock: FixedClock,
    kind: str,
    how: str,
    b_state: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gov, sink, conv = setup(workspace, clock, kind, b_state=b_state)
    before = all_bytes(workspace / "agents")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="governed_memory"):
        compact(conv, how)
        if how == "manual":
            compact(conv, how)  # a second time: still warned once only
    assert all_bytes(workspace / "agents") == before  # no archive, no summary
    assert SECRET not in _summaries(gov)
    if b_state == "never":
        assert "B-SECRET" not in readable_text(gov)
    assert "B-SECRET" in conv.conversation_history[-1]["content"]  # compacted in memory
    warnings = [r.getMessage() for r in caplog.records if "summary is derived" in r.getMessage()]
    assert len(warnings) == 1
    assert "B-2" not in warnings[0] and "lineage v2" in warnings[0]
    assert "subject.hash" in warnings[0] or "sha256:" in warnings[0]
    assert "memory_only" in sink.outcomes("compact")
    assert "ok" not in sink.outcomes("compact")


def test_under_deny_the_compaction_is_refused_and_nothing_changes(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    _, sink, conv = setup(workspace, clock, kind, b_state="withdrawn", on_missing="deny")
    history = list(conv.conversation_history)
    before = all_bytes(workspace / "agents")
    with pytest.raises(ConsentRequiredError) as raised:
        conv.compact(f"[Compressed Memory Summary] {SECRET}")
    message = str(raised.value)
    assert "lineage v2" in message and "consent grant" in message and "B-2" not in message
    assert raised.value.subject_id == "B-2" and raised.value.purpose == "persist"
    assert conv.conversation_history == history
    assert all_bytes(workspace / "agents") == before
    assert sink.outcomes("compact") == ["denied"]


def test_a_summary_whose_subjects_all_consent_is_written(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov, sink, conv = setup(workspace, clock, kind, b_state="never")
    gov.grant("B-2", "persist", actor="dpo")
    conv.compact(f"[Compressed Memory Summary] {SECRET}")
    assert SECRET in _summaries(gov)
    assert sink.outcomes("compact") == ["ok"]


class _External:
    """An external summarizer that records whether it was called."""

    model = "gpt-4o-mini"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, transcript: Any, *, max_tokens: int, temperature: float | None) -> str:
        self.calls += 1
        return "external summary"


def test_an_earlier_summary_brings_its_lineage_to_the_summarize_decision(
    workspace: Path, clock: FixedClock
) -> None:
    """No external model sees a summary derived from a subject without 'summarize' consent."""
    gov = governance(workspace, clock, policy())
    sink = RecordingAuditSink()
    gov.audit = sink
    for subject in ("A-1", "B-2"):
        gov.grant(subject, "persist", actor="dpo")
    gov.grant("A-1", "summarize", actor="dpo")
    conv = Conversation(
        memory_md_path=memory_md_path("Teller", workspace), governance=gov, subject_id="A-1"
    )
    conv.add("Human", SECRET, subject_id="B-2")
    conv.compact(f"[Compressed Memory Summary] {SECRET}")  # lineage A-1, B-2; no model
    conv.add("Human", "A-1 asks about the opening hours.")
    external = _External()
    agent = SimpleNamespace(short_memory=conv, context_length=100, model_name="gpt-4o-mini")
    ContextCompressor(summarizer=external).compress(agent)
    assert external.calls == 0
    assert sink.outcomes("summarize") == ["use_local"]


# -- summarization.without_consent = "leave_out": summarise the rest, keep theirs in memory -----


def leave_out_policy() -> Policy:
    return Policy.model_validate(
        {
            "policy": {"id": "lineage", "version": "3"},
            "consent": {"required_for": ["persist"], "on_missing": "memory_only"},
            "summarization": {"without_consent": "leave_out"},
        }
    )


def leave_out_setup(
    workspace: Path, clock: FixedClock, kind: str, b_state: str
) -> tuple[Governance, RecordingAuditSink, Conversation]:
    return setup(workspace, clock, kind, b_state=b_state, rules=leave_out_policy())


@pytest.mark.parametrize("b_state", ["never", "withdrawn"])
def test_leave_out_summarises_the_consented_turns_and_keeps_the_others_in_memory(
    workspace: Path, clock: FixedClock, kind: str, b_state: str
) -> None:
    gov, sink, conv = leave_out_setup(workspace, clock, kind, b_state)
    text, turns = conv.compaction_transcript()
    assert "opening hours" in text and "B-SECRET" not in text
    assert [m.get("subject_id") for m in turns] == ["A-1"]
    agent = SimpleNamespace(short_memory=conv, context_length=100, model_name="local/extractive")
    summary = ContextCompressor(summarizer_model="local/extractive").compress(agent)
    assert summary is not None and "B-SECRET" not in summary
    from governed_memory import parse_memory

    (record,) = parse_memory(memory_text(gov, "Teller")).records
    assert record.meta.get("lineage") == ["A-1"]  # the summary is A-1's alone, and on disk
    assert "B-SECRET" not in record.content
    assert sink.outcomes("compact") == ["ok"]
    assert conv.conversation_history[-1]["content"] == SECRET  # B-2's turn: memory only
    if b_state == "never":
        assert "B-SECRET" not in readable_text(gov)


def test_leave_out_does_not_rescue_a_manual_summary_that_may_quote_them(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """A summary passed to compact() without keep_other_subjects may hold anything: lineage decides."""
    gov, sink, conv = leave_out_setup(workspace, clock, kind, "never")
    before = all_bytes(workspace / "agents")
    conv.compact(f"[Compressed Memory Summary] {SECRET}")
    assert all_bytes(workspace / "agents") == before
    assert "memory_only" in sink.outcomes("compact")
    gov.grant("B-2", "persist", actor="dpo")  # once B-2 consents, their turns are summarised too
    conv.add("Human", "B-2 is back", subject_id="B-2")
    _, turns = conv.compaction_transcript()
    assert any(m.get("subject_id") == "B-2" for m in turns)


def test_the_shipped_regulated_policy_leaves_unconsented_turns_out() -> None:
    from governed_memory._policy import load_policy

    assert load_policy("regulated").summarization.without_consent == "leave_out"
    assert load_policy("default").summarization.without_consent == "on_missing"
