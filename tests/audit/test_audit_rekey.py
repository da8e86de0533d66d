"""Versioned audit keys: a log continues under a new audit key only after an endorsed audit.rekey.

An audit key derived from the master key changes when the master key is
rotated. Given the previous key, the log writes an ``audit.rekey`` entry
(signed with the new key, endorsed by the old one) and carries on; verify
accepts each key for its own part of the chain, and a key change without an
endorsed rekey is reported.
"""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path

import pytest

from governed_memory import FixedClock, Settings
from governed_memory._audit import (
    AuditKey,
    AuditLog,
    AuditTrail,
    FindingKind,
    audit_keys_from_settings,
    verify_log,
)
from governed_memory._audit._entry import format_ts, seal
from governed_memory._errors import AuditWriteError

OLD = AuditKey(b"\x01" * 32)
NEW = AuditKey(b"\x02" * 32)
OTHER = AuditKey(b"\x03" * 32)
CLOCK = FixedClock(dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC), tick=dt.timedelta(seconds=1))


def _log(folder: Path, key: AuditKey, **kwargs: object) -> AuditLog:
    return AuditLog(folder, key, clock=CLOCK, **kwargs)  # type: ignore[arg-type]


def _old_log(folder: Path) -> None:
    log = _log(folder, OLD)
    log.append("persist", {"outcome": "ok"})
    log.close()


def test_the_log_continues_under_the_new_key_after_an_endorsed_rekey(tmp_path: Path) -> None:
    _old_log(tmp_path)
    log = _log(tmp_path, NEW, previous_keys=[OLD])
    entry = log.append("persist", {"outcome": "ok"})
    log.append("persist", {"outcome": "ok"})
    log.close()
    events = [(e.event, e.kid) for e in _log(tmp_path, NEW).entries()]
    assert events == [
        ("audit.segment", OLD.key_id),
        ("persist", OLD.key_id),
        ("audit.rekey", NEW.key_id),
        ("persist", NEW.key_id),
        ("persist", NEW.key_id),
    ]
    assert entry.seq == 4
    rekey = list(_log(tmp_path, NEW).entries())[2]
    assert rekey.attrs["old_key_id"] == OLD.key_id and rekey.attrs["new_key_id"] == NEW.key_id
    report = verify_log(tmp_path, [NEW, OLD])
    assert report.ok, report.findings
    assert report.entries == 5


def test_verify_without_the_old_key_says_which_key_and_where_it_changed(tmp_path: Path) -> None:
    _old_log(tmp_path)
    _log(tmp_path, NEW, previous_keys=[OLD]).append("persist", {"outcome": "ok"})
    report = verify_log(tmp_path, NEW)
    assert [f.kind for f in report.findings] == [FindingKind.WRONG_KEY]
    message = report.findings[0].message
    assert OLD.key_id in message and "audit.rekey" in message and "seq 3" in message
    assert "GOVERNED_MEMORY_MASTER_KEY_OLD" in message


def test_a_log_under_a_key_that_is_not_a_previous_one_is_still_refused(tmp_path: Path) -> None:
    _old_log(tmp_path)
    log = _log(tmp_path, NEW, previous_keys=[OTHER])
    with pytest.raises(AuditWriteError, match=rf"{OLD.key_id}.*MASTER_KEY_OLD"):
        log.append("persist", {"outcome": "ok"})
    log.close()
    assert verify_log(tmp_path, OLD).ok  # nothing was written


def _append_raw(folder: Path, key: AuditKey, event: str, attrs: dict[str, object]) -> None:
    segment = next(folder.glob("audit-*.jsonl"))
    last = list(_log(folder, OLD).entries())[-1]
    entry = seal(
        seq=last.seq + 1,
        ts=format_ts(CLOCK.now()),
        event=event,
        attrs=attrs,
        prev=last.hash,
        key=key,
    )
    with segment.open("ab") as file:
        file.write(entry.line + b"\n")


def test_an_entry_under_another_key_without_a_rekey_is_reported(tmp_path: Path) -> None:
    _old_log(tmp_path)
    _append_raw(tmp_path, NEW, "persist", {"outcome": "ok"})
    findings = verify_log(tmp_path, [OLD, NEW]).findings
    assert FindingKind.FORGED in [f.kind for f in findings]
    assert any("without an audit.rekey" in f.message for f in findings)


def test_a_rekey_the_old_key_did_not_endorse_is_reported(tmp_path: Path) -> None:
    _old_log(tmp_path)
    attrs = {"old_key_id": OLD.key_id, "new_key_id": NEW.key_id, "endorsement": "00" * 32}
    _append_raw(tmp_path, NEW, "audit.rekey", attrs)
    findings = verify_log(tmp_path, [OLD, NEW]).findings
    assert any(f.kind is FindingKind.FORGED and f.seq == 3 for f in findings)


def test_keys_from_settings_derive_the_previous_version_from_the_old_master_key() -> None:
    old, new = bytes(range(32)), bytes(range(32, 64))
    settings = Settings(
        master_key=base64.b64encode(new).decode(), master_key_old=base64.b64encode(old).decode()
    )
    keys = [k.key_id for k in audit_keys_from_settings(settings)]
    assert keys == [
        AuditKey.derive_from_master(new).key_id,
        AuditKey.derive_from_master(old).key_id,
    ]
    explicit = Settings(audit_key="ab" * 32, master_key_old=base64.b64encode(old).decode())
    assert [k.key_id for k in audit_keys_from_settings(explicit)] == [
        AuditKey.from_text("ab" * 32).key_id
    ]  # an explicit audit key has no versions


def test_entries_for_finds_a_subject_under_both_versions_of_the_key(tmp_path: Path) -> None:
    before = AuditTrail(key=OLD, log=_log(tmp_path, OLD), spans=False)
    before.record("export", agent="A", subject_id="s-1", outcome="ok")
    before.close()
    after = AuditTrail(
        key=NEW, previous_keys=[OLD], log=_log(tmp_path, NEW, previous_keys=[OLD]), spans=False
    )
    after.record("export", agent="A", subject_id="s-1", outcome="ok")
    assert [e["kid"] for e in after.entries_for(subject_id="s-1")] == [OLD.key_id, NEW.key_id]
    assert len(after.entries_for(agent="A")) == 2
    assert after.verify().ok
    after.close()
