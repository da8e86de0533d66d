"""Signed evidence: the signing key, signed receipts, and verification by an independent implementation."""

from __future__ import annotations

import base64
import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from subjects_helpers import conversation

from governed_memory import ConfigurationError, FixedClock, Governance
from governed_memory._crypto import (
    LocalSigningKey,
    PublicKey,
    canonical_json,
    sign_document,
    verify_document,
)
from governed_memory._errors import KeyProviderError
from governed_memory._policy import Settings, load_policy
from governed_memory._policy._model import Policy
from governed_memory._records import verify_receipt
from governed_memory._subjects import erase, erasure_receipts, export_subject

SEED = bytes(range(32))


def independent_canonical(document: dict[str, Any]) -> bytes:
    """The signed bytes, re-derived as docs/evidence.md says, without governed_memory."""
    body = {k: v for k, v in document.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def independent_verify(document: dict[str, Any], public_b64: str) -> None:
    """Raises InvalidSignature unless ``document`` is signed by the key (cryptography only)."""
    raw = base64.b64decode(public_b64)
    block = document["signature"]
    assert block["alg"] == "Ed25519" and block["v"] == 1
    assert block["key_id"] == __import__("hashlib").sha256(raw).hexdigest()[:16]
    Ed25519PublicKey.from_public_bytes(raw).verify(
        base64.b64decode(block["value"]), independent_canonical(document)
    )


def signed_policy() -> Policy:
    return Policy.model_validate({"evidence": {"require_signing": True}})


def _populate(gov: Governance) -> None:
    conv = conversation(gov, "A")
    conv.add("Human", "alice says héllo", subject_id="alice")
    conv.add("Human", "bob note", subject_id="bob")
    conv.store.close()  # type: ignore[union-attr]


# -- the key ---------------------------------------------------------------------------


def test_key_id_is_sha256_of_the_raw_public_key() -> None:
    key = LocalSigningKey(SEED)
    raw = key.public_key_bytes
    assert key.key_id == __import__("hashlib").sha256(raw).hexdigest()[:16]
    assert PublicKey.parse(key.public_key.base64()).key_id == key.key_id
    assert PublicKey.parse(key.public_key.pem()).raw == raw


def test_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "signing.key"
    path.write_text(LocalSigningKey(SEED).to_base64())
    os.chmod(path, 0o640)
    with pytest.raises(KeyProviderError, match=r"mode 0640.*chmod 600"):
        LocalSigningKey.from_file(path)
    os.chmod(path, 0o600)
    assert LocalSigningKey.from_file(path).key_id == LocalSigningKey(SEED).key_id


def test_settings_refuse_both_key_and_key_file(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text(LocalSigningKey(SEED).to_base64())
    os.chmod(path, 0o600)
    gov = Governance(
        workspace=tmp_path,
        settings=Settings(signing_key=LocalSigningKey(SEED).to_base64(), signing_key_file=path),
    )
    with pytest.raises(KeyProviderError, match="set only one"):
        _ = gov.signer


def test_malformed_key_names_the_variable(tmp_path: Path) -> None:
    gov = Governance(workspace=tmp_path, settings=Settings(signing_key="not base64!"))
    with pytest.raises(KeyProviderError, match="GOVERNED_MEMORY_SIGNING_KEY is not valid base64"):
        _ = gov.signer


def test_signing_key_is_secret_in_settings_repr() -> None:
    text = LocalSigningKey(SEED).to_base64()
    assert text not in repr(Settings(signing_key=text))


# -- documents ---------------------------------------------------------------------------


def test_a_signed_document_verifies_with_cryptography_primitives_only() -> None:
    key = LocalSigningKey(SEED)
    document = {"id": "r1", "names": ["é", "ß"], "n": 3, "ok": True, "none": None}
    signed = sign_document(document, key)
    independent_verify(signed, key.public_key.base64())
    assert verify_document(signed, key.public_key).ok


def test_documents_with_floats_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="floating-point"):
        canonical_json({"x": 1.5})


def _mutations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One copy of ``document`` per field, that field changed (nested fields too)."""
    found = []

    def walk(path: list[Any], value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk([*path, k], v)
            return
        if isinstance(value, list):
            for i, v in enumerate(value):
                walk([*path, i], v)
            return
        if path[0] == "signature" and path[-1] in ("key_id",):
            return  # a changed key id is "unknown key", tested apart
        changed = copy.deepcopy(document)
        target = changed
        for step in path[:-1]:
            target = target[step]
        old = target[path[-1]]
        if isinstance(old, bool):
            new: Any = not old
        elif isinstance(old, int):
            new = old + 1
        elif old is None:
            new = "x"
        else:
            new = str(old)[:-1] + ("A" if not str(old).endswith("A") else "B")
        target[path[-1]] = new
        found.append(("/".join(map(str, path)), changed))

    walk([], document)
    return found


def test_every_changed_field_of_an_erasure_receipt_is_refused(
    workspace: Path, clock: FixedClock
) -> None:
    key = LocalSigningKey(SEED)
    gov = Governance(workspace=workspace, clock=clock, signing_key=key)
    _populate(gov)
    receipt = erase(gov, subject="alice", reason="ticket 7", actor="dpo").to_dict()
    independent_verify(receipt, key.public_key.base64())
    mutations = _mutations(receipt)
    assert len(mutations) > 15
    for where, changed in mutations:
        check = verify_receipt(changed, key.public_key)
        assert check.status == "invalid", where
        with pytest.raises((InvalidSignature, ValueError, AssertionError)):
            independent_verify(changed, key.public_key.base64())


def test_stored_receipt_keeps_its_signature(workspace: Path, clock: FixedClock) -> None:
    key = LocalSigningKey(SEED)
    gov = Governance(workspace=workspace, clock=clock, signing_key=key)
    _populate(gov)
    erase(gov, subject="alice", reason="r", actor="dpo")
    (stored,) = erasure_receipts(gov)
    assert stored.signature is not None
    independent_verify(stored.to_dict(), key.public_key.base64())


def test_wrong_public_key_is_refused(workspace: Path, clock: FixedClock) -> None:
    gov = Governance(workspace=workspace, clock=clock, signing_key=LocalSigningKey(SEED))
    _populate(gov)
    receipt = erase(gov, subject="alice", reason="r", actor="dpo").to_dict()
    other = LocalSigningKey(bytes(32)).public_key
    check = verify_receipt(receipt, other)
    assert check.status == "unknown_key" and not check.ok
    forged = {**receipt, "signature": {**receipt["signature"], "key_id": other.key_id}}
    assert verify_receipt(forged, other).status == "invalid"


def test_without_a_key_receipts_are_unsigned(workspace: Path, clock: FixedClock) -> None:
    gov = Governance(workspace=workspace, clock=clock)
    _populate(gov)
    receipt = erase(gov, subject="alice", reason="r", actor="dpo")
    assert receipt.signature is None and "signature" not in receipt.to_dict()
    check = verify_receipt(receipt.to_dict(), LocalSigningKey(SEED).public_key)
    assert check.status == "unsigned"


def test_export_manifest_is_signed(workspace: Path, clock: FixedClock, tmp_path: Path) -> None:
    key = LocalSigningKey(SEED)
    gov = Governance(workspace=workspace, clock=clock, signing_key=key)
    _populate(gov)
    export_subject(gov, "alice", tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    independent_verify(manifest, key.public_key.base64())


def test_required_signing_without_a_key_refuses_before_writing(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = Governance(workspace=workspace, clock=clock, policy=signed_policy())
    _populate(gov)
    before = sorted(p for p in workspace.rglob("*") if p.is_file())
    with pytest.raises(ConfigurationError, match=r"evidence.require_signing.*signing-keygen"):
        erase(gov, subject="alice", reason="r", actor="dpo")
    with pytest.raises(ConfigurationError, match=r"evidence\.require_signing"):
        export_subject(gov, "alice", tmp_path / "out")
    assert sorted(p for p in workspace.rglob("*") if p.is_file()) == before
    assert not (tmp_path / "out").exists()


def test_shipped_regulated_policies_require_signing() -> None:
    assert load_policy("regulated").evidence.require_signing
    assert load_policy("hipaa").evidence.require_signing
    assert not load_policy("default").evidence.require_signing


def test_an_exposed_key_file_fails_the_signing_not_the_conversation(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    """The key is read when a receipt is signed: a Conversation opens; the erasure is refused."""
    path = tmp_path / "signing.key"
    path.write_text(LocalSigningKey(SEED).to_base64())
    os.chmod(path, 0o644)
    gov = Governance(workspace=workspace, clock=clock, settings=Settings(signing_key_file=path))
    _populate(gov)  # opens and writes through a governed Conversation
    with pytest.raises(KeyProviderError, match="chmod 600"):
        erase(gov, subject="alice", reason="r", actor="dpo")
    assert "alice says" in (workspace / "agents" / "A" / "MEMORY.md").read_text()
