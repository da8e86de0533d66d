"""PolicyGate on its own: the consent gate built from fakes, with no Governance, settings or disk."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest

from governed_memory import (
    Allowed,
    ConsentRequiredError,
    Conversation,
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
from governed_memory._governance import PolicyGate
from governed_memory._protocols import Erased, Rectified
from governed_memory._stores import PlaintextAgentStore
from governed_memory.testing import FixedClock, InMemoryStores, RecordingAuditSink

T0 = dt.datetime(2026, 11, 30, 10, 0)


class Consent:
    """A consent lookup: the (subject, purpose) pairs granted."""

    def __init__(self, *granted: tuple[str, str]) -> None:
        self.granted = set(granted)

    def is_granted(self, subject_id: str, purpose: str) -> bool:
        return (subject_id, purpose) in self.granted


def rules(on_missing: str = "memory_only", **sections: Any) -> Policy:
    return Policy.model_validate(
        {
            "policy": {"id": "gate", "version": "5"},
            "consent": {"required_for": ["persist", "summarize"], "on_missing": on_missing},
            **sections,
        }
    )


def gate(
    workspace: Path, *granted: tuple[str, str], policy: Policy | None = None, **kw: Any
) -> tuple[PolicyGate, RecordingAuditSink, InMemoryStores]:
    sink = RecordingAuditSink()
    clock = FixedClock(T0)
    stores = InMemoryStores(clock=clock)
    built = PolicyGate(
        policy=policy or rules(),
        consent=Consent(*granted),
        workspace=workspace,
        clock=clock,
        audit=sink,
        store_factory=stores,
        **kw,
    )
    return built, sink, stores


def conversation(g: PolicyGate, subject: str | None = "alice") -> Conversation:
    return Conversation(
        memory_md_path=memory_md_path("Agent", g.workspace), governance=g, subject_id=subject
    )


# -- a Conversation under a bare gate ---------------------------------------------


def test_a_conversation_persists_through_the_gate_when_consent_is_granted(
    workspace: Path,
) -> None:
    g, sink, stores = gate(workspace, ("alice", "persist"))
    conversation(g).add("Human", "hello")
    text = stores.memory(memory_md_path("Agent", workspace))
    assert text is not None and parse_memory(text).records[0].subject_id == "alice"
    assert sink.events() == [("persist", "ok")]
    assert list(workspace.iterdir()) == []  # the in-memory stores wrote nothing to disk


def test_without_consent_the_message_stays_in_memory_only(workspace: Path) -> None:
    g, sink, stores = gate(workspace)
    conv = conversation(g)
    conv.add("Human", "hello")
    assert conv.conversation_history[-1]["content"] == "hello"
    assert parse_memory(stores.memory(memory_md_path("Agent", workspace)) or "").records == []
    assert sink.events() == [("persist", "memory_only")]


def test_an_allowed_write_records_what_the_decision_says_and_the_blocks_size(
    workspace: Path,
) -> None:
    g, sink, stores = gate(workspace, ("alice", "persist"))
    store = stores(memory_md_path("Agent", workspace), lambda: "")
    block = "### Human \u2014 t\n\nh\u00e9\n\n---\n\n"
    assert g.persist(store, block, agent="Agent", subject_id="alice")
    decision = g.check("persist", "Agent", "alice")
    assert sink.records == [
        {
            "operation": "persist",
            "agent": "Agent",
            "subject_id": "alice",
            "outcome": "ok",
            **decision.attributes(),
            "bytes": len(block.encode()),
        }
    ]
    g.policy = rules(policy={"id": "gate", "version": "6"})  # a replaced policy is recorded
    g.persist(store, block, agent="Agent", subject_id="alice")
    assert sink.records[-1]["policy_version"] == "6"
    g.policy = Policy()  # no consent needed: the decision's own reason
    g.persist(store, block, agent="Agent", subject_id="bob")
    assert sink.records[-1]["reason"] == "no consent required"


def test_a_failed_allowed_write_is_recorded_as_an_error(workspace: Path) -> None:
    g, sink, _ = gate(workspace, ("alice", "persist"))

    class Full(PlaintextAgentStore):
        def append(self, block: str) -> None:
            raise OSError(28, "No space left on device")

    store = Full(memory_md_path("Agent", workspace), lambda: "")
    with pytest.raises(OSError):
        g.persist(store, "### H \u2014 t\n\nx\n\n---\n\n", agent="Agent", subject_id="alice")
    assert sink.events() == [("persist", "error")]
    assert sink.records[0]["error"] == "OSError" and sink.records[0]["decision"] == "persist"


def test_the_gate_records_its_decisions_and_no_policy_load(workspace: Path) -> None:
    """policy.load is the composition root's entry; a bare gate records only what it decides."""
    g, sink, _ = gate(workspace, ("alice", "persist"))
    conversation(g).add("Human", "hello")
    assert "policy.load" not in [op for op, _ in sink.events()]


def test_preload_keeps_only_the_subjects_that_may_be_read_back(workspace: Path) -> None:
    g, sink, stores = gate(workspace, ("alice", "persist"), ("bob", "persist"))
    conversation(g, "alice").add("Human", "from alice")
    conversation(g, "bob").add("Human", "from bob")
    sink.clear()
    g.consent.granted.discard(("bob", "persist"))  # type: ignore[attr-defined]
    reopened = conversation(g, None)
    preloaded = "".join(str(m["content"]) for m in reopened.conversation_history)
    assert "from alice" in preloaded and "from bob" not in preloaded
    assert sorted(sink.outcomes("preload")) == ["memory_only", "ok"]  # each subject once
    assert stores.memory(memory_md_path("Agent", workspace)) is not None


def test_compaction_under_memory_only_leaves_the_store_as_it_is(workspace: Path) -> None:
    g, sink, stores = gate(workspace)
    conv = conversation(g)
    conv.add("Human", "hello")
    conv.compact("a summary")
    path = memory_md_path("Agent", workspace)
    assert parse_memory(stores.memory(path) or "").records == [] and stores.archives(path) == []
    assert ("archive", "memory_only") in sink.events()
    assert ("compact", "memory_only") in sink.events()


def test_compaction_with_consent_archives_and_replaces(workspace: Path) -> None:
    g, sink, stores = gate(workspace, ("alice", "persist"))
    conv = conversation(g)
    conv.add("Human", "hello")
    conv.compact("a summary")
    path = memory_md_path("Agent", workspace)
    assert len(stores.archives(path)) == 1
    assert "a summary" in (stores.memory(path) or "")
    assert [op for op, _ in sink.events()] == ["persist", "compact", "archive"]


# -- the decision -------------------------------------------------------------------


def test_a_decision_carries_the_policy_and_the_gates_clock(workspace: Path) -> None:
    g, _, _ = gate(workspace, ("alice", "persist"))
    decision = g.check("persist", "Agent", "alice")
    assert decision.persist and decision.reason == "consent granted"
    assert (decision.policy_id, decision.policy_version, decision.at) == ("gate", "5", T0)


def test_denial_raises_and_is_recorded(workspace: Path) -> None:
    g, sink, _ = gate(workspace, policy=rules(on_missing="deny"))
    with pytest.raises(ConsentRequiredError, match="consent grant --subject alice"):
        g.check("persist", "Agent", "alice")
    assert sink.events() == [("persist", "denied")]


def test_a_purpose_the_policy_does_not_require_needs_no_consent(workspace: Path) -> None:
    g, _, _ = gate(workspace, policy=Policy())
    decision = g.check("persist", "Agent", None)
    assert decision.outcome is Outcome.PERSIST and decision.reason == "no consent required"


def test_missing_consent_is_logged_once_per_agent_subject_and_purpose(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    g, _, _ = gate(workspace)
    with caplog.at_level(logging.WARNING, logger="governed_memory"):
        for _ in range(3):
            g.check("persist", "Agent", "alice")
        g.check("persist", "Other", "alice")
    assert len(caplog.records) == 2


def test_replacing_the_gates_collaborators_moves_the_next_decision(workspace: Path) -> None:
    g, _, _ = gate(workspace)
    later = FixedClock(T0 + dt.timedelta(days=1))
    g.clock = later
    g.policy = Policy.model_validate({"policy": {"id": "other", "version": "1"}})
    decision = g.check("persist", "Agent", "alice")
    assert (decision.at, decision.policy_id) == (later.now(), "other")
    assert decision.reason == "no consent required"  # the new policy requires none


# -- summarizers -----------------------------------------------------------------------


def test_an_external_summarizer_needs_summarize_consent(workspace: Path) -> None:
    g, sink, _ = gate(
        workspace, ("alice", "summarize"), policy=rules(summarization={"fallback": "skip"})
    )
    assert isinstance(g.summarizer_decision("gpt-4o-mini", ["alice"]), Allowed)
    assert isinstance(g.summarizer_decision("gpt-4o-mini", ["alice", "bob"]), Skip)
    assert sink.outcomes("summarize") == ["allowed", "skip"]


def test_a_refused_summarizer_falls_back_to_local_by_default(workspace: Path) -> None:
    g, _, _ = gate(workspace)
    decision = g.summarizer_decision("gpt-4o-mini", ["bob"])
    assert isinstance(decision, UseLocal) and "summarize" in decision.reason


# -- defaults and wiring ---------------------------------------------------------------


def test_defaults_are_a_null_sink_the_system_clock_plaintext_stores_and_no_watch(
    workspace: Path,
) -> None:
    g = PolicyGate(policy=Policy(), consent=Consent(), workspace=workspace)
    assert isinstance(g.audit, NullAuditSink)
    assert isinstance(
        g.store_factory(memory_md_path("A", workspace), lambda: ""), PlaintextAgentStore
    )
    assert g.erasure_watch("A") is None


def test_the_erasure_watch_given_is_handed_to_the_conversation(workspace: Path) -> None:
    opened: list[str] = []

    class Watch:
        def __init__(self, agent: str) -> None:
            self.agent = agent

        def on_open(self) -> None:
            opened.append(self.agent)

        def new_erasures(self) -> Erased:
            return Erased()

        def new_rectifications(self) -> tuple[Rectified, ...]:
            return ()

        def marks(self) -> frozenset[str]:
            return frozenset()

    g, _, _ = gate(workspace, erasure_watch=Watch)
    conversation(g)
    assert opened == ["Agent"]


def test_a_governance_builds_its_gate_from_its_own_collaborators(workspace: Path) -> None:
    clock = FixedClock(T0)
    gov = Governance(workspace=workspace, policy=rules(), settings=Settings(), clock=clock)
    assert isinstance(gov.gate, PolicyGate)
    assert gov.gate.policy is gov.policy and gov.gate.consent is gov.consent
    assert gov.gate.audit is gov.audit and gov.gate.clock is clock
    assert gov.gate.workspace == gov.workspace
    later = FixedClock(T0 + dt.timedelta(hours=1))
    gov.clock = later  # the gate follows the Governance
    assert gov.check("persist", "Agent", "alice").at == later.now()
