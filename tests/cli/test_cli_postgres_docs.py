"""docs/postgres.md's sizing, monitoring and upgrade claims, checked against a running server.

One add() is one memory_blocks row (63 bytes more when encrypted) and, with
the audit log on, one audit_entries row; a process keeps at most 8 pooled
connections, named ``governed_memory`` in pg_stat_activity; the purge's and
the scheduler's locks are advisory locks (``pg_locks``); two hosts upgrading
the schema at once apply each migration once.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from crypto_helpers import TEST_MASTER_KEY
from pg_server import PgServer

from governed_memory import (
    Conversation,
    Governance,
    LocalKeyProvider,
    LocalSigningKey,
    Policy,
    Settings,
    load_policy,
    memory_md_path,
)
from governed_memory._format import render_block

AUDIT_KEY = "ab" * 32
SIGNING_KEY = LocalSigningKey.generate().to_base64()
TEXT = "y" * 500


def _count(url: str, query: str, *params: object) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return int(row[0])


def _governance(url: str, workspace: Path, *, encrypted: bool) -> Governance:
    return Governance(
        workspace=workspace,
        policy=load_policy("regulated") if encrypted else Policy(),
        settings=Settings(database_url=url, audit_key=AUDIT_KEY),
        key_provider=LocalKeyProvider(TEST_MASTER_KEY) if encrypted else None,
    )


def _one_add(url: str, gov: Governance, subject: str | None) -> tuple[int, int, int]:
    """(memory_blocks rows, their bytes, audit_entries rows) that one add() of TEXT wrote."""
    gov.grant("alice", "persist", actor="app")
    conversation = Conversation(
        name="c",
        memory_md_path=memory_md_path("A", gov.workspace),
        governance=gov,
        subject_id=subject,
    )
    conversation.add("Human", "the first message")  # creates the memory: not counted
    blocks = "SELECT count(*) FROM governed_memory.memory_blocks"
    audit = "SELECT count(*) FROM governed_memory.audit_entries"
    before = (_count(url, blocks), _count(url, audit))
    conversation.add("Human", TEXT)
    conversation.memory_md_path = None
    size = _count(
        url,
        "SELECT octet_length(data) FROM governed_memory.memory_blocks "
        "ORDER BY written_at DESC, position DESC LIMIT 1",
    )
    return _count(url, blocks) - before[0], size, _count(url, audit) - before[1]


def _plain_block(subject: str | None) -> int:
    at = dt.datetime(2026, 1, 1, 12, 0, 0, 123456).isoformat()  # the heading's time: one width
    return len(render_block("Human", at, TEXT, {"subject": subject} if subject else None).encode())


def test_a_plaintext_add_is_one_row_of_the_block_as_the_file_backend_writes_it(
    pg_schema_url: str, workspace: Path
) -> None:
    gov = _governance(pg_schema_url, workspace, encrypted=False)
    try:
        rows, size, audited = _one_add(pg_schema_url, gov, None)
    finally:
        gov.storage.close()
    assert (rows, audited) == (1, 0)  # the default policy keeps no audit log
    assert size == _plain_block(None) and size - len(TEXT) < 60


def test_an_encrypted_audited_add_is_one_block_63_bytes_larger_and_one_audit_row(
    pg_schema_url: str, workspace: Path
) -> None:
    gov = _governance(pg_schema_url, workspace, encrypted=True)
    try:
        rows, size, audited = _one_add(pg_schema_url, gov, "alice")
        line = _count(
            pg_schema_url,
            "SELECT octet_length(line) FROM governed_memory.audit_entries "
            "ORDER BY seq DESC LIMIT 1",
        )
    finally:
        gov.storage.close()
    assert (rows, audited) == (1, 1)
    assert size == _plain_block("alice") + 63
    assert 400 <= line <= 800  # "about 600 bytes"


def test_a_process_keeps_at_most_8_connections_named_governed_memory(
    pg_schema_url: str, workspace: Path
) -> None:
    gov = _governance(pg_schema_url, workspace, encrypted=False)
    database = pg_schema_url.split("@/", 1)[1].split("?", 1)[0]
    errors: list[BaseException] = []

    def write(agent: int) -> None:
        try:
            conversation = Conversation(
                name=f"c{agent}",
                memory_md_path=memory_md_path(f"agent{agent}", gov.workspace),
                governance=gov,
            )
            for n in range(5):
                conversation.add("Human", f"message {n}")
            conversation.memory_md_path = None
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    try:
        threads = [threading.Thread(target=write, args=(a,)) for a in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        named = _count(
            pg_schema_url,
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = 'governed_memory'",
            database,
        )
        assert 1 <= named <= 8
        purge = gov.storage.leadership("purge")
        assert purge.try_acquire()
        try:
            advisory = _count(
                pg_schema_url,
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE l.locktype = 'advisory' AND a.application_name = 'governed_memory' "
                "AND a.datname = %s",
                database,
            )
            assert advisory == 1  # the purge's lock, on a session of its own
        finally:
            purge.release()
    finally:
        gov.storage.close()


def test_two_hosts_upgrading_at_once_apply_each_migration_once(pg_url: str) -> None:
    """What ``db upgrade`` runs, from two connections at the same moment: one row per migration."""
    from governed_memory._postgres import SCHEMA_VERSION, Database, upgrade_schema

    start = threading.Barrier(2)
    results: list[tuple[int | None, int]] = []

    def upgrade() -> None:
        db = Database(pg_url, min_size=0)
        try:
            start.wait()
            results.append(upgrade_schema(db))
        finally:
            db.close()

    threads = [threading.Thread(target=upgrade) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # One applied the migrations; the other waited on the advisory lock and found them applied.
    assert sorted(results, key=str) == [(SCHEMA_VERSION, SCHEMA_VERSION), (None, SCHEMA_VERSION)]
    versions = _count(pg_url, "SELECT count(*) FROM governed_memory.schema_version")
    assert versions == SCHEMA_VERSION


def test_an_entry_inserted_into_the_database_chain_is_found_as_in_the_file_log(
    pg_schema_url: str,
) -> None:
    """The page's "inserted" finding: a genuine entry copied into the middle by the superuser."""
    from governed_memory._audit import AuditKey, FindingKind, verify_storage
    from governed_memory._postgres import Database, PgAuditStorage

    key = AuditKey(bytes(range(32)))
    db = Database(pg_schema_url)
    try:
        log = PgAuditStorage(db, key)
        at = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
        for n in range(6):
            log.append("persist", {"n": n}, at=at)
        assert verify_storage(log, key).ok
        table = "governed_memory.audit_entries"
        with psycopg.connect(pg_schema_url, autocommit=True) as conn:
            conn.execute("SET session_replication_role = replica")  # past the trigger
            conn.execute(f"UPDATE {table} SET seq = seq + 1000 WHERE seq >= 5")
            conn.execute(f"UPDATE {table} SET seq = seq - 999 WHERE seq >= 1000")
            conn.execute(
                f"INSERT INTO {table} (seq, segment, ts, event, line) "
                f"SELECT 5, segment, ts, event, line FROM {table} WHERE seq = 2"
            )
        report = verify_storage(log, key)
        assert [f.kind for f in report.findings] == [FindingKind.INSERTED]
        assert report.first is not None and "a copy of entry seq 2" in report.first.message
    finally:
        db.close()


def test_a_backup_restores_a_shredded_subject_until_its_master_key_is_retired(
    pg_server: PgServer, pg_schema_url: str, tmp_path: Path
) -> None:
    """ "Backups and crypto-shredding": the page's procedure, step by step.

    A dump taken before an erasure brings the subject back when restored under
    the master key that wrapped it; after ``keys rotate`` to a new master key
    (the old one retired), neither the live database nor that backup needs or
    yields the old key's data: the backup no longer decrypts.
    """
    import subprocess

    from sealing_helpers import TEST_MASTER_KEY_B64

    from governed_memory import GovernedMemoryError, erase, generate_master_key, subject_records
    from governed_memory._cli import main
    from governed_memory._crypto import LocalKeyProvider

    def governance(url: str, master: str) -> Governance:
        return Governance(
            workspace=tmp_path / "ws",
            policy=load_policy("regulated"),
            settings=Settings(database_url=url, audit_key=AUDIT_KEY, signing_key=SIGNING_KEY),
            key_provider=LocalKeyProvider.from_base64(master),
        )

    def contents(url: str, master: str) -> list[str]:
        gov = governance(url, master)
        try:
            return [r.content for r in subject_records(gov, "alice")]
        finally:
            gov.storage.close()

    live = governance(pg_schema_url, TEST_MASTER_KEY_B64)
    try:
        live.grant("alice", "persist", actor="dpo@example.org")
        conversation = Conversation(
            name="c",
            memory_md_path=memory_md_path("A", live.workspace),
            governance=live,
            subject_id="alice",
        )
        conversation.add("Human", "alice's address is 1 Main St")
        conversation.memory_md_path = None
        shredded = (
            "SELECT count(*) FROM governed_memory.keyring_entries "
            "WHERE (convert_from(data, 'UTF8')::jsonb)->'keys' = '{}'::jsonb"
        )
        assert _count(pg_schema_url, shredded) == 0
        backup = tmp_path / "backup.sql"
        backup.write_bytes(pg_server.dump(pg_schema_url))  # the nightly pg_dump
        receipt = erase(live, subject="alice", reason="art. 17", actor="dpo@example.org")
        assert receipt.keys_shredded  # the subject's data key is destroyed
        assert _count(pg_schema_url, shredded) == 1  # its entry stays, without a wrapped key
    finally:
        live.storage.close()
    assert contents(pg_schema_url, TEST_MASTER_KEY_B64) == []

    restored = pg_server.url(pg_server.create_database())
    subprocess.run(
        [str(pg_server.bin / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", restored],
        input=backup.read_bytes(),
        check=True,
        capture_output=True,
    )
    assert contents(restored, TEST_MASTER_KEY_B64) == ["alice's address is 1 Main St"]

    new = generate_master_key()
    env = {
        "GOVERNED_MEMORY_DATABASE_URL": pg_schema_url,
        "GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY,
        "GOVERNED_MEMORY_SIGNING_KEY": SIGNING_KEY,
        "GOVERNED_MEMORY_MASTER_KEY": new,
        "GOVERNED_MEMORY_MASTER_KEY_OLD": TEST_MASTER_KEY_B64,
    }
    rotated = CliRunner().invoke(main, ["--policy", "regulated", "keys", "rotate"], env=env)
    assert rotated.exit_code == 0, rotated.stderr
    assert contents(pg_schema_url, new) == []  # the live deployment runs on the new key alone
    with pytest.raises(GovernedMemoryError):
        contents(restored, new)  # the old backup: wrapped under the retired key


@pytest.mark.parametrize("command", ["encrypt-workspace", "decrypt-workspace"])
def test_the_file_only_maintenance_commands_are_refused_on_a_database_in_one_line(
    command: str,
) -> None:
    """The page's "Limits": they work on a workspace folder; nothing is connected or written."""
    from governed_memory import generate_master_key
    from governed_memory._cli import main

    env = {
        "GOVERNED_MEMORY_DATABASE_URL": "postgresql://gm@127.0.0.1:1/gm",
        "GOVERNED_MEMORY_MASTER_KEY": generate_master_key(),
    }
    result = CliRunner().invoke(main, ["--policy", "regulated", command], env=env)
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "file backend only" in line and "GOVERNED_MEMORY_DATABASE_URL" in line
