"""Subject access export: content, schema, isolation, atomicity, permissions."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import jsonschema
import pytest
from subjects_helpers import conversation, governance

from governed_memory import ConfigurationError, FixedClock, NotFoundError, StorageError
from governed_memory._records._holds import HoldRegistry
from governed_memory._subjects import erase, export_agent, export_subject

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "export-schema.json").read_text())


def _validate(out: Path) -> dict:  # type: ignore[type-arg]
    document = json.loads((out / "export.json").read_text())
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    return document  # type: ignore[no-any-return]


def _populate(gov) -> None:  # type: ignore[no-untyped-def]
    a = conversation(gov, "A")
    a.add("Human", "alice asks about her loan", subject_id="alice")
    a.add("A", "answer to alice", subject_id="alice")
    a.compact("[Compressed Memory Summary] alice's loan")
    a.add("Human", "bob asks ```code```", subject_id="bob")
    a.compact("[Compressed Memory Summary] loan and bob")
    b = conversation(gov, "B")
    b.add("Human", "alice again in B", subject_id="alice")


def test_export_holds_every_record_of_the_subject_with_provenance(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    result = export_subject(gov, "alice", tmp_path / "out")
    document = _validate(tmp_path / "out")
    contents = [r["content"] for r in document["records"]]
    assert contents == ["alice asks about her loan", "answer to alice", "alice again in B"]
    first = document["records"][0]
    assert first["agent"] == "A" and first["role"] == "Human"
    assert first["source_kind"] == "archive"
    assert first["source_file"].startswith("agents/A/archive/history_")
    assert first["timestamp"].startswith("2026-11-30T10:00")
    assert document["records"][2]["source_file"] == "agents/B/MEMORY.md"
    assert result.records == 3 and document["counts"]["records"] == 3
    assert document["scope"] == {"subject": "alice", "agent": None}


def test_export_never_contains_another_subjects_content(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    export_subject(gov, "alice", tmp_path / "out")
    for name in ("export.json", "export.md", "manifest.json"):
        body = (tmp_path / "out" / name).read_text()
        assert "bob" not in body, name


def test_summaries_shared_with_others_are_withheld_unless_asked(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    result = export_subject(gov, "alice", tmp_path / "out")
    summaries = _validate(tmp_path / "out")["summaries"]
    by_content = {s["content"]: s for s in summaries}
    # The first summary was built from alice's messages only: exported in full.
    assert "[Compressed Memory Summary] alice's loan" in by_content
    withheld = by_content[None]
    assert withheld["other_subjects"] == 1 and "Art. 15(4)" in withheld["withheld_reason"]
    assert withheld["lineage"] is None
    assert result.withheld_summaries == 1
    export_subject(gov, "alice", tmp_path / "full", include_shared_summaries=True)
    full = _validate(tmp_path / "full")["summaries"]
    assert "[Compressed Memory Summary] loan and bob" in [s["content"] for s in full]


def test_a_summary_another_subjects_conversation_wrote_does_not_name_them(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    """bob's conversation compacted alice's words too: alice's export counts bob, never names him."""
    gov = governance(workspace, clock)
    conv = conversation(gov, "A", subject_id="bob")
    conv.add("Human", "alice's question", subject_id="alice")
    conv.add("Human", "bob's answer")
    conv.compact("[Compressed Memory Summary] the two of them")
    export_subject(gov, "alice", tmp_path / "out")
    [summary] = _validate(tmp_path / "out")["summaries"]
    assert summary["other_subjects"] == 1 and summary["content"] is None
    assert summary["subject"] is None
    for name in ("export.json", "export.md", "manifest.json"):
        assert "bob" not in (tmp_path / "out" / name).read_text(), name
    export_subject(gov, "bob", tmp_path / "bob")
    [own] = _validate(tmp_path / "bob")["summaries"]
    assert own["subject"] == "bob"


def test_manifest_lists_the_sha256_of_each_file(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    result = export_subject(gov, "alice", tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["format"] == "governed-memory-export-manifest" and manifest["version"] == 1
    assert {f["path"] for f in manifest["files"]} == {"export.json", "export.md", "report.md"}
    for entry in manifest["files"]:
        body = (tmp_path / "out" / entry["path"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(body).hexdigest() == result.files[entry["path"]]
        assert entry["bytes"] == len(body)


def test_export_is_private(workspace: Path, clock: FixedClock, tmp_path: Path) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    old = os.umask(0o022)
    try:
        export_subject(gov, "alice", tmp_path / "out")
    finally:
        os.umask(old)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o700
    for file in (tmp_path / "out").iterdir():
        assert file.stat().st_mode & 0o777 == 0o600


def test_markdown_rendering_is_readable_and_fences_hold(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    export_subject(gov, "bob", tmp_path / "out")
    text = (tmp_path / "out" / "export.md").read_text()
    assert text.startswith("# Personal data export\n")
    assert "- Scope: data subject `bob`" in text
    assert "````text\nbob asks ```code```\n````" in text


def test_consent_history_and_holds_are_included(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    gov.grant("alice", "persist", actor="app")
    gov.withdraw("alice", "summarize", actor="alice herself")
    gov.grant("bob", "persist", actor="app")
    HoldRegistry(gov.governance_dir, clock=clock).place(
        subject="alice", reason="case 1", actor="legal"
    )
    HoldRegistry(gov.governance_dir, clock=clock).place(
        subject="bob", reason="case 2", actor="legal"
    )
    export_subject(gov, "alice", tmp_path / "out")
    document = _validate(tmp_path / "out")
    assert [(c["purpose"], c["action"]) for c in document["consent"]] == [
        ("persist", "grant"),
        ("summarize", "withdraw"),
    ]
    assert [h["reason"] for h in document["holds"]] == ["case 1"]


def test_earlier_erasures_of_the_subject_are_listed(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    receipt = erase(gov, subject="alice", agent="B")
    export_subject(gov, "alice", tmp_path / "out")
    document = _validate(tmp_path / "out")
    assert [e["id"] for e in document["erasures"]] == [receipt.id]
    assert document["erasures"][0]["records"] == 1
    assert "alice again in B" not in (tmp_path / "out" / "export.json").read_text()


def test_agent_export_holds_everything_of_that_agent(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    export_agent(gov, "A", tmp_path / "out")
    document = _validate(tmp_path / "out")
    assert {r["subject"] for r in document["records"]} == {"alice", "bob"}
    assert "alice again in B" not in json.dumps(document)
    assert [s["lineage"] for s in document["summaries"]] == [["alice"], ["alice", "bob"]]


def test_subject_export_limited_to_one_agent(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    export_subject(gov, "alice", tmp_path / "out", agent="B")
    assert [r["content"] for r in _validate(tmp_path / "out")["records"]] == ["alice again in B"]


def test_export_refuses_a_non_empty_folder_and_accepts_an_empty_one(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match="is not empty"):
        export_subject(gov, "alice", busy)
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigurationError, match="not a folder"):
        export_subject(gov, "alice", a_file)
    with pytest.raises(ConfigurationError, match="does not exist"):
        export_subject(gov, "alice", tmp_path / "missing" / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    export_subject(gov, "alice", empty)
    assert sorted(p.name for p in empty.iterdir()) == [
        "export.json",
        "export.md",
        "manifest.json",
        "report.md",
    ]


def test_failed_export_leaves_nothing_and_a_stale_staging_folder_is_cleaned(
    workspace: Path, clock: FixedClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = governance(workspace, clock)
    _populate(gov)
    real_rename = os.rename

    def broken(src: object, dst: object) -> None:
        raise OSError(5, "I/O error (injected)")

    monkeypatch.setattr(os, "rename", broken)
    with pytest.raises(StorageError, match="nothing was left"):
        export_subject(gov, "alice", tmp_path / "out")
    monkeypatch.setattr(os, "rename", real_rename)
    assert sorted(p.name for p in tmp_path.iterdir() if "out" in p.name) == []
    # A crash (kill -9) would leave the staging folder: the next export removes it.
    stale = tmp_path / ".out.gm-export-deadbeef"
    stale.mkdir()
    (stale / "export.json").write_text("partial")
    export_subject(gov, "alice", tmp_path / "out")
    assert not stale.exists()


def test_unknown_agent_is_a_clear_error(workspace: Path, clock: FixedClock, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="agent 'ghost'"):
        export_agent(governance(workspace, clock), "ghost", tmp_path / "out")


def test_encrypted_workspace_export_stages_no_plaintext_elsewhere(
    workspace: Path, clock: FixedClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the export folder the admin asked for ever holds plaintext."""
    from subjects_helpers import governance as make

    gov = make(workspace, clock, kind="encrypted")
    _populate(gov)
    assert not list(workspace.rglob("MEMORY.md"))  # the workspace itself is ciphertext
    seen: list[Path] = []
    real_rename = os.rename

    def checking_rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        staging = Path(src)
        for path in tmp_path.rglob("*"):
            if path.is_file() and staging not in path.parents:
                assert b"alice asks" not in path.read_bytes(), path
        seen.append(staging)
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", checking_rename)
    export_subject(gov, "alice", tmp_path / "out")
    assert seen and seen[0].name.startswith(".out.gm-export-")
    document = _validate(tmp_path / "out")
    assert document["encrypted_workspace"] is True
    assert document["records"][0]["content"] == "alice asks about her loan"
    assert document["records"][0]["source_file"].endswith(".gmenc")


def test_audit_entries_about_the_subject_are_included(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    from governed_memory import Governance, Settings
    from governed_memory._policy._model import Policy

    policy = Policy.model_validate({"audit": {"enabled": True}})
    gov = Governance(
        workspace=workspace, policy=policy, clock=clock, settings=Settings(audit_key="ab" * 32)
    )
    _populate(gov)
    export_subject(gov, "bob", tmp_path / "out")
    document = _validate(tmp_path / "out")
    audit = document["audit"]
    assert audit, "the persist of bob's message is audited"
    assert {e["event"] for e in audit} >= {"persist"}
    from governed_memory._audit import audit_key_from_settings

    key = audit_key_from_settings(gov.settings)
    assert key is not None
    bob = key.pseudonym("subject", "bob")
    for entry in audit:
        hashes = {v for k, v in entry["attrs"].items() if k.endswith(".hash")}
        hashes |= {h for k, v in entry["attrs"].items() if k.endswith(".hashes") for h in v}
        assert bob in hashes
    # Without an audit log the section says so (null), rather than "none".
    export_subject(governance(workspace, clock), "bob", tmp_path / "plain")
    assert _validate(tmp_path / "plain")["audit"] is None
