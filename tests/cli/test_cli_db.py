"""``governed-memory db upgrade|status`` through the real entry point, against the test server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governed_memory._postgres import SCHEMA_VERSION, Database, schema_version


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main, ["--workspace", str(tmp_path / "ws"), "db", *args], env=env or {}
    )
    return result.exit_code, result.stdout, result.stderr


def _status(tmp_path: Path, url: str) -> dict[str, Any]:
    code, out, err = run(tmp_path, "status", "--json", env={"GOVERNED_MEMORY_DATABASE_URL": url})
    assert code == 0, err
    return dict(json.loads(out))


def test_upgrade_creates_the_schema_and_status_reports_it(tmp_path: Path, pg_url: str) -> None:
    before = _status(tmp_path, pg_url)
    assert before["backend"] == "postgres" and before["schema_version"] is None
    assert "db upgrade" in before["state"]
    code, out, err = run(tmp_path, "upgrade", env={"GOVERNED_MEMORY_DATABASE_URL": pg_url})
    assert code == 0, err
    assert f"to version {SCHEMA_VERSION}" in out
    db = Database(pg_url)
    try:
        assert schema_version(db) == SCHEMA_VERSION  # really applied, in the database
    finally:
        db.close()
    after = _status(tmp_path, pg_url)
    assert after["schema_version"] == SCHEMA_VERSION and after["state"] == "up to date"
    assert after["database_url"] == "set" and "/" in after["server"]
    code, out, _ = run(tmp_path, "upgrade", env={"GOVERNED_MEMORY_DATABASE_URL": pg_url})
    assert code == 0 and "up to date" in out  # idempotent
    assert not (tmp_path / "ws").exists()  # a database deployment needs no workspace folder


def test_status_names_the_server_and_never_the_url(tmp_path: Path, pg_server: Any) -> None:
    pg_server.sql(
        "DO $$ BEGIN CREATE ROLE gm_cli LOGIN PASSWORD 'sesame-open'; "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    url = pg_server.tcp_url("postgres", "gm_cli", "sesame-open")
    code, out, err = run(tmp_path, "status", env={"GOVERNED_MEMORY_DATABASE_URL": url})
    assert code == 0, err
    assert f"127.0.0.1:{pg_server.port}/postgres" in out
    assert "sesame-open" not in out + err and "gm_cli" not in out


def test_a_wrong_password_is_one_line_naming_the_host_and_the_fix(
    tmp_path: Path, pg_server: Any
) -> None:
    pg_server.sql(
        "DO $$ BEGIN CREATE ROLE gm_cli LOGIN PASSWORD 'sesame-open'; "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    url = pg_server.tcp_url("postgres", "gm_cli", "not-the-password")
    for command in ("status", "upgrade"):
        code, _, err = run(tmp_path, command, env={"GOVERNED_MEMORY_DATABASE_URL": url})
        assert code == 1
        line = err.strip()
        assert "\n" not in line and line.startswith("error:")
        assert f"127.0.0.1:{pg_server.port}/postgres" in line and "password" in line
        assert "not-the-password" not in line and "Traceback" not in err


def test_an_unreachable_server_is_one_line_naming_it(tmp_path: Path) -> None:
    code, _, err = run(
        tmp_path,
        "status",
        env={"GOVERNED_MEMORY_DATABASE_URL": "postgresql://gm@127.0.0.1:1/gm?connect_timeout=2"},
    )
    assert code == 1
    assert "\n" not in err.strip() and "127.0.0.1:1/gm" in err


@pytest.mark.parametrize("command", ["status", "upgrade"])
def test_without_a_database_both_say_so_and_how_to_configure_one(
    tmp_path: Path, command: str
) -> None:
    code, out, err = run(tmp_path, command)
    assert code == (0 if command == "status" else 1)
    said = out + err
    assert "no database is configured" in said
    assert "GOVERNED_MEMORY_DATABASE_URL" in said and "docs/settings.md" in said


def test_status_json_without_a_database_reports_the_files_backend(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, "status", "--json")
    report = json.loads(out)
    assert code == 0
    assert report["backend"] == "files" and report["database_url"] == "unset"
    assert report["server"] is None and report["release_schema_version"] == SCHEMA_VERSION


def test_files_backend_with_a_url_is_refused_naming_both(tmp_path: Path) -> None:
    policy = tmp_path / "files.toml"
    policy.write_text('[policy]\nid = "p"\nversion = "1"\n\n[storage]\nbackend = "files"\n')
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--policy", str(policy), "db", "status"],
        env={"GOVERNED_MEMORY_DATABASE_URL": "postgresql://gm@127.0.0.1:1/gm"},
    )
    assert result.exit_code == 1
    assert "backend = 'files'" in result.stderr
    assert "GOVERNED_MEMORY_DATABASE_URL" in result.stderr
