"""Spans per governed operation, the privacy filter (canaries), keys, and the OTLP helper."""

from __future__ import annotations

import base64
import datetime as dt
import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from governed_memory import (
    ConfigurationError,
    Conversation,
    FixedClock,
    Governance,
    NullAuditSink,
    Policy,
    Settings,
    memory_md_path,
    parse_memory,
)
from governed_memory._audit import (
    AuditKey,
    AuditLog,
    AuditTrail,
    audit_key_from_settings,
    audit_log_dir,
    verify_log,
)
from governed_memory._audit._telemetry import Telemetry, configure_otlp, parse_otlp_headers
from governed_memory._errors import AuditWriteError

KEY_TEXT = "ab" * 32
KEY = AuditKey.from_text(KEY_TEXT)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


def audited_policy(**audit: Any) -> Policy:
    return Policy.model_validate({"audit": {"enabled": True, **audit}})


def governance(
    workspace: Path,
    provider: TracerProvider | None,
    policy: Policy | None = None,
    clock: FixedClock | None = None,
) -> Governance:
    return Governance(
        workspace=workspace,
        policy=policy or audited_policy(),
        settings=Settings(audit_key=KEY_TEXT),
        clock=clock or FixedClock(dt.datetime(2026, 11, 30, 10, 0), tick=dt.timedelta(seconds=1)),
        tracer_provider=provider,
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# -- one span per event, named per the GenAI conventions where they fit -------------

EVENTS: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("persist", {"bytes": 40}, "create_memory", "create_memory"),
    ("preload", {"purpose": "persist"}, "search_memory", "search_memory"),
    ("compact", {"bytes": 80}, "update_memory", "update_memory"),
    ("archive", {"purpose": "persist"}, "governed_memory archive", None),
    ("summarize", {"model": "gpt-4o-mini"}, "governed_memory summarize", None),
    (
        "purge",
        {"deleted": 3, "bytes_freed": 900, "purge_id": "p-1"},
        "delete_memory",
        "delete_memory",
    ),
    ("erase", {"files": 2, "records": 5, "erasure_id": "e-1"}, "delete_memory", "delete_memory"),
    ("export", {"records": 5, "summaries": 1}, "search_memory", "search_memory"),
    (
        "consent.grant",
        {"purpose": "persist", "actor": "dpo"},
        "governed_memory consent.grant",
        None,
    ),
    ("consent.withdraw", {"purpose": "persist"}, "governed_memory consent.withdraw", None),
    ("hold.place", {"hold_id": "LH-1", "actor": "legal"}, "governed_memory hold.place", None),
    ("hold.release", {"hold_id": "LH-1"}, "governed_memory hold.release", None),
    ("keys.rotate", {"to_key_id": "local:ab", "rewrapped": 4}, "governed_memory keys.rotate", None),
    ("keys.shred", {"kind": "subject", "generations": 1}, "governed_memory keys.shred", None),
    ("decrypt", {"error": "DecryptionError"}, "governed_memory decrypt", None),
    ("policy.load", {"source": "policies/regulated.toml"}, "governed_memory policy.load", None),
]


@pytest.mark.parametrize(
    ("event", "extra", "name", "operation"), EVENTS, ids=[e[0] for e in EVENTS]
)
def test_each_governed_event_emits_one_span(
    tmp_path: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    event: str,
    extra: dict[str, Any],
    name: str,
    operation: str | None,
) -> None:
    log = AuditLog(tmp_path, KEY)
    trail = AuditTrail(key=KEY, log=log, tracer_provider=provider)
    outcome = "error" if event == "decrypt" else "ok"
    entry = trail.record_entry(
        event,
        agent="agent-1",
        subject_id="subject-1",
        outcome=outcome,
        policy_id="regulated",
        policy_version="1",
        **extra,
    )
    (span,) = exporter.get_finished_spans()
    got = attrs(span)
    assert span.name == name
    assert got.get("gen_ai.operation.name") == operation
    assert got["governed_memory.event"] == event
    assert got["governed_memory.outcome"] == outcome
    assert got["governed_memory.policy.id"] == "regulated"
    assert got["governed_memory.policy.version"] == "1"
    assert got["governed_memory.agent.hash"] == trail.agent_hash("agent-1")
    assert got["governed_memory.subject.hash"] == trail.subject_hash("subject-1")
    assert entry is not None and got["governed_memory.audit.seq"] == entry.seq
    assert entry.attrs == {
        k.removeprefix("governed_memory."): v
        for k, v in got.items()
        if k.startswith("governed_memory.")
        and k not in ("governed_memory.event", "governed_memory.audit.seq")
    }
    for key, value in extra.items():
        if key in ("actor", "hold_id"):
            assert got[f"governed_memory.{key.split('_')[0]}.hash"] != value
        elif key == "error":
            assert got["error.type"] == value and span.status.status_code is StatusCode.ERROR
        else:
            assert got[f"governed_memory.{key}"] == value


def test_successful_operations_leave_the_span_status_unset(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    AuditTrail(key=KEY, tracer_provider=provider).record(
        "persist", agent="a", subject_id=None, outcome="ok"
    )
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET
    assert span.kind is trace.SpanKind.INTERNAL
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "governed_memory"


def test_spans_are_children_of_the_callers_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("app")
    trail = AuditTrail(key=KEY, tracer_provider=provider)
    with tracer.start_as_current_span("request") as parent:
        trail.record("persist", agent="a", subject_id=None, outcome="ok")
    ours = next(s for s in exporter.get_finished_spans() if s.name == "create_memory")
    assert ours.parent is not None
    assert ours.parent.span_id == parent.get_span_context().span_id


def test_the_global_provider_is_used_when_none_is_passed(
    monkeypatch: pytest.MonkeyPatch, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    AuditTrail(key=KEY).record("preload", agent="a", subject_id=None, outcome="ok")
    assert [s.name for s in exporter.get_finished_spans()] == ["search_memory"]


# -- wired into Governance and Conversation ---------------------------------------------


def test_governed_conversation_emits_spans_and_log_entries_for_each_operation(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gov = governance(workspace, provider)
    path = memory_md_path("Ops", workspace)
    conv = Conversation(name="c", memory_md_path=path, governance=gov, subject_id="s-1")
    conv.add("User", "hello")
    conv.compact("a summary")
    Conversation(name="c", memory_md_path=path, governance=gov)  # preloads the summary
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == [
        "governed_memory policy.load",
        "create_memory",
        "update_memory",
        "governed_memory archive",
        "search_memory",
    ]
    entries = [e for e in AuditLog(audit_log_dir(gov.policy, workspace), KEY).entries()]
    assert [e.event for e in entries] == [
        "audit.segment",
        "policy.load",
        "persist",
        "compact",
        "archive",
        "preload",
    ]
    persist = entries[2]
    assert persist.attrs["agent.hash"] == gov.audit.agent_hash("Ops")  # type: ignore[attr-defined]
    (archive,) = path.parent.joinpath("archive").iterdir()
    block = parse_memory(archive.read_text()).records[0].raw
    assert persist.attrs["bytes"] == len(block.encode("utf-8"))
    assert persist.attrs["outcome"] == "ok" and persist.attrs["decision"] == "persist"
    assert verify_log(audit_log_dir(gov.policy, workspace), KEY).ok


def test_consent_changes_are_spans_and_entries(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gov = governance(workspace, provider)
    gov.grant("s-9", "persist", actor="dpo@example.org")
    gov.withdraw("s-9", "persist", actor="dpo@example.org")
    spans = [s for s in exporter.get_finished_spans() if "consent" in s.name]
    assert [s.name for s in spans] == [
        "governed_memory consent.grant",
        "governed_memory consent.withdraw",
    ]
    assert attrs(spans[0])["governed_memory.actor.hash"] == gov.audit.subject_hash(  # type: ignore[attr-defined]
        "dpo@example.org"
    )


def test_default_mode_creates_no_trail_no_spans_and_no_files(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    gov = Governance(workspace=workspace, policy=Policy(), settings=Settings())
    assert isinstance(gov.audit, NullAuditSink)
    conv = Conversation(memory_md_path=memory_md_path("A", workspace), governance=gov)
    conv.add("User", "hi")
    conv.compact("sum")
    assert exporter.get_finished_spans() == ()
    assert not (workspace / ".governed_memory").exists()


def test_a_passed_tracer_provider_gives_spans_without_a_log(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gov = Governance(
        workspace=workspace, policy=Policy(), settings=Settings(), tracer_provider=provider
    )
    Conversation(memory_md_path=memory_md_path("A", workspace), governance=gov).add("User", "hi")
    assert [s.name for s in exporter.get_finished_spans()] == [
        "governed_memory policy.load",
        "create_memory",
    ]
    assert not (workspace / ".governed_memory").exists()


def test_audit_enabled_without_a_key_refuses_to_start(workspace: Path) -> None:
    with pytest.raises(ConfigurationError, match="GOVERNED_MEMORY_AUDIT_KEY"):
        Governance(workspace=workspace, policy=audited_policy(), settings=Settings())


def test_audit_write_failure_fails_the_add_and_marks_the_span(
    workspace: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gov = governance(workspace, provider)
    conv = Conversation(memory_md_path=memory_md_path("A", workspace), governance=gov)
    log = gov.audit.log  # type: ignore[attr-defined]

    def broken(*args: object, **kwargs: object) -> None:
        raise AuditWriteError("cannot append to the audit log: disk full")

    monkeypatch.setattr(log, "append", broken)
    with pytest.raises(AuditWriteError, match="disk full"):
        conv.add("User", "not reported as done")
    assert conv.conversation_history == []
    span = exporter.get_finished_spans()[-1]
    assert span.name == "create_memory" and span.status.status_code is StatusCode.ERROR
    assert attrs(span)["governed_memory.audit.error"] == "AuditWriteError"


def test_a_failed_store_write_is_recorded_as_an_error(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gov = governance(workspace, provider)
    conv = Conversation(memory_md_path=memory_md_path("A", workspace), governance=gov)
    assert conv.store is not None
    conv.store.append = _raise_oserror  # type: ignore[method-assign]
    with pytest.raises(OSError, match="EIO"):
        conv.add("User", "x")
    span = exporter.get_finished_spans()[-1]
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "OSError"
    assert attrs(span)["governed_memory.outcome"] == "error"


def _raise_oserror(block: str) -> None:
    raise OSError(5, "EIO")


# -- canaries: content and ids never leak unless the policy opts in ------------------------

CONTENT = "CANARY-CONTENT-7f3a9"
SUMMARY = "CANARY-SUMMARY-51c2e"
SUBJECT = "CANARY-SUBJECT-e81d0"
ACTOR = "CANARY-ACTOR-33b7c"


def _exercise(workspace: Path, gov: Governance) -> None:
    path = memory_md_path("Ops", workspace)
    gov.grant(SUBJECT, "persist", actor=ACTOR)
    conv = Conversation(name="c", memory_md_path=path, governance=gov, subject_id=SUBJECT)
    conv.add("User", f"my secret is {CONTENT}")
    conv.compact(f"summary: {SUMMARY}")
    Conversation(name="c", memory_md_path=path, governance=gov, subject_id=SUBJECT)
    gov.summarizer_decision("gpt-4o-mini", [SUBJECT], agent="Ops")
    gov.audit.record(
        "erase",
        agent="Ops",
        subject_id=SUBJECT,
        outcome="ok",
        reason=f"request by {SUBJECT}",
        content=CONTENT,
        summary=SUMMARY,
        subjects=[SUBJECT],
        holds=f"{SUBJECT}-hold",
        requested_by=ACTOR,
        note=CONTENT,
    )
    gov.withdraw(SUBJECT, "persist", actor=ACTOR)


def _everything(exporter: InMemorySpanExporter, workspace: Path, folder: Path) -> str:
    spans = [
        json.dumps({"name": s.name, "attrs": attrs(s), "status": str(s.status.description)})
        for s in exporter.get_finished_spans()
    ]
    files = [p.read_bytes().decode("utf-8") for p in folder.iterdir()]
    return "\n".join(spans + files)


def test_canaries_never_appear_in_spans_or_audit_entries(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    policy = Policy.model_validate(
        {"audit": {"enabled": True}, "consent": {"required_for": ["persist"]}}
    )
    gov = governance(workspace, provider, policy)
    _exercise(workspace, gov)
    text = _everything(exporter, workspace, audit_log_dir(policy, workspace))
    assert len(exporter.get_finished_spans()) >= 8
    for canary in (CONTENT, SUMMARY, SUBJECT, ACTOR, "Ops"):
        assert canary not in text, canary
    assert gov.audit.subject_hash(SUBJECT) in text  # type: ignore[attr-defined]
    assert gov.audit.subject_hash(ACTOR) in text  # type: ignore[attr-defined]
    assert verify_log(audit_log_dir(policy, workspace), KEY).ok


def test_content_and_ids_appear_only_with_the_opt_ins(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    policy = Policy.model_validate(
        {"audit": {"enabled": True, "include_content": True, "include_subject_ids": True}}
    )
    gov = governance(workspace, provider, policy)
    conv = Conversation(
        memory_md_path=memory_md_path("Ops", workspace), governance=gov, subject_id=SUBJECT
    )
    conv.add("User", f"my secret is {CONTENT}")
    conv.compact(f"summary: {SUMMARY}")
    entries = list(AuditLog(audit_log_dir(policy, workspace), KEY).entries())
    persist = next(e for e in entries if e.event == "persist")
    assert persist.attrs["content"] == f"my secret is {CONTENT}"
    assert persist.attrs["subject.id"] == SUBJECT and persist.attrs["agent.name"] == "Ops"
    compact = next(e for e in entries if e.event == "compact")
    assert compact.attrs["content"] == f"summary: {SUMMARY}"
    span = next(s for s in exporter.get_finished_spans() if s.name == "create_memory")
    assert attrs(span)["governed_memory.content"] == f"my secret is {CONTENT}"


def test_unknown_string_attributes_are_dropped_numbers_kept(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    AuditTrail(key=KEY, tracer_provider=provider).record(
        "purge", agent=None, subject_id=None, outcome="ok", note="free text", deleted=4, dry=False
    )
    got = attrs(exporter.get_finished_spans()[0])
    assert "governed_memory.note" not in got
    assert got["governed_memory.deleted"] == 4 and got["governed_memory.dry"] is False


def test_malformed_event_or_outcome_is_refused() -> None:
    trail = AuditTrail(key=KEY, spans=False)
    with pytest.raises(ConfigurationError, match="'Bad Event'"):
        trail.record("Bad Event", agent=None, subject_id=None, outcome="ok")
    with pytest.raises(ConfigurationError, match="'it went fine'"):
        trail.record("persist", agent=None, subject_id=None, outcome="it went fine")


# -- keys and keyed hashes ---------------------------------------------------------------------


def test_keyed_hashes_are_stable_keyed_and_domain_separated() -> None:
    other = AuditKey(b"\x05" * 32)
    assert KEY.pseudonym("subject", "alice") == KEY.pseudonym("subject", "alice")
    assert KEY.pseudonym("subject", "alice") != other.pseudonym("subject", "alice")
    assert KEY.pseudonym("subject", "alice") != KEY.pseudonym("agent", "alice")
    assert len(KEY.pseudonym("subject", "alice")) == 32
    with pytest.raises(ConfigurationError, match="'person'"):
        KEY.pseudonym("person", "alice")


def test_audit_key_text_forms_and_errors() -> None:
    raw = bytes(range(32))
    assert AuditKey.from_text(raw.hex()).key_id == AuditKey(raw).key_id
    assert AuditKey.from_text(base64.b64encode(raw).decode()).key_id == AuditKey(raw).key_id
    assert AuditKey.from_text(base64.urlsafe_b64encode(raw).decode().rstrip("=")).key_id == (
        AuditKey(raw).key_id
    )
    with pytest.raises(ConfigurationError, match=r"GOVERNED_MEMORY_AUDIT_KEY is 8 bytes.*keygen"):
        AuditKey.from_text(base64.b64encode(b"12345678").decode())
    with pytest.raises(ConfigurationError, match="not hex or base64"):
        AuditKey.from_text("not a key!")
    assert "ab" not in repr(KEY).split("key_id")[0]


def test_audit_key_derives_from_the_master_key_under_its_own_label() -> None:
    master = bytes(range(100, 132))
    settings = Settings(master_key=base64.b64encode(master).decode())
    key = audit_key_from_settings(settings)
    assert key is not None and key.key_id == AuditKey.derive_from_master(master).key_id
    assert key.key_id != AuditKey(master).key_id  # derived, never the master key itself
    assert (
        audit_key_from_settings(
            Settings(audit_key=KEY_TEXT, master_key=base64.b64encode(master).decode())
        ).key_id
        == KEY.key_id
    )  # type: ignore[union-attr]
    assert audit_key_from_settings(Settings()) is None


def test_entries_for_finds_a_subject_and_an_agent(workspace: Path) -> None:
    gov = governance(workspace, None)
    gov.grant("s-1", "persist", actor="dpo")
    conv = Conversation(
        memory_md_path=memory_md_path("A", workspace), governance=gov, subject_id="s-1"
    )
    conv.add("User", "x")
    trail = gov.audit
    assert isinstance(trail, AuditTrail)
    assert [e["event"] for e in trail.entries_for(subject_id="s-1")] == ["consent.grant", "persist"]
    assert [e["event"] for e in trail.entries_for(agent="A")] == ["persist"]
    assert trail.entries_for(agent="A", subject_id="other") == []


def test_trail_purges_expired_segments_by_the_retention_policy(workspace: Path) -> None:
    clock = FixedClock(dt.datetime(2026, 1, 15, 12, 0))
    gov = governance(workspace, None, clock=clock)
    for month in (1, 2, 3, 4):  # building the Governance wrote no January entry
        clock.set(dt.datetime(2026, month, 15, 12, 0))
        gov.audit.record("policy.load", agent=None, subject_id=None, outcome="ok")
    trail = gov.audit
    assert isinstance(trail, AuditTrail)
    retention = Policy.model_validate(
        {"retention": {"audit_max_age": "40d"}, "audit": {"enabled": True}}
    ).retention
    removed = trail.purge_expired(retention, now=dt.datetime(2026, 4, 20, 12, 0))
    assert removed == ["audit-2026-01.jsonl", "audit-2026-02.jsonl"]
    assert trail.verify().ok


# -- OTLP -------------------------------------------------------------------------------------


def test_configure_otlp_needs_an_endpoint() -> None:
    with pytest.raises(ConfigurationError, match="GOVERNED_MEMORY_OTLP_ENDPOINT is not set"):
        configure_otlp(Settings())


def test_configure_otlp_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'governed-memory\[otlp\]'"):
        configure_otlp(Settings(otlp_endpoint="http://127.0.0.1:4318"))


def test_otlp_headers_parse_and_refuse_malformed_parts() -> None:
    assert parse_otlp_headers("authorization=Bearer a=b, x-team = ops") == {
        "authorization": "Bearer a=b",
        "x-team": "ops",
    }
    assert parse_otlp_headers(None) == {}
    with pytest.raises(ConfigurationError, match="part 2 is not 'name=value'") as info:
        parse_otlp_headers("a=1,secret-token")
    assert "secret-token" not in str(info.value)


class _Collector(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Collector", (_Collector,), {"received": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_configure_otlp_ships_spans_to_a_collector(
    collector: tuple[str, type[_Collector]],
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    url, handler = collector
    settings = Settings(
        otlp_endpoint=url, otlp_headers="x-token=s3cret", service_name="bank-agents"
    )
    provider = configure_otlp(settings)
    try:
        AuditTrail(key=KEY, tracer_provider=provider).record(
            "persist", agent="a", subject_id="s", outcome="ok", policy_id="regulated"
        )
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    path, headers, body = handler.received[0]
    assert path == "/v1/traces"
    assert {k.lower(): v for k, v in headers.items()}["x-token"] == "s3cret"
    request = ExportTraceServiceRequest.FromString(body)
    resource = request.resource_spans[0]
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "bank-agents"
    span = resource.scope_spans[0].spans[0]
    assert span.name == "create_memory"
    names = {a.key for a in span.attributes}
    assert {"gen_ai.operation.name", "governed_memory.subject.hash"} <= names


def test_telemetry_emit_marks_errors() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    Telemetry(provider).emit("x", {"a": 1}, error="boom")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "boom"


# -- every wired operation, end to end ------------------------------------------------------


def test_every_wired_operation_reaches_spans_and_the_log_without_canaries(
    workspace: Path, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Write, preload, compaction, archive, consent, holds, export, erasure, key rotation,
    decryption failure and purge, each through the layer that owns it."""
    from governed_memory import Retention, erase, export_subject
    from governed_memory._errors import DecryptionError
    from governed_memory._keys._rotation import rotate_master_key

    master = base64.b64encode(bytes(range(32))).decode()
    policy = Policy.model_validate(
        {
            "audit": {"enabled": True},
            "encryption": {"enabled": True},
            "retention": {"exports_max_age": "1d"},
        }
    )
    gov = Governance(
        workspace=workspace,
        policy=policy,
        settings=Settings(audit_key=KEY_TEXT, master_key=master),
        clock=FixedClock(dt.datetime(2026, 11, 30, 10, 0), tick=dt.timedelta(seconds=1)),
        tracer_provider=provider,
    )
    path = memory_md_path("Ops", workspace)
    gov.grant(SUBJECT, "persist", actor=ACTOR)
    conv = Conversation(name="c", memory_md_path=path, governance=gov, subject_id=SUBJECT)
    conv.add("User", f"my secret is {CONTENT}")
    conv.compact(f"summary: {SUMMARY}")
    Conversation(name="c", memory_md_path=path, governance=gov, subject_id=SUBJECT)
    retention = Retention(gov)
    hold = retention.holds.place(subject=SUBJECT, reason="case", actor=ACTOR)
    retention.holds.release(hold_id=hold.id, actor=ACTOR)
    export_subject(gov, SUBJECT, tmp_path / "export")
    rotate_master_key(gov.keyring)
    retention.purge()
    erase(gov, subject=SUBJECT, actor=ACTOR)
    gov.withdraw(SUBJECT, "persist", actor=ACTOR)
    encrypted = next(path.parent.glob("MEMORY.md*"))
    data = bytearray(encrypted.read_bytes())
    data[-5] ^= 0xFF
    encrypted.write_bytes(bytes(data))
    with pytest.raises(DecryptionError):
        Conversation(name="c", memory_md_path=path, governance=gov)

    folder = audit_log_dir(policy, workspace)
    events = {e.event for e in AuditLog(folder, KEY).entries()}
    wired = {
        "policy.load",
        "persist",
        "preload",
        "compact",
        "archive",
        "consent.grant",
        "consent.withdraw",
        "hold.place",
        "hold.release",
        "export",
        "erase",
        "keys.create",
        "keys.rotate",
        "purge",
        "decrypt",
    }
    assert wired <= events, wired - events
    span_events = {attrs(s)["governed_memory.event"] for s in exporter.get_finished_spans()}
    assert wired <= span_events
    text = _everything(exporter, workspace, folder)
    for canary in (CONTENT, SUMMARY, SUBJECT, ACTOR):
        assert canary not in text, canary
    report = verify_log(folder, KEY)
    assert report.ok, [str(f) for f in report.findings]
