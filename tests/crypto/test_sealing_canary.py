"""No governance detail reaches disk in plaintext under the regulated policy.

A realistic life cycle (consent granted and withdrawn, a hold placed and
released, an erasure blocked then done, an erasure scheduled, a purge) runs
with unique canary strings as subject ids, actors, reasons and content; then
every byte under the workspace, the keyring folder and the temporary folder
is scanned. The same run with encryption off is the control: it must find
the canaries, or the scan proves nothing.
"""

from __future__ import annotations

import datetime as dt
import secrets
import tempfile
from pathlib import Path

import pytest

from governed_memory import Conversation, FixedClock, Governance, Settings, memory_md_path
from governed_memory._audit import generate_audit_key
from governed_memory._crypto import LocalSigningKey, generate_master_key
from governed_memory._retention import Retention
from governed_memory._subjects import (
    ErasureBlockedError,
    erase,
    erasure_receipts,
    schedule_erasure,
)

REGULATED = Path(__file__).parents[2] / "policies" / "regulated.toml"
KINDS = (
    "subject",
    "other-subject",
    "grant-actor",
    "withdraw-actor",
    "hold-actor",
    "hold-reason",
    "release-reason",
    "erasure-actor",
    "erasure-reason",
    "scheduled-reason",
    "message",
    "other-message",
    "summary",
    "conversation",
)


def _every_file(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def _life_cycle(tmp_path: Path, *, encrypted: bool) -> tuple[dict[str, str], list[Path], Settings]:
    """Run the scenario; return the canaries, every file written, and the settings used."""
    c = {kind: f"CANARY-{kind}-{secrets.token_hex(6)}" for kind in KINDS}
    workspace, keyring_dir = tmp_path / "ws", tmp_path / "keyring"
    settings = Settings(
        policy=REGULATED,
        master_key=generate_master_key(),
        keyring_dir=keyring_dir,
        audit_key=generate_audit_key(),
        signing_key=LocalSigningKey.generate().to_base64(),  # regulated signs its receipts
        encryption={"enabled": encrypted},
    )
    gov = Governance(workspace=workspace, settings=settings)
    assert gov.policy.id == "regulated" and gov.policy.encryption.enabled is encrypted
    for purpose in ("persist", "summarize"):
        gov.grant(c["subject"], purpose, actor=c["grant-actor"])
    gov.grant(c["other-subject"], "persist", actor=c["grant-actor"])

    conv = Conversation(
        name=c["conversation"],
        time_enabled=True,
        memory_md_path=memory_md_path("Teller", workspace),
        governance=gov,
        subject_id=c["subject"],
    )
    conv.add("Human", c["message"])
    conv.compact(c["summary"])  # archives the message
    conv.add("Human", c["message"] + " again")
    conv.add("Human", c["other-message"], subject_id=c["other-subject"])
    # regulated isolates subjects: the other subject's message is in their own memory,
    # and their own conversation's compaction archives it (the archive the purge below
    # finds: the subject's erasure deletes the subject's whole memory, archives with it).
    other = Conversation(
        name=c["conversation"],
        memory_md_path=memory_md_path("Teller", workspace),
        governance=gov,
        subject_id=c["other-subject"],
    )
    other.compact(c["summary"])
    other.add("Human", c["other-message"] + " once more")  # stays in the active memory

    retention = Retention(gov)
    hold = retention.holds.place(
        subject=c["subject"], reason=c["hold-reason"], actor=c["hold-actor"]
    )
    with pytest.raises(ErasureBlockedError):
        erase(gov, subject=c["subject"], reason=c["erasure-reason"], actor=c["erasure-actor"])
    retention.holds.release(hold_id=hold.id, actor=c["hold-actor"], reason=c["release-reason"])
    gov.withdraw(c["subject"], "summarize", actor=c["withdraw-actor"])
    schedule_erasure(
        gov,
        subject=c["other-subject"],
        grace="30d",
        reason=c["scheduled-reason"],
        actor=c["erasure-actor"],
    )
    receipt = erase(gov, subject=c["subject"], reason=c["erasure-reason"], actor=c["erasure-actor"])
    assert receipt.records >= 2
    # Archives: 30 days. A purge that deletes runs at its clock's now (issue 12), so the
    # purge runs from a governance whose clock is 40 days on.
    later = FixedClock(gov.clock.now() + dt.timedelta(days=40))
    report = Retention(Governance(workspace=workspace, settings=settings, clock=later)).purge()
    assert report.deleted.get("archives_max_age", 0) >= 1

    # Everything still reads back through the registries (the scan below is not vacuous).
    again = Governance(workspace=workspace, settings=settings)
    assert [e.actor for e in again.consent.history(c["subject"])][-1] == c["withdraw-actor"]
    [released] = Retention(again).holds.holds(include_released=True)
    assert (released.reason, released.release_reason) == (c["hold-reason"], c["release-reason"])
    assert [r.reason for r in erasure_receipts(again)] == [c["erasure-reason"]]
    files = _every_file(workspace, keyring_dir, Path(tempfile.gettempdir()))
    return c, files, settings


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of this test's own, so its every byte can be scanned."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert tempfile.gettempdir() == str(tmpdir)
    return tmpdir


def test_no_governance_canary_reaches_the_disk_under_the_regulated_policy(
    tmp_path: Path, private_tmp: Path
) -> None:
    canaries, files, _ = _life_cycle(tmp_path, encrypted=True)
    names = {p.relative_to(tmp_path).as_posix() for p in files}
    for expected in (
        "ws/.governed_memory/consent.jsonl",
        "ws/.governed_memory/holds.json",
        "ws/.governed_memory/audit",
        "ws/.governed_memory/tombstones/",
        "ws/.governed_memory/scheduled-erasures/",
        "ws/.governed_memory/purge/receipts/",
        "keyring/keys/",
    ):
        assert any(n.startswith(expected) for n in names), f"nothing written under {expected}"
    for path in files:
        data = path.read_bytes()
        for kind, canary in canaries.items():
            assert canary.encode() not in data, f"{kind} in plaintext in {path}"
            assert canary.encode("utf-16-le") not in data, f"{kind} (UTF-16) in {path}"
        assert not any(canary in path.as_posix() for canary in canaries.values()), path


def test_the_control_run_without_encryption_does_find_the_canaries(
    tmp_path: Path, private_tmp: Path
) -> None:
    canaries, files, _ = _life_cycle(tmp_path, encrypted=False)
    found = {
        kind
        for path in files
        for kind, canary in canaries.items()
        if canary.encode() in path.read_bytes()
    }
    assert {
        "other-subject",
        "hold-reason",
        "erasure-reason",
        "grant-actor",
        "other-message",
    } <= found
