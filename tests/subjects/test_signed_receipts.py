"""Every kind of receipt a request closes with is signed on the one receipt path.

Erasure receipts are checked in tests/crypto/test_signing.py; the export's
receipt and manifest and the rectification's receipt were built beside that
path, in parallel, and are signed through it too.
"""

from __future__ import annotations

import json
from pathlib import Path

from subjects_helpers import conversation

from governed_memory import (
    FixedClock,
    Governance,
    LocalSigningKey,
    Policy,
    Settings,
    export_subject,
    rectification_receipts,
    rectify,
    subject_records,
    verify_receipt,
)
from governed_memory._subjects import export_receipt

SIGNER = LocalSigningKey(bytes(range(32)))
OTHER = LocalSigningKey(bytes(range(1, 33)))


def _gov(workspace: Path, clock: FixedClock) -> Governance:
    policy = Policy.model_validate(
        {"audit": {"enabled": True}, "evidence": {"require_signing": True}}
    )
    return Governance(
        workspace=workspace,
        policy=policy,
        clock=clock,
        settings=Settings(audit_key="ab" * 32),
        signing_key=SIGNER,
    )


def test_an_exports_receipt_and_manifest_verify_with_the_public_key_alone(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = _gov(workspace, clock)
    conversation(gov, "A").add("Human", "alice's note", subject_id="alice")
    result = export_subject(gov, "alice", tmp_path / "out", actor="dpo")
    stored = export_receipt(gov, result.id)
    assert stored is not None
    assert verify_receipt(stored.to_dict(), SIGNER.public_key).status == "signed"
    assert verify_receipt(stored.to_dict(), OTHER.public_key).status == "unknown_key"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert verify_receipt(manifest, SIGNER.public_key).status == "signed"
    manifest["files"][0]["sha256"] = "0" * 64
    assert verify_receipt(manifest, SIGNER.public_key).status == "invalid"


def test_a_rectifications_receipt_verifies_and_a_changed_field_does_not(
    workspace: Path, clock: FixedClock
) -> None:
    gov = _gov(workspace, clock)
    conversation(gov, "A").add("Human", "born 1970", subject_id="alice")
    [record] = subject_records(gov, "alice")
    receipt = rectify(gov, subject="alice", record=record.id, text="born 1971", actor="dpo")
    body = receipt.to_dict()
    assert verify_receipt(body, SIGNER.public_key).status == "signed"
    [stored] = rectification_receipts(gov)
    assert verify_receipt(stored.to_dict(), SIGNER.public_key).status == "signed"
    body["content_hash"]["new"] = "0" * len(body["content_hash"]["new"])
    assert verify_receipt(body, SIGNER.public_key).status == "invalid"
