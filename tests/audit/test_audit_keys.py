"""Keyed hashes are remembered per key: one HMAC per distinct id, never another key's hash."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from pathlib import Path

import pytest

from governed_memory import FixedClock, Settings
from governed_memory._audit import AuditKey, AuditTrail, audit_key_from_settings
from governed_memory._audit._keys import PSEUDONYMS_KEPT
from governed_memory._errors import ConfigurationError
from governed_memory._policy import Policy

ROOT = bytes(range(32))
AUDITED = Policy.model_validate({"audit": {"enabled": True}})


def _reference(root: bytes, kind: str, value: str) -> str:
    """The keyed hash as the key derivation defines it, computed from scratch."""
    from governed_memory._audit._keys import _PSEUDONYM_INFO, _hkdf

    key = _hkdf(root, _PSEUDONYM_INFO)
    data = kind.encode() + b"\x00" + value.encode("utf-8", "surrogatepass")
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:32]


def test_a_remembered_hash_is_the_one_the_key_defines() -> None:
    key = AuditKey(ROOT)
    first = key.pseudonym("subject", "alice")
    assert key.pseudonym("subject", "alice") == first == _reference(ROOT, "subject", "alice")
    assert key.pseudonym("agent", "alice") == _reference(ROOT, "agent", "alice")


def test_the_mac_is_hmac_sha256_under_the_mac_key() -> None:
    from governed_memory._audit._keys import _MAC_INFO, _hkdf

    key = AuditKey(ROOT)
    expected = hmac.new(_hkdf(ROOT, _MAC_INFO), b"data", hashlib.sha256).hexdigest()
    assert key.mac(b"data") == key.mac(b"data") == expected
    assert key.verify_mac(b"data", expected) and not key.verify_mac(b"datb", expected)


def test_another_key_never_answers_with_a_remembered_hash() -> None:
    old, new = AuditKey(ROOT), AuditKey(bytes(range(1, 33)))
    old.pseudonym("subject", "alice")
    assert new.pseudonym("subject", "alice") == _reference(bytes(range(1, 33)), "subject", "alice")
    assert new.pseudonym("subject", "alice") != old.pseudonym("subject", "alice")


def test_the_memo_is_bounded_and_still_answers_after_starting_afresh() -> None:
    key = AuditKey(ROOT)
    for i in range(PSEUDONYMS_KEPT + 10):
        key.pseudonym("subject", f"s-{i}")
    assert len(key._pseudonyms) <= PSEUDONYMS_KEPT
    assert key.pseudonym("subject", "s-0") == _reference(ROOT, "subject", "s-0")


def test_an_unknown_kind_is_refused_every_time() -> None:
    key = AuditKey(ROOT)
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="'person'"):
            key.pseudonym("person", "alice")


def test_a_trail_under_a_rotated_master_key_records_the_new_keys_hashes(tmp_path: Path) -> None:
    """The same process, the same agent and subject: after the rotation, the new key's hashes."""
    old_master, new_master = bytes(range(100, 132)), bytes(range(200, 232))

    def trail(settings: Settings) -> AuditTrail:
        return AuditTrail.from_settings(
            settings,
            policy=AUDITED,
            workspace=tmp_path,
            clock=FixedClock(dt.datetime(2026, 11, 30, tzinfo=dt.UTC)),
        )

    before = trail(Settings(master_key=base64.b64encode(old_master).decode()))
    before.record("persist", agent="Bench", subject_id="alice", outcome="ok")
    before.close()
    rotated = Settings(
        master_key=base64.b64encode(new_master).decode(),
        master_key_old=base64.b64encode(old_master).decode(),
    )
    after = trail(rotated)
    entry = after.record_entry("persist", agent="Bench", subject_id="alice", outcome="ok")
    after.close()
    new_key = audit_key_from_settings(rotated)
    assert new_key is not None and entry is not None
    assert entry.kid == new_key.key_id != before.key.key_id
    assert entry.attrs["subject.hash"] == new_key.pseudonym("subject", "alice")
    assert entry.attrs["subject.hash"] != before.key.pseudonym("subject", "alice")
    assert entry.attrs["agent.hash"] == new_key.pseudonym("agent", "Bench")
