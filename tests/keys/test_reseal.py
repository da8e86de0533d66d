"""Converting governance records: encrypt-workspace seals them, decrypt-workspace restores the
plaintext byte for byte, and re-encryption re-seals them before the old keys are destroyed."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest
from crypto_helpers import TEST_MASTER_KEY
from sealing_helpers import sealing_for

from governed_memory import FixedClock, Governance, Policy, Settings
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto import KeyChain, Keyring, LocalKeyProvider, generate_master_key
from governed_memory._crypto._sealing import RecordSealing, is_sealed
from governed_memory._errors import StorageError
from governed_memory._keys._migration import decrypt_workspace, encrypt_workspace
from governed_memory._keys._reseal import governance_files, seal_governance
from governed_memory._keys._rotation import rotate
from governed_memory._records._consent import ConsentRegistry
from governed_memory._records._holds import HoldRegistry
from governed_memory._subjects import (
    ErasureScope,
    ScheduledErasure,
    Tombstone,
    TombstoneStore,
    erasure_receipts,
    resume_erasures,
)

SECRETS = (b"subject-4711", b"dpo-actor", b"hold-reason", b"legal-actor", b"ticket-99")
ENCRYPTED = Policy.model_validate({"encryption": {"enabled": True}})


def populate(workspace: Path) -> dict[Path, bytes]:
    """Plaintext records in every registry (an erasure left unfinished); return the files."""
    clock = FixedClock(dt.datetime(2026, 11, 30, 10, 0))
    gov = Governance(workspace=workspace, settings=Settings(), clock=clock)
    gov.grant("subject-4711", "persist", actor="dpo-actor")
    gov.withdraw("subject-4711", "persist", actor="dpo-actor")
    holds = HoldRegistry(gov.governance_dir, clock=clock)
    hold = holds.place(subject="subject-4711", reason="hold-reason", actor="legal-actor")
    holds.release(hold_id=hold.id, actor="legal-actor")
    tombs = TombstoneStore(gov.governance_dir)
    scope = ErasureScope(subject="subject-4711")
    tombs.write(
        Tombstone("20261130T100000Z-1", scope, "2026-11-30", "dpo-actor", "ticket-99", "p", "1")
    )
    tombs.log_progress("20261130T100000Z-1", {"agent": "A", "files": []})
    tombs.schedule(
        ScheduledErasure(
            "20261130T100000Z-2", scope, "2027-01-01", "2026-11-30", "dpo-actor", "ticket-99"
        )
    )
    files = {f.path: f.path.read_bytes() for f in governance_files(gov.governance_dir)}
    assert len(files) == 5
    return files


def keyring(tmp_path: Path, *providers: LocalKeyProvider) -> Keyring:
    chosen = providers or (LocalKeyProvider(TEST_MASTER_KEY),)
    provider = chosen[0] if len(chosen) == 1 else KeyChain(*chosen)
    return Keyring(tmp_path / "kr", provider)


def encrypted_governance(workspace: Path, tmp_path: Path) -> Governance:
    settings = Settings(master_key=generate_master_key(), keyring_dir=tmp_path / "kr")
    return Governance(
        workspace=workspace,
        policy=ENCRYPTED,
        settings=settings,
        key_provider=LocalKeyProvider(TEST_MASTER_KEY),
    )


def test_encrypt_workspace_seals_every_record_and_decrypt_restores_the_bytes(
    workspace: Path, tmp_path: Path
) -> None:
    before = populate(workspace)
    report = encrypt_workspace(workspace, keyring(tmp_path))
    assert report.converted == 5 and sorted(report.files) == sorted(str(p) for p in before)
    for path in before:
        data = path.read_bytes()
        assert all(secret not in data for secret in SECRETS), path
        assert all(is_sealed(line) for line in data.splitlines()), path
    gov = encrypted_governance(workspace, tmp_path)
    assert gov.consent.history("subject-4711")[-1].actor == "dpo-actor"
    assert HoldRegistry(gov.governance_dir, sealing=gov.sealing).holds(include_released=True)[
        0
    ].reason == ("hold-reason")
    tombs = TombstoneStore(gov.governance_dir, sealing=gov.sealing)
    assert [t.reason for t in tombs.pending()] == ["ticket-99"]
    assert tombs.progress("20261130T100000Z-1") == [{"agent": "A", "files": []}]
    assert tombs.scheduled()[0].requested_by == "dpo-actor"

    again = encrypt_workspace(workspace, keyring(tmp_path))  # idempotent: nothing rewritten
    assert again.converted == 0

    back = decrypt_workspace(workspace, keyring(tmp_path))
    assert back.converted == 5
    assert {p: p.read_bytes() for p in before} == before


def test_a_sealed_pending_erasure_is_finished_under_encryption(
    workspace: Path, tmp_path: Path
) -> None:
    populate(workspace)
    encrypt_workspace(workspace, keyring(tmp_path))
    gov = encrypted_governance(workspace, tmp_path)
    [receipt] = resume_erasures(gov)
    assert receipt.reason == "ticket-99" and receipt.resumed
    assert erasure_receipts(gov) == [receipt]
    for path in (workspace / GOVERNANCE_DIR / "tombstones").iterdir():
        assert b"subject-4711" not in path.read_bytes()


def test_an_interrupted_conversion_is_finished_by_running_it_again(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = populate(workspace)
    import governed_memory._keys._reseal as module

    real = module.atomic_write
    calls = [0]

    def crash_on_the_third(path: Path, data: bytes) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(module, "atomic_write", crash_on_the_third)
    with pytest.raises(StorageError, match="keeps its previous form"):
        encrypt_workspace(workspace, keyring(tmp_path))
    forms = [is_sealed(p.read_bytes().splitlines()[0]) for p in before]
    assert forms.count(True) == 2  # each file whole in one form or the other
    monkeypatch.undo()
    encrypt_workspace(workspace, keyring(tmp_path))
    gov = encrypted_governance(workspace, tmp_path)
    assert len(gov.consent.history()) == 2
    assert len(TombstoneStore(gov.governance_dir, sealing=gov.sealing).scheduled()) == 1


def test_reencryption_reseals_records_before_the_old_purpose_keys_are_destroyed(
    workspace: Path, tmp_path: Path
) -> None:
    populate(workspace)
    encrypt_workspace(workspace, keyring(tmp_path))
    old = LocalKeyProvider(TEST_MASTER_KEY)
    new = LocalKeyProvider(bytes(range(1, 33)))
    report = rotate(workspace, keyring(tmp_path, new, old), reencrypt_data=True)
    assert report.files_reencrypted == 5 and report.generations_retired >= 3
    sealing = RecordSealing(Keyring(tmp_path / "kr", new))  # the new master key alone opens all
    for entry in [e for _, e in sealing.keyring.entries() if e.kind == "purpose"]:
        assert sorted(entry.keys) == [2]  # generation 1 is destroyed
    folder = workspace / GOVERNANCE_DIR
    for item in governance_files(folder):
        for line in item.path.read_bytes().splitlines():
            assert sealing.generation(line, item.path) == 2
    assert ConsentRegistry(folder, sealing=sealing).history()[0].actor == "dpo-actor"
    assert HoldRegistry(folder, sealing=sealing).holds(include_released=True)[0].id
    assert TombstoneStore(folder, sealing=sealing).pending()[0].reason == "ticket-99"


def test_refresh_leaves_records_already_under_the_current_key(
    workspace: Path, tmp_path: Path
) -> None:
    populate(workspace)
    encrypt_workspace(workspace, keyring(tmp_path))
    before = {p: p.read_bytes() for p in (workspace / GOVERNANCE_DIR).rglob("*") if p.is_file()}
    assert (
        seal_governance(workspace / GOVERNANCE_DIR, sealing_for(tmp_path / "kr"), refresh=True)
        == []
    )
    after = {p: p.read_bytes() for p in (workspace / GOVERNANCE_DIR).rglob("*") if p.is_file()}
    assert after == before


def test_each_file_is_converted_under_its_registrys_lock(workspace: Path) -> None:
    populate(workspace)
    folder = workspace / GOVERNANCE_DIR
    locks = {f.path.name: f.lock.path.name if f.lock else None for f in governance_files(folder)}
    assert locks == {
        "consent.jsonl": ConsentRegistry(folder).lock.path.name,
        "holds.json": HoldRegistry(folder).lock.path.name,
        ".20261130T100000Z-1.progress.jsonl": ".20261130T100000Z-1.lock",
        "20261130T100000Z-1.json": ".20261130T100000Z-1.lock",  # pending: its erasure's lock
        "20261130T100000Z-2.json": None,  # scheduled: written once, no writer
    }


def test_sealing_waits_for_a_consent_writer_holding_the_lock(
    workspace: Path, tmp_path: Path
) -> None:
    populate(workspace)
    folder = workspace / GOVERNANCE_DIR
    sealing = sealing_for(tmp_path / "kr")
    done: list[list[Path]] = []
    with ConsentRegistry(folder).lock.held():  # a writer mid-append
        worker = threading.Thread(target=lambda: done.append(seal_governance(folder, sealing)))
        worker.start()
        worker.join(0.3)
        assert worker.is_alive() and not done  # blocked on consent.lock, the first file
        assert not is_sealed((folder / "consent.jsonl").read_bytes().splitlines()[0])
    worker.join(30)
    assert len(done[0]) == 5
    assert len(ConsentRegistry(folder, sealing=sealing).history()) == 2
