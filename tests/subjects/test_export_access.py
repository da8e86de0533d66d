"""Art. 15(1) completeness of the export: schema, purposes and consent, recipients, retention, receipt."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from llm_stub import StubLLM
from subjects_helpers import conversation

from governed_memory import ContextCompressor, FixedClock, Governance, LocalSigningKey, Settings
from governed_memory._policy._model import Policy, load_policy
from governed_memory._records import ExportReceiptStore, HoldRegistry
from governed_memory._subjects import export_receipt, export_receipts, export_subject
from governed_memory._subjects._schema import render_schema

ROOT = Path(__file__).parents[2]
SCHEMA_FILE = ROOT / "docs" / "export-schema.json"
AUDIT_KEY = "ab" * 32


class Agent:
    """The attributes ContextCompressor reads from an agent."""

    def __init__(self, memory: Any) -> None:
        self.agent_name = "A"
        self.model_name = "gpt-4o-mini"
        self.context_length = 100
        self.short_memory = memory
        self.user_name = "Human"


SIGNING_KEY = LocalSigningKey.generate().to_base64()


def _gov(workspace: Path, clock: FixedClock, policy: Policy, **kwargs: Any) -> Governance:
    return Governance(
        workspace=workspace,
        policy=policy,
        clock=clock,
        # Regulated policies sign their receipts (evidence.require_signing).
        settings=Settings(audit_key=AUDIT_KEY, signing_key=SIGNING_KEY),
        **kwargs,
    )


def _regulated(workspace: Path, clock: FixedClock) -> Governance:
    from governed_memory._crypto._providers import InMemoryKeyProvider

    return _gov(workspace, clock, load_policy("regulated"), key_provider=InMemoryKeyProvider())


def _alice_regulated(workspace: Path, clock: FixedClock) -> Governance:
    """The regulated policy, alice's persist consent, one message archived by a compaction."""
    gov = _regulated(workspace, clock)
    gov.grant("alice", "persist", actor="app")
    conv = conversation(gov, "A", subject_id="alice")
    conv.add("Human", "alice asks about her loan")
    conv.compact("[Compressed Memory Summary] a loan question")
    return gov


def _audited(**sections: Any) -> Policy:
    return Policy.model_validate({"audit": {"enabled": True}, **sections})


def _valid(out: Path) -> dict[str, Any]:
    schema = json.loads(SCHEMA_FILE.read_text())
    document = json.loads((out / "export.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)
    return document  # type: ignore[no-any-return]


def _rows(document: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The retention rows of one kind of artefact."""
    return [r for r in document["retention"]["artefacts"] if r["kind"] == kind]


def _due_after_limit(row: dict[str, Any], days: int) -> bool:
    """Whether the row is due exactly ``days`` after the time its age counts from."""
    start = dt.datetime.fromisoformat(row["age_from"])
    return dt.datetime.fromisoformat(row["delete_after"]) == start + dt.timedelta(days=days)


def _compact(conv: Any, stub_llm: StubLLM | None) -> None:
    if stub_llm is None:
        compressor = ContextCompressor(summarizer_model="local/extractive")
    else:
        compressor = ContextCompressor(
            summarizer_model="openai/stub-summarizer", api_base=stub_llm.url, api_key="sk-test"
        )
    assert compressor.compress(Agent(conv)) is not None


# -- the schema -----------------------------------------------------------------


def test_the_committed_schema_is_the_one_the_models_generate() -> None:
    assert SCHEMA_FILE.read_text() == render_schema(), (
        "docs/export-schema.json is stale; regenerate it with "
        "`python -m governed_memory._subjects._write_schema > docs/export-schema.json`"
    )


def test_the_documented_command_prints_the_schema() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "governed_memory._subjects._write_schema"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == SCHEMA_FILE.read_text() and done.stderr == ""


def test_a_default_policy_export_validates_and_says_every_artefact_is_kept_forever(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = Governance(workspace=workspace, clock=clock)
    conv = conversation(gov, "A")
    conv.add("Human", "alice asks", subject_id="alice")
    conv.compact("[Compressed Memory Summary] alice asked")
    export_subject(gov, "alice", tmp_path / "out")
    document = _valid(tmp_path / "out")
    assert document["version"] == 2 and document["id"]
    rows = document["retention"]["artefacts"]
    files = [r for r in rows if r["kind"] in ("memory", "archive")]
    assert {r["status"] for r in files} == {"forever"}
    assert {r["artefact"] for r in files} == {
        r["source_file"] for r in document["records"] + document["summaries"]
    }
    assert document["recipients"]["from_audit_trail"] is False
    assert "no audit log" in document["recipients"]["note"]


def test_a_regulated_policy_export_validates_with_its_dates_and_schedule(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    """Under the shipped regulated policy: encrypted, subject memories, 30-day archives."""
    gov = _alice_regulated(workspace, clock)
    export_subject(gov, "alice", tmp_path / "out")
    document = _valid(tmp_path / "out")
    assert document["encrypted_workspace"] is True
    retention = document["retention"]
    assert retention["purge_schedule"] == "cron '0 3 * * *' (UTC)"
    [archive] = _rows(document, "archive")
    assert archive["rule"] == "archives_max_age" and archive["limit"] == "30d"
    assert archive["status"] == "scheduled" and _due_after_limit(archive, 30)
    # The archive is named by the compaction's time (the fixed clock: 2026-11-30 10:00).
    named = dt.datetime.fromisoformat(archive["age_from"])
    assert named.replace(microsecond=0) == dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)
    assert "/subjects/" in archive["artefact"]
    assert {r["memory"] for r in document["records"]} == {"subject"}
    [grant] = _rows(document, "consent")
    assert grant["status"] == "in_force"  # the latest grant of persist is never purged by age
    [export] = _rows(document, "export")
    assert export["status"] == "not_managed"


def test_an_export_into_the_exports_folder_says_when_exports_max_age_purges_it(
    workspace: Path, clock: FixedClock
) -> None:
    gov = _regulated(workspace, clock)
    gov.grant("alice", "persist", actor="app")
    conversation(gov, "A", subject_id="alice").add("Human", "hello")
    exports = gov.governance_dir / "exports"
    exports.mkdir(parents=True)
    export_subject(gov, "alice", exports / "alice-1")
    document = _valid(exports / "alice-1")
    [export] = _rows(document, "export")
    assert export["rule"] == "exports_max_age" and export["limit"] == "7d"
    assert export["age_from"] == document["generated_at"] and _due_after_limit(export, 7)


# -- purposes and consent ---------------------------------------------------------


def test_purposes_and_consent_history_follow_grants_and_withdrawals(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = _regulated(workspace, clock)
    gov.grant("alice", "persist", actor="app")
    gov.grant("alice", "summarize", actor="app")
    gov.withdraw("alice", "summarize", actor="alice herself")
    gov.grant("bob", "persist", actor="app")
    conversation(gov, "A", subject_id="alice").add("Human", "hi")
    export_subject(gov, "alice", tmp_path / "out")
    document = _valid(tmp_path / "out")
    by_purpose = {p["purpose"]: p for p in document["purposes"]}
    assert set(by_purpose) == {"persist", "summarize"}
    assert by_purpose["persist"]["consent"] == "granted"
    assert by_purpose["persist"]["consent_required"] is True
    assert by_purpose["summarize"]["consent"] == "withdrawn"
    assert by_purpose["summarize"]["since"] == document["consent"][2]["at"]
    assert [(c["purpose"], c["action"], c["actor"]) for c in document["consent"]] == [
        ("persist", "grant", "app"),
        ("summarize", "grant", "app"),
        ("summarize", "withdraw", "alice herself"),
    ]
    assert [r["status"] for r in _rows(document, "consent")] == ["in_force", "forever", "forever"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "- **summarize**: sending a conversation to a model" in report
    assert "This purpose needs your consent. Your consent: **withdrawn** since" in report
    assert "bob" not in report


def test_a_subject_without_consent_records_reads_not_recorded(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = Governance(workspace=workspace, clock=clock)
    conversation(gov, "A").add("Human", "hi", subject_id="carol")
    export_subject(gov, "carol", tmp_path / "out")
    document = _valid(tmp_path / "out")
    assert {p["consent"] for p in document["purposes"]} == {"not recorded"}
    assert document["consent"] == []
    assert "No consent was ever recorded for you." in (tmp_path / "out" / "report.md").read_text()


# -- recipients -------------------------------------------------------------------


def test_an_external_summarizer_that_received_the_data_is_a_recipient(
    workspace: Path, clock: FixedClock, tmp_path: Path, stub_llm: StubLLM
) -> None:
    gov = _gov(workspace, clock, _audited())
    conv = conversation(gov, "A", subject_id="alice")
    conv.add("Human", "alice asks about her loan")
    conv.add("A", "an answer")
    _compact(conv, stub_llm)
    assert len(stub_llm.requests) == 1  # the model really was sent the transcript
    other = conversation(gov, "B", subject_id="bob")
    other.add("Human", "bob's question")
    _compact(other, stub_llm)
    export_subject(gov, "alice", tmp_path / "out")
    document = _valid(tmp_path / "out")
    recipients = document["recipients"]
    assert recipients["from_audit_trail"] is True
    [external] = recipients["external"]
    assert external["model"] == "openai/stub-summarizer" and external["provider"] == "openai"
    assert external["times"] == 1 and external["agents"] == ["A"]  # bob's summary is not hers
    summarize = [e for e in document["audit"] if e["event"] == "summarize"]
    assert len(summarize) == 1 and summarize[0]["attrs"]["outcome"] == "allowed"
    assert external["first_at"] == summarize[0]["ts"]
    assert recipients["local"] == []
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| openai/stub-summarizer | openai | 1 |" in report


def test_a_local_summarizer_is_listed_as_local_and_is_no_recipient(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = _gov(workspace, clock, _audited())
    conv = conversation(gov, "A", subject_id="alice")
    conv.add("Human", "alice asks about her loan")
    _compact(conv, None)
    export_subject(gov, "alice", tmp_path / "out")
    recipients = _valid(tmp_path / "out")["recipients"]
    assert recipients["external"] == []
    assert [(r["model"], r["instead_of"], r["times"]) for r in recipients["local"]] == [
        ("local/extractive", None, 1)
    ]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "No external model was sent your data." in report
    assert "| local/extractive |  | 1 |" in report


def test_an_external_summarizer_the_policy_replaced_is_no_recipient(
    workspace: Path, clock: FixedClock, tmp_path: Path, stub_llm: StubLLM
) -> None:
    policy = _audited(summarization={"external_allowed": False, "allowed_models": ["local/*"]})
    gov = _gov(workspace, clock, policy)
    conv = conversation(gov, "A", subject_id="alice")
    conv.add("Human", "alice asks about her loan")
    _compact(conv, stub_llm)
    assert stub_llm.requests == []
    export_subject(gov, "alice", tmp_path / "out")
    recipients = _valid(tmp_path / "out")["recipients"]
    assert recipients["external"] == []
    assert [(r["model"], r["instead_of"]) for r in recipients["local"]] == [
        ("local/extractive", "openai/stub-summarizer")
    ]


# -- retention and holds ------------------------------------------------------------


def test_retention_dates_follow_the_archive_time_and_the_rule(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    policy = _audited(retention={"archives_max_age": "30d", "audit_max_age": "60d"})
    gov = _gov(workspace, clock, policy)
    conv = conversation(gov, "A")
    conv.add("Human", "first", subject_id="alice")
    conv.compact("[Compressed Memory Summary] first")
    clock.advance(dt.timedelta(days=3))
    conv.add("Human", "second", subject_id="alice")
    conv.compact("[Compressed Memory Summary] second")
    export_subject(gov, "alice", tmp_path / "out")
    rows = _valid(tmp_path / "out")["retention"]["artefacts"]
    archives = [r for r in rows if r["kind"] == "archive"]
    due = [dt.datetime.fromisoformat(r["delete_after"]).replace(microsecond=0) for r in archives]
    start = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)
    assert due == [start + dt.timedelta(days=30), start + dt.timedelta(days=33)]
    [audit] = [r for r in rows if r["kind"] == "audit"]
    assert audit["rule"] == "audit_max_age" and audit["limit"] == "60d"
    assert _due_after_limit(audit, 60)


def test_archives_max_count_says_how_many_compactions_make_an_archive_due(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = Governance(
        workspace=workspace,
        clock=clock,
        policy=Policy.model_validate({"retention": {"archives_max_count": 2}}),
    )
    conv = conversation(gov, "A")
    for n in range(3):
        conv.add("Human", f"message {n}", subject_id="alice")
        conv.compact(f"[Compressed Memory Summary] {n}")
        clock.advance(dt.timedelta(seconds=2))
    export_subject(gov, "alice", tmp_path / "out")
    rows = [r for r in _valid(tmp_path / "out")["retention"]["artefacts"] if r["kind"] == "archive"]
    assert [r["status"] for r in rows] == ["scheduled", "by_count", "by_count"]
    assert rows[0]["note"].startswith("deleted by the next purge: archive 3 of 3")
    assert "1 more compaction(s)" in rows[1]["note"]
    assert "2 more compaction(s)" in rows[2]["note"]


def test_a_legal_hold_is_shown_as_what_keeps_the_artefacts(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = _alice_regulated(workspace, clock)
    hold = HoldRegistry(gov.governance_dir, clock=clock, sealing=gov.sealing).place(
        subject="alice", reason="case 7", actor="legal"
    )
    export_subject(gov, "alice", tmp_path / "out")
    document = _valid(tmp_path / "out")
    rows = document["retention"]["artefacts"]
    held = [r for r in rows if r["status"] == "held"]
    assert {r["kind"] for r in held} == {"archive", "memory", "consent"}
    assert all(r["held_by"] == [hold.id] and r["delete_after"] is None for r in held)
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"kept: legal hold {hold.id}" in report


# -- the report and the receipt -------------------------------------------------------


def test_the_report_lists_the_article_15_items_in_order(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = _regulated(workspace, clock)
    gov.grant("alice", "persist", actor="app")
    conversation(gov, "A", subject_id="alice").add("Human", "hello there")
    export_subject(gov, "alice", tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.startswith("# Your personal data: access report (GDPR Art. 15)\n")
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings == [
        "## The data we hold",
        "## (a) Why we process it: the purposes",
        "## (b) What kinds of data",
        "## (c) Who received it",
        "## (d) How long we keep it",
        "## (e) Your rights",
        "## (f) Complaints",
        "## (g) Where the data came from",
        "## (h) Automated decisions",
    ]
    assert "- 1 message(s) and 0 summary(ies) (0 withheld) in 1 agent(s)." in report
    assert "deletions run on schedule: cron '0 3 * * *' (UTC)." in report
    assert "| A | yours alone | persist | 1 |" in report
    assert "hello there" not in report  # the data is in export.md, the report summarises it


def test_the_receipt_names_every_file_with_its_sha256(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = _gov(workspace, clock, _audited())
    conversation(gov, "A").add("Human", "hi", subject_id="alice")
    result = export_subject(gov, "alice", tmp_path / "out", actor="dpo@example.org")
    receipt = ExportReceiptStore(gov.governance_dir).get(result.id)
    assert receipt is not None and result.receipt is not None and result.receipt.is_file()
    assert receipt.actor == "dpo@example.org" and receipt.out_dir == str(tmp_path / "out")
    from governed_memory._audit import audit_key_from_settings

    key = audit_key_from_settings(gov.settings)
    assert key is not None and receipt.subject_hash == key.pseudonym("subject", "alice")
    names = sorted(f.path for f in receipt.files)
    assert names == ["export.json", "export.md", "manifest.json", "report.md"]
    for file in receipt.files:
        body = (tmp_path / "out" / file.path).read_bytes()
        assert file.sha256 == hashlib.sha256(body).hexdigest() and file.bytes == len(body)
    stored = result.receipt.read_text()
    assert "alice" not in stored and "hi" not in json.loads(stored).values()
    document = json.loads((tmp_path / "out" / "export.json").read_text())
    assert document["id"] == result.id
    [entry] = [e for e in document["audit"] if e["event"] == "export"] or [None]
    assert entry is None  # the export's own entry comes after the document was built
    export_subject(gov, "alice", tmp_path / "again")
    again = json.loads((tmp_path / "again" / "export.json").read_text())
    [logged] = [e for e in again["audit"] if e["event"] == "export"]
    assert logged["attrs"]["export_id"] == result.id


def test_an_encrypted_workspace_seals_the_receipt(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = _regulated(workspace, clock)
    gov.grant("alice", "persist", actor="app")
    conversation(gov, "A", subject_id="alice").add("Human", "hi")
    result = export_subject(gov, "alice", tmp_path / "out", actor="dpo@example.org")
    assert result.receipt is not None
    assert b"dpo@example.org" not in result.receipt.read_bytes()
    receipt = ExportReceiptStore(gov.governance_dir, sealing=gov.sealing).get(result.id)
    assert receipt is not None and receipt.actor == "dpo@example.org"
    # What closes a request in the register: the receipt read back by the export's id.
    assert export_receipt(gov, result.id) == receipt
    assert export_receipts(gov) == [receipt]
    assert export_receipt(gov, "20261130T000000000000Z-00000000") is None


def test_a_bad_actor_is_refused_before_anything_is_written(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    from governed_memory import ConfigurationError

    gov = Governance(workspace=workspace, clock=clock)
    conversation(gov, "A").add("Human", "hi", subject_id="alice")
    with pytest.raises(ConfigurationError, match="actor"):
        export_subject(gov, "alice", tmp_path / "out", actor="bad\x00actor")
    assert not (tmp_path / "out").exists()
