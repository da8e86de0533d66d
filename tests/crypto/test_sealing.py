"""Sealed governance records: the envelope, its binding to a file, and the errors without a key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crypto_helpers import TEST_MASTER_KEY, make_keyring
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sealing_helpers import TEST_MASTER_KEY_B64, sealing_for

from governed_memory import Governance, Policy, Settings, generate_master_key
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto import Keyring, LocalKeyProvider
from governed_memory._crypto._sealed import RecordSealer
from governed_memory._crypto._sealing import (
    CONSENT_PURPOSE,
    ERASURE_PURPOSE,
    RecordSealing,
    is_sealed,
    open_file,
    open_record,
    seal_file,
    seal_record,
)
from governed_memory._errors import (
    DecryptionError,
    FormatVersionError,
    GovernedMemoryError,
    KeyShreddedError,
    KeyUnavailableError,
    SealedRecordError,
    StorageError,
)
from governed_memory._records._holds import HoldRegistry
from governed_memory._records._jsonl import encode_line
from governed_memory._subjects import ErasureScope, Tombstone, TombstoneStore
from governed_memory.testing import SeededRandom

ENCRYPTED = Policy.model_validate({"encryption": {"enabled": True}})
LINE = b'{"action":"grant","subject":"patient-7","v":1}'


def test_without_sealing_every_form_is_the_plaintext_byte_for_byte() -> None:
    assert seal_record(LINE, None, CONSENT_PURPOSE, "consent.jsonl") is LINE
    assert seal_file(LINE + b"\n", None, "holds", "holds.json") == LINE + b"\n"
    assert open_record(LINE, None, CONSENT_PURPOSE, "consent.jsonl", Path("c")) is LINE


def test_a_sealed_line_is_a_versioned_json_envelope_without_the_plaintext(tmp_path: Path) -> None:
    sealing = sealing_for(tmp_path / "kr")
    line = seal_record(LINE, sealing, CONSENT_PURPOSE, "consent.jsonl")
    assert line.startswith(b'{"v":2,"sealed":"gm1:') and line.isascii() and b"\n" not in line
    assert b"patient-7" not in line and b"grant" not in line
    assert json.loads(line)["v"] == 2 and is_sealed(line)
    assert open_record(line, sealing, CONSENT_PURPOSE, "consent.jsonl", tmp_path) == LINE
    stored = seal_file(b"{}\n", sealing, "holds", "holds.json")
    assert stored.endswith(b'"}\n') and stored.count(b"\n") == 1
    assert open_file(stored, sealing, "holds", "holds.json", tmp_path) == b"{}\n"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=400))
def test_any_record_round_trips_as_one_line(tmp_path: Path, data: bytes) -> None:
    sealing = sealing_for(tmp_path / "kr")
    line = seal_record(data, sealing, ERASURE_PURPOSE, "tombstones/x.json")
    assert b"\n" not in line
    assert open_record(line, sealing, ERASURE_PURPOSE, "tombstones/x.json", tmp_path) == data


def test_a_record_moved_to_another_file_or_registry_does_not_open(tmp_path: Path) -> None:
    sealing = sealing_for(tmp_path / "kr")
    line = seal_record(LINE, sealing, ERASURE_PURPOSE, "tombstones/a.json")
    where = tmp_path / "b.json"
    with pytest.raises(DecryptionError, match=r"b\.json cannot be decrypted"):
        open_record(line, sealing, ERASURE_PURPOSE, "tombstones/b.json", where)
    with pytest.raises(DecryptionError):
        open_record(line, sealing, CONSENT_PURPOSE, "tombstones/a.json", where)
    other = sealing_for(tmp_path / "other-workspace-keyring")
    seal_record(b"x", other, ERASURE_PURPOSE, "tombstones/a.json")  # create that keyring
    with pytest.raises(DecryptionError):
        open_record(line, other, ERASURE_PURPOSE, "tombstones/a.json", where)


def test_a_tombstone_copied_over_another_is_detected(tmp_path: Path) -> None:
    governance = tmp_path / GOVERNANCE_DIR
    store = TombstoneStore(governance, sealing=sealing_for(tmp_path / "kr"))
    for erasure_id in ("e1", "e2"):
        store.write(
            Tombstone(erasure_id, ErasureScope(subject=f"s-{erasure_id}"), "t", "a", "r", "p", "1")
        )
    folder = governance / "tombstones"
    (folder / "e2.json").write_bytes((folder / "e1.json").read_bytes())
    assert store.get("e1") is not None
    with pytest.raises(DecryptionError, match=r"e2\.json"):
        store.get("e2")


def test_a_sealed_file_read_without_encryption_names_the_file(tmp_path: Path) -> None:
    folder = tmp_path / GOVERNANCE_DIR
    HoldRegistry(folder, sealing=sealing_for(tmp_path / "kr")).place(
        subject="alice", reason="case", actor="legal"
    )
    with pytest.raises(SealedRecordError, match=r"holds\.json holds sealed") as info:
        HoldRegistry(folder).holds()
    assert info.value.path == folder / "holds.json"
    assert isinstance(info.value, KeyUnavailableError | GovernedMemoryError)
    assert "enabled = true" in str(info.value) and "GOVERNED_MEMORY_MASTER_KEY" in str(info.value)


def _sealed_consent(workspace: Path, keyring_dir: Path) -> Path:
    settings = Settings(master_key=TEST_MASTER_KEY_B64, keyring_dir=keyring_dir)
    Governance(workspace=workspace, policy=ENCRYPTED, settings=settings).grant(
        "alice", "persist", actor="dpo"
    )
    return workspace / GOVERNANCE_DIR / "consent.jsonl"


@pytest.mark.parametrize("missing", ["master key", "wrong master key", "keyring folder"])
def test_a_sealed_file_read_without_a_usable_key_names_the_file(
    tmp_path: Path, missing: str
) -> None:
    workspace = tmp_path / "ws"
    log = _sealed_consent(workspace, tmp_path / "kr")
    if missing == "master key":
        settings = Settings(keyring_dir=tmp_path / "kr")
    elif missing == "wrong master key":
        settings = Settings(master_key=generate_master_key(), keyring_dir=tmp_path / "kr")
    else:
        settings = Settings(master_key=TEST_MASTER_KEY_B64, keyring_dir=tmp_path / "elsewhere")
    gov = Governance(workspace=workspace, policy=ENCRYPTED, settings=settings)
    with pytest.raises(SealedRecordError, match=r"consent\.jsonl holds sealed") as info:
        gov.consent.is_granted("alice", "persist")
    assert info.value.path == log


def test_a_keyring_without_provider_cannot_open(tmp_path: Path) -> None:
    sealing = sealing_for(tmp_path / "kr")
    line = seal_record(LINE, sealing, CONSENT_PURPOSE, "consent.jsonl")
    blind = RecordSealing(Keyring(tmp_path / "kr", None))
    with pytest.raises(SealedRecordError, match="master key"):
        open_record(line, blind, CONSENT_PURPOSE, "consent.jsonl", tmp_path / "consent.jsonl")


def test_a_plaintext_record_is_refused_where_encryption_is_on(tmp_path: Path) -> None:
    sealing = sealing_for(tmp_path / "kr")
    with pytest.raises(StorageError, match=r"not sealed.*encrypt-workspace"):
        open_record(LINE, sealing, CONSENT_PURPOSE, "consent.jsonl", tmp_path / "consent.jsonl")


@pytest.mark.parametrize("sealed", [False, True])
def test_an_envelope_of_a_newer_version_names_both_versions(tmp_path: Path, sealed: bool) -> None:
    sealing = sealing_for(tmp_path / "kr") if sealed else None
    line = b'{"v":3,"sealed":"gm2:AAAA"}'
    with pytest.raises(FormatVersionError, match=r"version 3.*version 2"):
        open_record(line, sealing, CONSENT_PURPOSE, "consent.jsonl", tmp_path)


def test_the_sealing_keyring_is_opened_only_when_first_used(tmp_path: Path) -> None:
    calls: list[int] = []

    def keyring() -> Keyring:
        calls.append(1)
        return make_keyring(tmp_path / "kr")

    sealing = RecordSealing(keyring)
    assert calls == []
    line = sealing.seal(CONSENT_PURPOSE, "consent.jsonl", LINE)
    assert sealing.open(CONSENT_PURPOSE, "consent.jsonl", line, tmp_path) == LINE
    assert calls == [1]


def test_plaintext_mode_writes_the_consent_line_unsealed(tmp_path: Path) -> None:
    """The event's fields in plaintext, with the record chain (format version 2) added."""
    gov = Governance(workspace=tmp_path / "ws", settings=Settings())
    event = gov.grant("alice", "persist", actor="dpo")
    assert gov.sealing is None
    log = tmp_path / "ws" / GOVERNANCE_DIR / "consent.jsonl"
    chained = {**json.loads(event.to_json()), "v": 2, "seq": 1, "prev": "0" * 32}
    assert log.read_bytes() == encode_line(chained) + b"\n"


def test_each_registry_has_its_own_purpose_key_stored_wrapped(tmp_path: Path) -> None:
    sealing = RecordSealing(Keyring(tmp_path / "kr", LocalKeyProvider(bytes(range(32)))))
    sealing.seal(CONSENT_PURPOSE, "consent.jsonl", LINE)
    sealing.seal(ERASURE_PURPOSE, "tombstones/x.json", LINE)
    entries = [entry for _, entry in sealing.keyring.entries()]
    assert sorted((e.kind, e.label) for e in entries) == [
        ("purpose", CONSENT_PURPOSE),
        ("purpose", ERASURE_PURPOSE),
    ]
    assert sealing.current_generation(CONSENT_PURPOSE) == 1
    for path in (tmp_path / "kr").rglob("*"):
        assert not path.is_file() or b"patient-7" not in path.read_bytes()


# The sealed line of a consent record with every random source pinned. If this
# changes, the format changed: sealed files written by earlier releases would no
# longer open. Bump SEALED_FORMAT_VERSION instead (and keep reading version 2).
KNOWN_LINE = (
    b'{"v":2,"sealed":"gm1:AAAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAShbOlYy-ZI2pFoBJ2XrKbkbEHKbM89hZz_p8Dwz'
    b'pEQvyqvtP6Ko7TAECsxMvp4dyYrxVNw5IaOap2mPuox8UhKgnPCdhUlhWozKeIQ=="}'
)
KNOWN_PLAIN = b'{"action":"grant","subject":"customer-42","v":1}'


def test_known_answer_the_sealed_line_is_pinned_byte_for_byte(tmp_path: Path) -> None:
    keyring = Keyring(
        tmp_path / "kr",
        LocalKeyProvider(TEST_MASTER_KEY, random=SeededRandom(b"wrap")),
        random=SeededRandom(b"keys"),
    )
    sealing = RecordSealing(keyring, random=SeededRandom(b"nonces"))
    assert sealing.seal(CONSENT_PURPOSE, "consent.jsonl", KNOWN_PLAIN) == KNOWN_LINE
    assert sealing.open(CONSENT_PURPOSE, "consent.jsonl", KNOWN_LINE, tmp_path) == KNOWN_PLAIN


def test_a_cached_cipher_does_not_outlive_a_shredding(tmp_path: Path) -> None:
    """Records bound to a subject and opened before the shredding are refused after it."""
    keyring = make_keyring(tmp_path / "kr")
    sealer = RecordSealer(keyring, "export")
    theirs = sealer.seal(b"alice's record", subject_id="alice")
    assert sealer.open(theirs) == b"alice's record"  # the cipher is now cached
    make_keyring(tmp_path / "kr").shred_subject("alice")  # another process shreds
    with pytest.raises(KeyShreddedError):
        sealer.open(theirs)
