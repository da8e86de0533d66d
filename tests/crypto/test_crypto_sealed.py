"""Sealed records: what other layers use to keep consent records and exports off disk in plaintext."""

from __future__ import annotations

from pathlib import Path

import pytest
from crypto_helpers import make_keyring
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governed_memory._crypto._sealed import RecordSealer
from governed_memory._errors import DecryptionError, KeyShreddedError


def test_round_trip_is_one_ascii_line_without_the_plaintext(tmp_path: Path) -> None:
    sealer = RecordSealer(make_keyring(tmp_path / "kr"), "consent")
    token = sealer.seal(b'{"subject": "patient-7", "purpose": "persist"}')
    assert token.isascii() and b"\n" not in token and b"patient-7" not in token
    assert sealer.open(token) == b'{"subject": "patient-7", "purpose": "persist"}'
    assert sealer.open(token.decode()) == sealer.open(token)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=500))
def test_any_bytes_round_trip(tmp_path: Path, data: bytes) -> None:
    sealer = RecordSealer(make_keyring(tmp_path / "kr"), "export")
    assert sealer.open(sealer.seal(data)) == data


def test_a_token_for_another_purpose_or_workspace_does_not_open(tmp_path: Path) -> None:
    token = RecordSealer(make_keyring(tmp_path / "kr"), "consent").seal(b"x")
    with pytest.raises(DecryptionError):
        RecordSealer(make_keyring(tmp_path / "kr"), "export").open(token)
    other = RecordSealer(make_keyring(tmp_path / "other"), "consent")
    other.seal(b"y")  # create that keyring
    with pytest.raises(DecryptionError):
        other.open(token)


def test_altered_or_garbage_tokens_name_the_file(tmp_path: Path) -> None:
    sealer = RecordSealer(make_keyring(tmp_path / "kr"), "consent")
    token = bytearray(sealer.seal(b"x"))
    token[-6] = ord("A") if token[-6] != ord("A") else ord("B")
    for bad in (bytes(token), b"gm1:!!!", b"plain text"):
        with pytest.raises(DecryptionError, match=r"consent\.jsonl"):
            sealer.open(bad, tmp_path / "consent.jsonl")


def test_records_sealed_with_a_subject_are_shredded_with_it(tmp_path: Path) -> None:
    keyring = make_keyring(tmp_path / "kr")
    sealer = RecordSealer(keyring, "export")
    theirs = sealer.seal(b"alice's export", subject_id="alice")
    general = sealer.seal(b"general")
    keyring.shred_subject("alice")
    with pytest.raises(KeyShreddedError):
        sealer.open(theirs)
    assert sealer.open(general) == b"general"
