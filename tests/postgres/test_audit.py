"""PgAuditStorage: the append-only table, the least-privilege role, and tampering found by verify."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from pg_server import PgServer

from governed_memory._audit import AuditEvent, AuditKey, FindingKind, verify_storage
from governed_memory._errors import AuditWriteError, DatabaseError
from governed_memory._postgres import Database, PgAuditStorage, upgrade_schema
from governed_memory._postgres._ddl_audit import application_grants

KEY = AuditKey(bytes(range(32)))
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def _fill(log: PgAuditStorage, days: int = 2, per_day: int = 3) -> None:
    for day in range(days):
        for i in range(per_day):
            log.append("persist", {"n": day * per_day + i}, at=T0 + day * DAY)


@pytest.fixture
def log(pg_db: Database) -> PgAuditStorage:
    return PgAuditStorage(pg_db, KEY, period="day")


def _superuser(pg_url: str, statement: str, *, bypass_trigger: bool = True) -> None:
    """Run ``statement`` as the superuser; with ``bypass_trigger``, past the table's trigger."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        if bypass_trigger:  # what a superuser tampering with the table would do
            conn.execute("SET session_replication_role = replica")
        conn.execute(statement)  # type: ignore[arg-type]


def _kinds(log: PgAuditStorage) -> list[FindingKind]:
    return [f.kind for f in verify_storage(log, KEY).findings]


# -- the chain ------------------------------------------------------------------------------


def test_an_intact_chain_verifies_with_the_file_logs_verifier(log: PgAuditStorage) -> None:
    _fill(log)
    report = verify_storage(log, KEY)
    assert report.ok, report.findings
    assert report.entries == len(list(log.entries())) == 8  # 6 entries + 2 segment anchors
    assert report.segments == ("audit-2026-11-01.jsonl", "audit-2026-11-02.jsonl")


def test_entries_are_stored_as_their_canonical_line(pg_url: str, log: PgAuditStorage) -> None:
    entry = log.append("persist", {"note": "Zoë"}, at=T0)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT line FROM governed_memory.audit_entries WHERE seq = %s", (entry.seq,)
        ).fetchone()
    assert row is not None and bytes(row[0]) == entry.line
    assert entry.check(KEY) == (True, True)


def test_purged_segments_verify_and_are_recorded(log: PgAuditStorage) -> None:
    _fill(log, days=3)
    first = log.segment_ids()[0]
    assert log.purge_segments([first]) == [first]
    report = verify_storage(log, KEY)
    assert report.ok, report.findings
    assert report.purged == (first,)


def test_a_log_under_another_key_is_refused_by_the_writer(pg_db: Database) -> None:
    PgAuditStorage(pg_db, KEY).append("persist", {}, at=T0)
    with pytest.raises(AuditWriteError, match="key id"):
        PgAuditStorage(pg_db, AuditKey(bytes(32))).append("persist", {}, at=T0)


def test_a_previous_key_is_continued_after_an_endorsed_rekey(pg_db: Database) -> None:
    old = AuditKey(bytes(32))
    PgAuditStorage(pg_db, old).append("persist", {}, at=T0)
    PgAuditStorage(pg_db, KEY, previous_keys=[old]).append("persist", {}, at=T0)
    log = PgAuditStorage(pg_db, KEY)
    assert [e.event for e in log.entries()][-2:] == [AuditEvent.REKEY, "persist"]
    assert verify_storage(log, [KEY, old]).ok


# -- the trigger and the roles ----------------------------------------------------------------


@pytest.fixture
def app_db(pg_server: PgServer, pg_url: str, pg_db: Database) -> Iterator[Database]:
    """The database as a least-privilege application role (granted ``application_grants``)."""
    dbname = urlsplit(pg_url).path.lstrip("/")
    role = f"app_{dbname}"
    pg_server.sql(f'CREATE ROLE "{role}" LOGIN')
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in application_grants(role):
            conn.execute(statement)  # type: ignore[arg-type]
    app_url = pg_url.replace(f"{urlsplit(pg_url).username}@", f"{role}@", 1)
    db = Database(app_url)
    try:
        yield db
    finally:
        db.close()


@pytest.fixture
def app_log(app_db: Database) -> PgAuditStorage:
    return PgAuditStorage(app_db, KEY, period="day")


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        ("UPDATE governed_memory.audit_entries SET event = 'x'", "permission denied"),
        ("DELETE FROM governed_memory.audit_entries", "permission denied"),
        ("TRUNCATE governed_memory.audit_entries", "permission denied"),
        ("DROP TABLE governed_memory.audit_entries", "must be owner"),
        ("ALTER TABLE governed_memory.audit_entries DISABLE TRIGGER ALL", "must be owner"),
        ("DELETE FROM governed_memory.audit_head", "permission denied"),
    ],
)
def test_the_application_role_cannot_rewrite_history(
    app_db: Database, app_log: PgAuditStorage, statement: str, refusal: str
) -> None:
    _fill(app_log)
    before = [e.hash for e in app_log.entries()]
    with (
        pytest.raises(DatabaseError, match=f"{refusal}.*Roles and least privilege"),
        app_db.transaction() as conn,
    ):
        conn.execute(statement)  # type: ignore[arg-type]
    assert [e.hash for e in app_log.entries()] == before


def test_the_application_role_appends_and_purges_through_the_definer_function(
    app_log: PgAuditStorage,
) -> None:
    _fill(app_log, days=3)
    first = app_log.segment_ids()[0]
    assert app_log.purge_segments([first]) == [first]
    assert first not in app_log.segment_ids()
    assert verify_storage(app_log, KEY).ok


def test_the_trigger_refuses_even_the_owner(pg_url: str, log: PgAuditStorage) -> None:
    _fill(log)
    for statement in (
        "UPDATE governed_memory.audit_entries SET event = 'x'",
        "DELETE FROM governed_memory.audit_entries WHERE seq = 2",
        "TRUNCATE governed_memory.audit_entries",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            _superuser(pg_url, statement, bypass_trigger=False)
    assert verify_storage(log, KEY).ok


def test_the_purge_function_refuses_what_no_purge_entry_records(
    pg_url: str, log: PgAuditStorage
) -> None:
    _fill(log, days=3)
    first = log.segment_ids()[0]
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match=r"audit\.purge"):
        _superuser(
            pg_url,
            f"SELECT governed_memory.audit_purge_segments(ARRAY['{first}'])",
            bypass_trigger=False,
        )
    assert log.segment_ids()[0] == first


# -- tampering by the superuser: the file log's findings -----------------------------------------


def test_changed_attrs_are_found_altered(pg_url: str, log: PgAuditStorage) -> None:
    _fill(log)
    _superuser(
        pg_url,
        "UPDATE governed_memory.audit_entries "
        "SET line = convert_to(replace(convert_from(line, 'UTF8'), '\"n\":1', '\"n\":7'), 'UTF8') "
        "WHERE seq = 3",
    )
    report = verify_storage(log, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.ALTERED]
    assert report.first is not None and report.first.seq == 3


def test_a_deleted_row_is_found_removed(pg_url: str, log: PgAuditStorage) -> None:
    _fill(log)
    _superuser(pg_url, "DELETE FROM governed_memory.audit_entries WHERE seq = 3")
    report = verify_storage(log, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.REMOVED]
    assert "seq 3" in report.findings[0].message


def test_deleted_newest_rows_are_found_truncated_and_recorded_by_the_next_append(
    pg_url: str, log: PgAuditStorage
) -> None:
    _fill(log)
    _superuser(pg_url, "DELETE FROM governed_memory.audit_entries WHERE seq >= 7")
    assert _kinds(log) == [FindingKind.TRUNCATED]
    log.append("persist", {}, at=T0 + DAY)
    events = [e.event for e in log.entries()]
    assert events[-2:] == [AuditEvent.DISCONTINUITY, "persist"]
    assert FindingKind.REMOVED in _kinds(log)  # the gap stays visible for ever


def test_reordered_seq_is_found_reordered(pg_url: str, log: PgAuditStorage) -> None:
    _fill(log)
    _superuser(
        pg_url,
        "UPDATE governed_memory.audit_entries SET seq = 1000 WHERE seq = 3; "
        "UPDATE governed_memory.audit_entries SET seq = 3 WHERE seq = 4; "
        "UPDATE governed_memory.audit_entries SET seq = 4 WHERE seq = 1000",
    )
    assert _kinds(log) == [FindingKind.REORDERED]


def test_a_replaced_head_row_is_found(pg_url: str, log: PgAuditStorage) -> None:
    _fill(log)
    _superuser(pg_url, "UPDATE governed_memory.audit_head SET seq = seq + 5")
    assert _kinds(log) == [FindingKind.HEAD]


def test_upgrade_of_a_fresh_database_creates_the_audit_tables(pg_url: str) -> None:
    db = Database(pg_url)
    try:
        upgrade_schema(db)
        assert PgAuditStorage(db, KEY).head() is None
    finally:
        db.close()


# -- the readers over the database ----------------------------------------------------------------


def test_the_trail_records_verifies_and_checkpoints_over_the_database(pg_db: Database) -> None:
    from governed_memory import FixedClock
    from governed_memory._audit import AuditTrail, export_lines, latest_checkpoint
    from governed_memory._crypto import LocalSigningKey

    log = PgAuditStorage(pg_db, KEY, clock=FixedClock(T0, tick=dt.timedelta(seconds=1)))
    trail = AuditTrail(key=KEY, log=log, spans=False)
    entry = trail.record_entry("persist", agent="a", subject_id="s", outcome="ok")
    assert entry is not None and entry.attrs["agent.hash"] == trail.agent_hash("a")
    made = trail.checkpoint(LocalSigningKey(bytes(range(32))))
    assert (made.seq, made.hash) == (entry.seq, entry.hash)
    assert latest_checkpoint(log).seq == made.seq
    assert trail.verify().ok
    assert trail.entries_for(subject_id="s")[0]["hash"] == entry.hash
    assert len(export_lines(log, T0)) == len(list(log.entries())) == 3  # anchor, entry, checkpoint
