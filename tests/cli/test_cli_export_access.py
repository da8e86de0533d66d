"""``governed-memory export``: the Art. 15 report, the receipt and the actor, through the entry point."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
from click.testing import CliRunner
from sealing_helpers import TEST_MASTER_KEY_B64, sealing_for
from subjects_helpers import conversation, governance

from governed_memory import FixedClock, LocalSigningKey
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._records import ExportReceiptStore

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "export-schema.json").read_text())


def run(workspace: Path, *args: str, regulated: bool = False) -> tuple[int, str, str]:
    from governed_memory._cli import main

    options = ["--workspace", str(workspace)]
    env = {}
    if regulated:
        options += ["--policy", "regulated"]
        env = {  # the regulated policy audits and encrypts
            "GOVERNED_MEMORY_AUDIT_KEY": "ab" * 32,
            "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
            "GOVERNED_MEMORY_KEYRING_DIR": str(workspace.parent / "keyring"),
            "GOVERNED_MEMORY_SIGNING_KEY": LocalSigningKey.generate().to_base64(),  # signed receipts
        }
    result = CliRunner().invoke(main, [*options, *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_export_writes_the_report_and_a_receipt_naming_the_actor(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    conversation(governance(workspace, clock), "A").add("Human", "hi", subject_id="alice")
    out = tmp_path / "x"
    code, stdout, err = run(
        workspace, "export", "--subject", "alice", "--out", str(out), "--actor", "dpo@example.org"
    )
    assert code == 0, err
    document = json.loads((out / "export.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert f"export id {document['id']}" in stdout and "hand report.md to the person" in stdout
    assert "## (c) Who received it" in (out / "report.md").read_text()
    receipt = ExportReceiptStore(workspace / GOVERNANCE_DIR).get(document["id"])
    assert receipt is not None and receipt.actor == "dpo@example.org"
    assert {f.path: f.sha256 for f in receipt.files} == {
        name: hashlib.sha256((out / name).read_bytes()).hexdigest()
        for name in ("export.json", "export.md", "report.md", "manifest.json")
    }


def test_a_regulated_export_carries_the_consent_recorded_through_the_cli(
    workspace: Path, tmp_path: Path
) -> None:
    for action in ("grant", "withdraw"):
        code, _, err = run(
            workspace,
            "consent",
            action,
            "--subject",
            "c-42",
            "--purpose",
            "summarize",
            "--actor",
            "dpo@bank.example",
            regulated=True,
        )
        assert code == 0, err
    out = tmp_path / "x"
    code, stdout, err = run(
        workspace, "export", "--subject", "c-42", "--out", str(out), "--json", regulated=True
    )
    assert code == 0, err
    result = json.loads(stdout)
    document = json.loads((out / "export.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert result["id"] == document["id"]
    assert [(c["action"], c["actor"]) for c in document["consent"]] == [
        ("grant", "dpo@bank.example"),
        ("withdraw", "dpo@bank.example"),
    ]
    summarize = next(p for p in document["purposes"] if p["purpose"] == "summarize")
    assert summarize["consent"] == "withdrawn" and summarize["consent_required"] is True
    assert document["recipients"]["from_audit_trail"] is True
    sealing = sealing_for(workspace.parent / "keyring")
    receipt = ExportReceiptStore(workspace / GOVERNANCE_DIR, sealing=sealing).get(result["id"])
    assert receipt is not None and receipt.actor.startswith("cli:")
    assert b"c-42" not in Path(result["receipt"]).read_bytes()
