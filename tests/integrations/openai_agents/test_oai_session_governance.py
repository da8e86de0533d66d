"""Everything the gate does applies to a GovernedSession: consent, encryption, isolation, erasure, export, holds, audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from oai_helpers import POLICIES, SUBJECT, Setup, close_audit, make_setup, run

from governed_memory import (
    ConfigurationError,
    ErasureBlockedError,
    erase,
    export_subject,
    verify_audit_log,
)
from governed_memory._audit import audit_log_dir, iter_entries
from governed_memory._subjects import subject_context
from governed_memory.integrations.openai_agents import GovernedSession

OTHER = "customer-7"


def say(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def session(setup: Setup, subject: str | None = SUBJECT, sid: str = "conv-1") -> GovernedSession:
    return GovernedSession(sid, subject_id=subject, governance=setup.gov)


def stored_records(setup: Setup, subject: str | None = SUBJECT, sid: str = "conv-1") -> int:
    """How many records of ``subject`` the session's memory holds on disk (decrypted)."""
    from governed_memory import parse_memory

    gov = setup.gov
    store = gov.store_factory(gov.workspace / "agents" / sid / "MEMORY.md", lambda: "")
    if gov.isolates_subjects and subject is not None:
        store = store.subject_store(subject)
    try:
        text = store.read_memory() or ""
    finally:
        store.close()
    return sum(1 for r in parse_memory(text).records if r.subject_id == subject)


def events(setup: Setup) -> list[tuple[str, str]]:
    folder = audit_log_dir(setup.gov.policy, setup.workspace)
    return [(e.event, str(e.attrs.get("outcome"))) for e in iter_entries(folder)]


# -- subject isolation ------------------------------------------------------


def test_a_session_never_returns_another_subjects_items(setup: Setup) -> None:
    if setup.gov.policy.consent.required_for:
        setup.gov.grant(OTHER, "persist", actor="dpo@example.org")
    run(session(setup).add_items([say("mine")]))
    run(session(setup, OTHER).add_items([say("theirs")]))
    assert run(session(setup).get_items()) == [say("mine")]
    assert run(session(setup, OTHER).get_items()) == [say("theirs")]
    # pop and clear touch the session's own subject only
    assert run(session(setup).pop_item()) == say("mine")
    run(session(setup).clear_session())
    assert run(session(setup, OTHER).get_items()) == [say("theirs")]
    assert stored_records(setup, OTHER) == 1


# -- consent ---------------------------------------------------------------


def test_a_withdrawal_stops_the_next_write(regulated: Setup) -> None:
    gov = regulated.gov
    live = session(regulated)
    run(live.add_items([say("before")]))
    assert stored_records(regulated) == 1
    gov.withdraw(SUBJECT, "persist", actor="dpo@example.org")
    run(live.add_items([say("after")]))
    assert stored_records(regulated) == 1  # nothing new reached disk
    # As a governed Conversation keeps such a message in its history, the live
    # session keeps the item in memory; stored items without consent are not read back.
    assert run(live.get_items()) == [say("after")]
    assert run(session(regulated).get_items()) == []  # a restart: nothing
    assert ("persist", "memory_only") in events(regulated)
    gov.grant(SUBJECT, "persist", actor="dpo@example.org")
    assert run(session(regulated).get_items()) == [say("before")]


def test_without_a_subject_nothing_is_persisted_under_a_consent_policy(regulated: Setup) -> None:
    live = session(regulated, subject=None)
    run(live.add_items([say("anonymous")]))
    assert run(live.get_items()) == [say("anonymous")]
    assert run(session(regulated, subject=None).get_items()) == []
    assert not list((regulated.workspace / "agents").rglob("MEMORY.md*"))


# -- encryption at rest --------------------------------------------------------


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize("policy", ["default", "regulated"])
def test_no_plaintext_canary_on_disk_in_encrypted_mode(tmp_path: Path, policy: str) -> None:
    """Regulated encrypts: the canary is nowhere on disk. Default is the control: it is there."""
    setup = make_setup(tmp_path, policy)
    canary = "CANARY-7f3a9c"
    s = session(setup)
    run(s.add_items([say(f"my card is {canary}"), {"role": "assistant", "content": canary}]))
    assert run(session(setup).get_items())[1]["content"] == canary
    close_audit(setup.gov)
    found = [p for p in _files(tmp_path) if canary.encode() in p.read_bytes()]
    if policy == "regulated":
        assert found == []
    else:
        assert [p.name for p in found] == ["MEMORY.md"]


# -- erasure and export ---------------------------------------------------------


def test_an_erasure_removes_the_subjects_items_and_a_live_session_drops_them(setup: Setup) -> None:
    if setup.gov.policy.consent.required_for:
        setup.gov.grant(OTHER, "persist", actor="dpo@example.org")
    live = session(setup)
    run(live.add_items([say("to be forgotten")]))
    run(session(setup, OTHER).add_items([say("stays")]))
    erase(setup.gov, subject=SUBJECT, reason="Art. 17 request", actor="dpo@example.org")
    assert run(live.get_items()) == []
    assert stored_records(setup) == 0
    assert run(session(setup, OTHER).get_items()) == [say("stays")]


def test_an_erasure_also_drops_items_kept_off_disk(regulated: Setup) -> None:
    live = session(regulated)
    regulated.gov.withdraw(SUBJECT, "persist", actor="dpo@example.org")
    run(live.add_items([say("memory only")]))
    assert run(live.get_items()) == [say("memory only")]
    erase(regulated.gov, subject=SUBJECT, reason="Art. 17 request", actor="dpo@example.org")
    assert run(live.get_items()) == []


def test_the_subject_export_contains_the_sessions_items(setup: Setup, tmp_path: Path) -> None:
    run(
        session(setup).add_items(
            [say("export-me-1"), {"role": "assistant", "content": "export-me-2"}]
        )
    )
    result = export_subject(setup.gov, SUBJECT, tmp_path / "export")
    assert result.records == 2
    exported = json.loads((tmp_path / "export" / "export.json").read_text())
    text = json.dumps(exported)
    assert "export-me-1" in text and "export-me-2" in text


# -- holds ---------------------------------------------------------------------


@pytest.mark.parametrize("target", ["subject", "agent"])
def test_a_legal_hold_blocks_clear_session_and_pop_item(setup: Setup, target: str) -> None:
    s = session(setup)
    run(s.add_items([say("evidence")]))
    holds = subject_context(setup.gov).holds
    assert holds is not None
    where = {"subject": SUBJECT} if target == "subject" else {"agent": "conv-1"}
    hold = holds.place(reason="litigation 2026-114", actor="legal@example.org", **where)
    with pytest.raises(
        ErasureBlockedError, match=rf"session 'conv-1' \(clear_session\).*{hold.id}.*hold release"
    ):
        run(s.clear_session())
    with pytest.raises(ErasureBlockedError, match=rf"session 'conv-1' \(pop_item\).*{hold.id}"):
        run(s.pop_item())
    assert run(s.get_items()) == [say("evidence")]
    assert stored_records(setup) == 1
    holds.release(hold_id=hold.id, reason="case closed", actor="legal@example.org")
    run(s.clear_session())
    assert run(s.get_items()) == []


# -- audit ---------------------------------------------------------------------


def test_every_operation_is_audited_and_the_log_verifies(regulated: Setup) -> None:
    s = session(regulated)
    run(s.add_items([say("one"), say("two"), say("three")]))
    run(s.get_items())
    run(s.pop_item())
    run(s.clear_session())
    close_audit(regulated.gov)
    seen = events(regulated)
    for wanted in [
        ("persist", "ok"),
        ("preload", "ok"),
        ("session.pop", "ok"),
        ("session.clear", "ok"),
    ]:
        assert wanted in seen, seen
    folder = audit_log_dir(regulated.gov.policy, regulated.workspace)
    report = verify_audit_log(folder, regulated.key(), workspace=regulated.workspace)
    assert report.ok, report
    pop = next(e for e in iter_entries(folder) if e.event == "session.pop")
    assert pop.attrs["records"] == 1 and pop.attrs["bytes"] > 0
    assert "subject.hash" in pop.attrs and "content" not in pop.attrs
    assert not any(b"three" in p.read_bytes() for p in _files(folder))


# -- no way around governance ---------------------------------------------------------


def test_governance_none_is_refused_under_a_configured_policy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "ws"))
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", str(POLICIES / "regulated.toml"))
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", "5a" * 32)
    with pytest.raises(
        ConfigurationError,
        match=r"GovernedSession\('conv-1', governance=None\) asks to run without governance.*'regulated'",
    ):
        GovernedSession("conv-1", governance=None)


def test_a_session_without_governance_runs_under_the_configured_policy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from governed_memory._crypto import generate_master_key

    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "ws"))
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", str(POLICIES / "regulated.toml"))
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", generate_master_key())
    monkeypatch.setenv("GOVERNED_MEMORY_KEYRING_DIR", str(tmp_path / "keyring"))
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", "5a" * 32)
    s = GovernedSession("conv-1", subject_id=SUBJECT)
    assert s.governance is not None and s.governance.policy.id == "regulated"
    run(s.add_items([say("no consent yet")]))
    assert not list((tmp_path / "ws" / "agents").rglob("MEMORY.md*"))


def test_a_gate_that_is_not_a_governance_is_refused(setup: Setup) -> None:
    with pytest.raises(ConfigurationError, match=r"not a governed_memory\.Governance"):
        GovernedSession("conv-1", governance=setup.gov.gate)  # type: ignore[arg-type]


def test_default_mode_refuses_a_session_that_holds_encrypted_memory(
    regulated: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(session(regulated).add_items([say("sealed")]))
    monkeypatch.setenv("WORKSPACE_DIR", str(regulated.workspace))
    with pytest.raises(
        ConfigurationError, match=r"session 'conv-1' holds governed memory \(subjects\)"
    ):
        run(GovernedSession("conv-1", governance=None).get_items())


def test_an_item_kept_off_disk_stays_in_its_place_when_consent_returns(regulated: Setup) -> None:
    gov, live = regulated.gov, session(regulated)
    run(live.add_items([say("stored")]))
    gov.withdraw(SUBJECT, "persist", actor="dpo@example.org")
    run(live.add_items([say("memory only")]))
    gov.grant(SUBJECT, "persist", actor="dpo@example.org")
    run(live.add_items([say("stored again")]))
    assert run(live.get_items()) == [say("stored"), say("memory only"), say("stored again")]
    assert run(live.pop_item()) == say("stored again")
    assert run(live.pop_item()) == say("memory only")  # nothing on disk changes for it
    assert stored_records(regulated) == 1
    assert run(session(regulated).get_items()) == [say("stored")]


def test_each_session_operation_is_a_span(tmp_path: Path) -> None:
    """With a tracer provider, the audit layer's OpenTelemetry spans cover every operation."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from governed_memory import Governance

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    setup = make_setup(tmp_path, "regulated")
    gov = Governance(workspace=setup.workspace, settings=setup.settings, tracer_provider=provider)
    s = GovernedSession("conv-1", subject_id=SUBJECT, governance=gov)
    run(s.add_items([say("one"), say("two")]))
    run(s.get_items())
    run(s.pop_item())
    run(s.clear_session())
    names = [span.name for span in exporter.get_finished_spans()]
    assert names[-5:] == [
        "create_memory",  # add_items: persist
        "search_memory",  # get_items: preload
        "search_memory",  # pop_item reads the newest item back through the preload gate
        "delete_memory",  # pop_item
        "delete_memory",  # clear_session
    ], names
    close_audit(gov)
    close_audit(setup.gov)
