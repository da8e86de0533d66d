"""Signed audit checkpoints, and verifying the log with the public key only."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from governed_memory import FixedClock
from governed_memory._audit import (
    AuditKey,
    AuditLog,
    Checkpoint,
    FindingKind,
    latest_checkpoint,
    read_checkpoint,
    verify_public,
    write_checkpoint,
    write_checkpoint_file,
)
from governed_memory._audit._entry import canonical
from governed_memory._crypto import LocalSigningKey
from governed_memory._errors import ConfigurationError, NotFoundError

KEY = AuditKey(bytes(range(32)))
SIGNER = LocalSigningKey(bytes(range(32)))
PUBLIC = SIGNER.public_key
T0 = dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC)


def build(folder: Path, workspace: Path, count: int = 4) -> AuditLog:
    log = AuditLog(
        folder, KEY, clock=FixedClock(T0, tick=dt.timedelta(seconds=1)), workspace=workspace
    )
    for i in range(count):
        log.append("persist", {"outcome": "ok", "i": i})
    return log


def kinds(report: Any) -> set[str]:
    return {f.kind.value for f in report.problems}


def segment(folder: Path) -> Path:
    (path,) = folder.glob("audit-*.jsonl")
    return path


def rewrite(folder: Path, edit: Callable[[list[dict[str, Any]]], None]) -> None:
    """Edit the entries, then recompute every hash and link (anyone can: SHA-256 is keyless)."""
    path = segment(folder)
    entries = [json.loads(line) for line in path.read_bytes().splitlines()]
    edit(entries)
    prev = entries[0]["prev"]
    for entry in entries:
        entry["prev"] = prev
        body = {k: v for k, v in entry.items() if k not in ("hash", "mac")}
        entry["hash"] = prev = hashlib.sha256(canonical(body)).hexdigest()
    path.write_bytes(b"".join(canonical(e) + b"\n" for e in entries))


def test_checkpoint_signs_the_head_and_verifies_with_cryptography_only(tmp_path: Path) -> None:
    log = build(tmp_path / "audit", tmp_path)
    head = log.tail(1)[0]
    checkpoint = write_checkpoint(log, SIGNER)
    assert (checkpoint.seq, checkpoint.hash, checkpoint.ts) == (head.seq, head.hash, head.ts)
    document = checkpoint.to_dict()
    # Independent: re-derive the canonical bytes and verify with cryptography alone.
    body = {k: v for k, v in document.items() if k != "signature"}
    data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    raw = base64.b64decode(PUBLIC.base64())
    Ed25519PublicKey.from_public_bytes(raw).verify(
        base64.b64decode(document["signature"]["value"]), data
    )
    # The checkpoint is itself an entry right after the head it signs.
    entry = log.tail(1)[0]
    assert entry.event == "audit.checkpoint" and entry.seq == head.seq + 1
    assert latest_checkpoint(tmp_path / "audit").to_dict() == document
    # And the head hash is the SHA-256 of the entry's canonical body, as recorded.
    assert hashlib.sha256(canonical(head.body())).hexdigest() == checkpoint.hash


def test_intact_log_verifies_with_the_public_key_alone(tmp_path: Path) -> None:
    log = build(tmp_path / "audit", tmp_path)
    write_checkpoint(log, SIGNER)
    report = verify_public(tmp_path / "audit", PUBLIC)
    assert report.ok, [str(f) for f in report.problems]
    assert report.pinned_through == 5
    notices = [f.kind for f in report.findings]
    assert FindingKind.UNAUTHENTICATED in notices  # the MACs were not checked, and it says so


def test_log_without_checkpoint_fails_as_no_checkpoint(tmp_path: Path) -> None:
    build(tmp_path / "audit", tmp_path)
    report = verify_public(tmp_path / "audit", PUBLIC)
    assert kinds(report) == {"no_checkpoint"}


def test_entries_removed_from_the_end_are_detected_against_a_kept_checkpoint(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    write_checkpoint(log, SIGNER)
    for i in range(3):
        log.append("persist", {"outcome": "ok", "late": i})
    kept = write_checkpoint(log, SIGNER)
    log.close()
    path = segment(folder)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-4]))  # the newest entries and the checkpoint go
    (folder / "audit.head").unlink()  # and the head that would betray it
    assert verify_public(folder, PUBLIC).ok  # the log alone looks fine ...
    report = verify_public(folder, PUBLIC, checkpoints=[("kept.json", kept)])
    assert "rollback" in kinds(report)  # ... the kept checkpoint shows the cut
    assert any("ends at seq" in f.message for f in report.problems)


def test_log_replaced_by_an_older_copy_is_detected(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    write_checkpoint(log, SIGNER)
    log.close()
    old = tmp_path / "old-copy"
    shutil.copytree(folder, old)
    log = build(folder, tmp_path, count=2)
    kept = write_checkpoint(log, SIGNER)
    log.close()
    shutil.rmtree(folder)
    shutil.copytree(old, folder)
    report = verify_public(folder, PUBLIC, checkpoints=[("kept.json", kept)])
    assert "rollback" in kinds(report)


def test_rewritten_log_with_recomputed_hashes_is_detected(tmp_path: Path) -> None:
    """Anyone can recompute SHA-256: the signed checkpoint pins the original history."""
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    kept = write_checkpoint(log, SIGNER)
    log.close()

    def edit(entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            if entry["attrs"].get("i") == 1:
                entry["attrs"]["i"] = 99

    rewrite(folder, edit)
    report = verify_public(folder, PUBLIC, checkpoints=[("kept.json", kept)])
    assert "rollback" in kinds(report)


def test_edited_entry_is_altered(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    write_checkpoint(log, SIGNER)
    log.close()
    path = segment(folder)
    path.write_bytes(path.read_bytes().replace(b'"i":2', b'"i":7'))
    assert "altered" in kinds(verify_public(folder, PUBLIC))


def _changed(text: str, first: str, instead: str) -> str:
    """``text`` with its first character replaced: by ``first``, or ``instead`` if it already is."""
    return (instead if text[:1] == first else first) + text[1:]


def _field_mutations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, value in document.items():
        if name == "signature":
            for sub in ("value", "alg", "v"):
                changed = copy.deepcopy(document)
                old = changed["signature"][sub]
                changed["signature"][sub] = (
                    old + 1 if isinstance(old, int) else _changed(old, "A", "B")
                )
                out.append((f"signature.{sub}", changed))
            continue
        changed = copy.deepcopy(document)
        changed[name] = value + 1 if isinstance(value, int) else _changed(str(value), "x", "y")
        assert changed[name] != value, name  # a mutation that changes nothing proves nothing
        out.append((name, changed))
    return out


def test_every_changed_field_of_a_kept_checkpoint_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    original = write_checkpoint(log, SIGNER).to_dict()
    log.close()
    for where, changed in _field_mutations(original):
        if where in ("format", "v"):
            with pytest.raises(ConfigurationError):
                Checkpoint.from_dict(changed)
            continue
        report = verify_public(folder, PUBLIC, checkpoints=[("k", Checkpoint.from_dict(changed))])
        assert "checkpoint" in kinds(report), where


def test_checkpoint_by_another_key_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    kept = write_checkpoint(log, LocalSigningKey(bytes(32)))
    log.close()
    report = verify_public(folder, PUBLIC, checkpoints=[("k", kept)])
    assert kinds(report) == {"checkpoint", "no_checkpoint"}


def test_old_keys_still_verify_after_a_rotation(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    old = LocalSigningKey(bytes(32))
    write_checkpoint(log, old)
    log.append("persist", {"outcome": "ok"})
    write_checkpoint(log, SIGNER)
    log.close()
    new_only = verify_public(folder, PUBLIC)
    assert new_only.ok
    assert any(f.kind == FindingKind.CHECKPOINT_UNCHECKED for f in new_only.findings)
    both = verify_public(folder, [PUBLIC, old.public_key])
    assert both.ok and {c.status for c in both.checkpoints} == {"pinned"}


def test_checkpoint_file_is_written_0600_and_never_overwritten(tmp_path: Path) -> None:
    log = build(tmp_path / "audit", tmp_path)
    made = write_checkpoint(log, SIGNER)
    out = tmp_path / "cp.json"
    write_checkpoint_file(out, made)
    assert out.stat().st_mode & 0o777 == 0o600
    assert read_checkpoint(out) == made
    with pytest.raises(ConfigurationError, match="never overwritten"):
        write_checkpoint_file(out, made)


def test_empty_log_has_nothing_to_checkpoint(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit", KEY)
    with pytest.raises(NotFoundError, match="no entry yet"):
        write_checkpoint(log, SIGNER)


def test_a_checkpoint_entry_stripped_of_its_signature_is_refused(tmp_path: Path) -> None:
    """A rewritten checkpoint entry (hashes recomputed, signature gone) is a checkpoint finding."""
    folder = tmp_path / "audit"
    log = build(folder, tmp_path)
    write_checkpoint(log, SIGNER)
    log.close()
    rewrite(folder, lambda entries: entries[-1]["attrs"].pop("signature"))
    report = verify_public(folder, PUBLIC)
    assert "checkpoint" in kinds(report) and "no_checkpoint" in kinds(report)
