"""Retention over the governance registries, plaintext and sealed: consent records and
tombstones age by the times recorded inside them, and a hold keeps a subject's consent."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sealing_helpers import RecordMode

from governed_memory import FixedClock, Governance
from governed_memory._crypto._sealing import is_sealed
from governed_memory._retention import Retention
from governed_memory._subjects import erase, erasure_receipts

T0 = dt.datetime(2026, 11, 30, 10, 0)
RULES = {"retention": {"consent_records_max_age": "30d", "tombstones_max_age": "30d"}}


def test_expired_consent_records_and_tombstones_are_purged_and_held_ones_kept(
    workspace: Path, record_mode: RecordMode
) -> None:
    clock = FixedClock(T0)
    gov = Governance(
        workspace=workspace,
        policy=record_mode.policy(RULES),
        settings=record_mode.settings(),
        clock=clock,
    )
    for subject in ("alice", "bob"):
        gov.grant(subject, "persist", actor="dpo")
        gov.withdraw(subject, "persist", actor="dpo")
    gov.grant("carol", "persist", actor="dpo")  # in force: never purged
    erase(gov, subject="dave", reason="request 1")
    retention = Retention(gov)
    retention.holds.place(subject="bob", reason="case", actor="legal")

    clock.advance(dt.timedelta(days=40))  # a purge that deletes runs at the clock's time
    report = retention.purge(as_of=T0 + dt.timedelta(days=40))

    assert report.deleted == {"consent_records_max_age": 2, "tombstones_max_age": 1}
    assert report.held == {"consent_records_max_age": 2}
    again = Governance(
        workspace=workspace,
        policy=record_mode.policy(RULES),
        settings=record_mode.settings(),
        clock=clock,
    )
    assert [(e.subject, e.action.value) for e in again.consent.history()] == [
        ("bob", "grant"),
        ("bob", "withdraw"),
        ("carol", "grant"),
    ]
    assert erasure_receipts(again) == []
    log = gov.consent.path.read_bytes()
    assert all(is_sealed(line) == record_mode.sealed for line in log.splitlines())
    assert (b"carol" in log) is not record_mode.sealed
