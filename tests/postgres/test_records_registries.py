"""Every registry of ``_records`` on a PgPlace: what one host writes, another sees at once.

Each "host" is a registry on its own :class:`Database` (its own pool) over the same
database, as two machines of one deployment would be; the records are the file
backend's bytes, sealed in sealed mode.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sealing_helpers import RecordMode

from governed_memory import FixedClock, StorageError
from governed_memory._crypto import CONSENT_PURPOSE
from governed_memory._postgres import Database, PgPlace
from governed_memory._protocols import WriteGuard
from governed_memory._records import (
    ConsentAction,
    ConsentRegistry,
    ErasureScope,
    ExportedFile,
    ExportReceipt,
    ExportReceiptStore,
    HoldRegistry,
    RequestRegister,
    ScheduledErasure,
    Tombstone,
    TombstoneStore,
)

NOW = dt.datetime(2027, 1, 31, 10, 0, tzinfo=dt.UTC)
ERASURE = "20261130T100000000000Z-0a0b0c0d"


@pytest.fixture
def hosts(pg_db: Database, pg_url: str) -> Iterator[tuple[PgPlace, PgPlace]]:
    """Two places on the same database through two pools (two hosts)."""
    other = Database(pg_db._url)
    try:
        yield PgPlace(pg_db), PgPlace(other)
    finally:
        other.close()


def _consent(place: PgPlace, mode: RecordMode) -> ConsentRegistry:
    return ConsentRegistry(place, sealing=mode.sealing())


def _event(registry: ConsentRegistry, action: ConsentAction, subject: str = "alice") -> Any:
    return registry.make_event(
        subject, "persist", action, at=NOW, actor="dpo", policy_id="p", policy_version="1"
    )


def test_a_withdrawal_on_one_host_stops_the_next_check_on_another(
    hosts: tuple[PgPlace, PgPlace], record_mode: RecordMode
) -> None:
    here, there = _consent(hosts[0], record_mode), _consent(hosts[1], record_mode)
    assert not there.is_granted("alice", "persist")
    here.record(_event(here, ConsentAction.GRANT))
    assert there.is_granted("alice", "persist")  # the very next check, no wait
    here.record(_event(here, ConsentAction.WITHDRAW))
    assert not there.is_granted("alice", "persist")
    there.record(_event(there, ConsentAction.GRANT, subject="bob"))  # the chain continues there
    assert [e.subject for e in here.history()] == ["alice", "alice", "bob"]
    assert "PostgreSQL" in here.where and "consent.jsonl" in here.where


def _holds(db: Database, guard: WriteGuard) -> bool:
    """Whether ``guard`` is true in the database now (as a write would check it)."""
    assert guard.database is db
    with psycopg.connect(db._url, autocommit=True) as conn:
        row = conn.execute(f"SELECT {guard.sql}", guard.params).fetchone()
    assert row is not None
    return bool(row[0])


def test_a_cached_grant_guards_a_write_until_the_log_changes_on_any_host(
    hosts: tuple[PgPlace, PgPlace], record_mode: RecordMode, pg_db: Database
) -> None:
    """``granted_guard``: the grant as last read, and SQL true while no host changed the log."""
    here, there = _consent(hosts[0], record_mode), _consent(hosts[1], record_mode)
    there.record(_event(there, ConsentAction.GRANT))
    assert here.granted_guard("alice", "persist") is None  # nothing read yet: read first
    assert here.is_granted("alice", "persist")
    guard = here.granted_guard("alice", "persist")
    assert guard is not None and _holds(pg_db, guard)
    assert here.granted_guard("bob", "persist") is None  # no grant cached for bob
    assert here.granted_guard("alice", "export") is None  # nor for another purpose
    there.record(_event(there, ConsentAction.GRANT, subject="bob"))  # any change, any subject
    assert not _holds(pg_db, guard)
    assert here.granted_guard("alice", "persist") == guard  # (cached: it reads nothing)
    assert here.is_granted("alice", "persist")  # read again: a new guard, true again
    guard = here.granted_guard("alice", "persist")
    assert guard is not None and _holds(pg_db, guard)
    there.record(_event(there, ConsentAction.WITHDRAW))
    assert not _holds(pg_db, guard)
    assert not here.is_granted("alice", "persist")
    assert here.granted_guard("alice", "persist") is None  # withdrawn as read: no guard
    assert here.is_granted("bob", "persist")
    guard = here.granted_guard("bob", "persist")
    assert guard is not None and _holds(pg_db, guard)
    bob = [r.id for r in there.records() if r.event is not None and r.event.subject == "bob"]
    there.remove(bob)  # a rewrite: a new generation, even if the count came back the same
    assert not _holds(pg_db, guard)
    there._log.delete()
    assert not _holds(pg_db, guard)


def test_the_consent_log_rows_are_the_file_lines_sealed_when_sealing(
    hosts: tuple[PgPlace, PgPlace], record_mode: RecordMode, tmp_path: Path
) -> None:
    """The database holds what the file holds: a byte copy migrates, ciphertext stays sealed."""
    on_db = _consent(hosts[0], record_mode)
    on_file = ConsentRegistry(tmp_path / "gov", sealing=record_mode.sealing())
    for registry in (on_db, on_file):
        registry.record(_event(registry, ConsentAction.GRANT))
        registry.record(_event(registry, ConsentAction.WITHDRAW))
    rows = hosts[0].stored_lines("consent.jsonl")
    assert rows is not None and len(rows) == 2
    for raw in rows:
        record_mode.check_form(raw)
        assert (b"alice" in raw) is not record_mode.sealed
    file_lines = (tmp_path / "gov" / "consent.jsonl").read_bytes().splitlines()
    opened = [on_db._log.open(r) for r in rows]
    assert opened == [on_file._log.open(r) for r in file_lines]  # the same chained plaintext
    copied = ConsentRegistry(tmp_path / "copy", sealing=record_mode.sealing())
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "consent.jsonl").write_bytes(b"".join(r + b"\n" for r in rows))
    assert [e.action for e in copied.history("alice")] == [
        ConsentAction.GRANT,
        ConsentAction.WITHDRAW,
    ]


def test_a_failing_rewrite_leaves_the_log_and_a_done_one_is_seen_elsewhere(
    hosts: tuple[PgPlace, PgPlace], record_mode: RecordMode
) -> None:
    here, there = _consent(hosts[0], record_mode), _consent(hosts[1], record_mode)
    for subject in ("alice", "bob"):
        here.record(_event(here, ConsentAction.GRANT, subject=subject))
    before = hosts[0].stored_lines("consent.jsonl")
    calls = {"n": 0}

    def fail_second(raw: bytes) -> bytes:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ValueError("a decision failed half-way")
        return raw

    with pytest.raises(ValueError):
        here.rewrite(fail_second)
    assert hosts[1].stored_lines("consent.jsonl") == before
    assert there.subjects() == ["alice", "bob"]
    bob = [r.id for r in here.records() if r.event is not None and r.event.subject == "bob"]
    assert here.remove(bob).removed == frozenset(bob)
    assert there.subjects() == ["alice"]  # a rewrite (a new generation) is read again in full
    there.record(_event(there, ConsentAction.GRANT, subject="carol"))  # chained after the note
    assert here.subjects() == ["alice", "carol"]


def _append_grants(url: str, subject: str, count: int) -> None:
    db = Database(url)
    try:
        registry = ConsentRegistry(PgPlace(db))
        for _ in range(count):
            registry.record(_event(registry, ConsentAction.GRANT, subject=subject))
    finally:
        db.close()


def test_two_processes_appending_at_once_keep_the_chain(pg_db: Database) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_append_grants, args=(pg_db._url, f"s{n}", 15)) for n in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    registry = ConsentRegistry(PgPlace(pg_db))  # reading walks and checks the whole chain
    history = registry.history()
    assert sorted(e.subject for e in history) == ["s0"] * 15 + ["s1"] * 15
    seqs = [json.loads(raw)["seq"] for raw in PgPlace(pg_db).stored_lines("consent.jsonl") or []]
    assert seqs == list(range(1, 31))


def test_holds_placed_on_one_host_bind_the_other(
    hosts: tuple[PgPlace, PgPlace], record_mode: RecordMode
) -> None:
    here = HoldRegistry(hosts[0], clock=FixedClock(NOW), sealing=record_mode.sealing())
    there = HoldRegistry(hosts[1], clock=FixedClock(NOW), sealing=record_mode.sealing())
    hold = here.place(subject="alice", reason="litigation", actor="legal")
    assert there.is_held(subject="alice")
    there.release(hold_id=hold.id, actor="dpo")
    assert not here.is_held(subject="alice")
    assert [h.id for h in here.holds(include_released=True)] == [hold.id]
    with pytest.raises(StorageError, match="not kept in files"):
        _ = here.lock  # the lock file of the file tools: a database place has none


def test_erasure_records_progress_and_schedules_live_in_the_database(
    hosts: tuple[PgPlace, PgPlace], record_mode: RecordMode
) -> None:
    here = TombstoneStore(hosts[0], sealing=record_mode.sealing())
    there = TombstoneStore(hosts[1], sealing=record_mode.sealing())
    tombstone = Tombstone(
        ERASURE, ErasureScope(subject="alice"), "2026-11-30", "dpo", "r", "p", "1"
    )
    with here.locked(ERASURE):
        here.write(tombstone)
        here.log_progress(ERASURE, {"agent": "A", "files": []})
    assert [t.id for t in there.pending()] == [ERASURE]
    assert there.progress(ERASURE) == [{"agent": "A", "files": []}]  # committed at once
    assert there.ids() == [ERASURE]
    there.drop_progress(ERASURE)
    assert here.pending() == [] and here.get(ERASURE) == tombstone
    item = ScheduledErasure("e-2", ErasureScope(agent="A"), "2027-02-01T00:00:00+00:00",
                            "2027-01-31T00:00:00+00:00", "dpo", "r")  # fmt: skip
    here.schedule(item)
    assert there.scheduled() == [item]
    assert there.unschedule("e-2") and here.scheduled() == []


def test_requests_and_export_receipts_on_the_database(
    hosts: tuple[PgPlace, PgPlace], record_mode: RecordMode
) -> None:
    here = RequestRegister(hosts[0], clock=FixedClock(NOW), sealing=record_mode.sealing())
    there = RequestRegister(hosts[1], clock=FixedClock(NOW), sealing=record_mode.sealing())
    request = here.open_request(subject="C-1", kind="access", received="2027-01-31", actor="dpo")
    there.verify(request.id, by="dpo", method="id document")
    assert here.get(request.id).verification is not None
    here.close(request.id, outcome="answered", actor="dpo", receipt="x-1")
    again = here.get(request.id)
    assert again.closing is not None and again.closing.receipt == "x-1"
    receipts = ExportReceiptStore(hosts[0], sealing=record_mode.sealing())
    receipt = ExportReceipt(
        id="x-1",
        subject_hash="h",
        agent=None,
        created_at="2027-01-31T10:00:00+00:00",
        actor="dpo",
        policy_id="p",
        policy_version="1",
        out_dir="out",
        files=(ExportedFile("a.json", "0" * 64, 3),),
    )
    receipts.write(receipt)
    elsewhere = ExportReceiptStore(hosts[1], sealing=record_mode.sealing())
    assert elsewhere.ids() == ["x-1"] and elsewhere.get("x-1") == receipt


def test_a_database_without_the_records_tables_names_the_fix(pg_url: str) -> None:
    db = Database(pg_url)
    try:
        with pytest.raises(StorageError, match="governed-memory db upgrade"):
            ConsentRegistry(PgPlace(db)).is_granted("alice", "persist")
    finally:
        db.close()


def test_the_consent_purpose_binds_the_sealed_rows(
    hosts: tuple[PgPlace, PgPlace], tmp_path: Path
) -> None:
    """A sealed row moved to another log does not open there (bound to its name)."""
    mode = RecordMode("sealed", tmp_path / "keyring")
    registry = _consent(hosts[0], mode)
    registry.record(_event(registry, ConsentAction.GRANT))
    [raw] = hosts[0].stored_lines("consent.jsonl") or []
    sealing = mode.sealing()
    assert sealing is not None
    assert b"alice" in sealing.open(CONSENT_PURPOSE, "consent.jsonl", raw, Path("x"))
    with pytest.raises(StorageError):
        sealing.open(CONSENT_PURPOSE, "requests.jsonl", raw, Path("x"))
