"""``governed-memory migrate-storage``: into the database and back, from the settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from migrate_helpers import AUDIT_KEY_HEX, build_workspace, tree

from governed_memory._cli import main
from governed_memory._postgres import Database, upgrade_schema


def _run(*args: str, url: str) -> dict[str, object]:
    env = {"GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY_HEX}
    # --database-url until Settings knows GOVERNED_MEMORY_DATABASE_URL (issue 14, point 2).
    result = CliRunner().invoke(main, [*args, "--database-url", url], env=env)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_migrate_storage_to_postgres_and_back_to_files(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_workspace(tmp_path / "ws", "plaintext", monkeypatch)
    db = Database(pg_url)
    upgrade_schema(db)
    db.close()
    there = _run(
        "--workspace", str(tmp_path / "ws"), "migrate-storage", "--to", "postgres", "--yes",
        "--json", url=pg_url,
    )  # fmt: skip
    assert there["verified"] == {
        "record lines": 3,
        "documents": 3,
        "keys": 0,
        "memories": 2,
        "archives": 2,
        "audit entries": there["copied"]["audit entries"],  # type: ignore[index]
    }
    (tmp_path / "back").mkdir()  # an empty workspace folder to migrate into
    _run(
        "--workspace", str(tmp_path / "back"), "migrate-storage", "--to", "files", "--yes",
        "--json", url=pg_url,
    )  # fmt: skip
    assert tree(tmp_path / "back", kind="plaintext") == tree(tmp_path / "ws", kind="plaintext")


def test_migrate_storage_without_a_database_is_one_line_naming_the_setting(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(
        main, ["--workspace", str(tmp_path), "migrate-storage", "--to", "postgres", "--yes"]
    )
    assert result.exit_code != 0
    assert "GOVERNED_MEMORY_DATABASE_URL" in result.output
    assert "Traceback" not in result.output
