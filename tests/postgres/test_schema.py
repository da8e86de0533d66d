"""The schema's versioned migrations: upgrade, the version check, and the server's errors."""

from __future__ import annotations

import pytest

from governed_memory import DatabaseError, SchemaVersionError
from governed_memory._postgres import (
    SCHEMA,
    SCHEMA_VERSION,
    Database,
    check_schema,
    schema_version,
    upgrade_schema,
)


def test_upgrade_applies_every_migration_once(pg_url: str) -> None:
    db = Database(pg_url)
    try:
        assert schema_version(db) is None
        assert upgrade_schema(db) == (None, SCHEMA_VERSION)
        assert upgrade_schema(db) == (SCHEMA_VERSION, SCHEMA_VERSION)
        check_schema(db)
        with db.transaction() as conn:
            rows = conn.execute(f"SELECT version FROM {SCHEMA}.schema_version").fetchall()
        assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
    finally:
        db.close()


def test_check_refuses_a_database_without_the_schema(pg_url: str) -> None:
    db = Database(pg_url)
    try:
        with pytest.raises(SchemaVersionError, match="db upgrade"):
            check_schema(db)
    finally:
        db.close()


def test_check_names_both_versions_of_a_newer_database(pg_db: Database) -> None:
    with pg_db.transaction() as conn:
        conn.execute(
            f"INSERT INTO {SCHEMA}.schema_version (version, description) VALUES (%s, 'future')",
            (SCHEMA_VERSION + 1,),
        )
    with pytest.raises(SchemaVersionError) as caught:
        check_schema(pg_db)
    message = str(caught.value)
    assert f"version {SCHEMA_VERSION + 1}" in message and f"release's {SCHEMA_VERSION}" in message
    with pytest.raises(SchemaVersionError, match="newer"):
        upgrade_schema(pg_db)


def test_wrong_password_is_one_line_naming_the_host(pg_server) -> None:  # type: ignore[no-untyped-def]
    pg_server.sql(
        "DO $$ BEGIN CREATE ROLE gm_pw LOGIN PASSWORD 'right'; "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    db = Database(pg_server.tcp_url("postgres", "gm_pw", "wrong"), connect_timeout=5)
    try:
        with pytest.raises(DatabaseError) as caught:
            schema_version(db)
    finally:
        db.close()
    message = str(caught.value)
    assert "\n" not in message
    assert f"127.0.0.1:{pg_server.port}/postgres" in message
    assert "password" in message and "wrong" not in message.split("refused")[0]


def test_unreachable_server_is_retryable_and_names_the_fix() -> None:
    db = Database("postgresql://gm@127.0.0.1:1/gm", connect_timeout=2)
    try:
        with pytest.raises(DatabaseError) as caught:
            schema_version(db)
    finally:
        db.close()
    assert caught.value.retryable
    assert "127.0.0.1:1/gm" in str(caught.value) and "running" in str(caught.value)
