"""migrate_storage: files -> PostgreSQL -> files, resumable, verified item by item.

Workspaces are built by real Governance calls (migrate_helpers.py) and copied into a
fresh database of the test server, then back into a new folder: the bytes of every
record, key and audit entry come back the same, and every memory's text.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from migrate_helpers import CANARY, audit_key, build_workspace, database, files, sibling, tree

from governed_memory import StorageError
from governed_memory._audit import verify_storage
from governed_memory._migrate import MARKER, migrate_storage
from governed_memory._postgres import Database, upgrade_schema


@pytest.fixture(params=["plaintext", "encrypted"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db(pg_url: str) -> Any:
    db = Database(pg_url)
    upgrade_schema(db)
    yield db
    db.close()


def _texts(end: Any) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for agent in end.memory.agents():
        own = end.memory.open(agent, lambda: "")
        for store in [own, *own.subject_stores()]:
            out[f"{agent}/{store.source()}"] = store.read_memory()
            for a in store.list_archives():
                out[f"{agent}/{store.source(a)}"] = store.read_archive(a)
    return out


def test_round_trip_gives_the_same_bytes_and_texts(
    tmp_path: Path, db: Any, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", kind, monkeypatch)
    source = files(tmp_path / "ws", gov, kind)
    there = database(db, gov, kind)
    report = migrate_storage(source, there)
    assert report.copied["archives"] == 2 and report.copied["memories"] == 2
    assert report.verified["audit entries"] > 5
    back_gov = sibling(tmp_path / "back", gov)
    back = files(tmp_path / "back", back_gov, kind)
    migrate_storage(there, back)
    assert tree(tmp_path / "back", kind=kind) == tree(tmp_path / "ws", kind=kind)
    assert _texts(back) == _texts(source) == _texts(there)
    assert any(CANARY in (t or "") for t in _texts(back).values())


def test_the_migrated_audit_chain_verifies(
    tmp_path: Path, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", "encrypted", monkeypatch)
    there = database(db, gov, "encrypted")
    migrate_storage(files(tmp_path / "ws", gov, "encrypted"), there)
    assert there.audit is not None
    result = verify_storage(there.audit, audit_key())
    assert result.ok, result


def test_a_database_of_an_encrypted_workspace_holds_no_canary(
    tmp_path: Path, db: Any, pg_server: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", "encrypted", monkeypatch)
    migrate_storage(files(tmp_path / "ws", gov, "encrypted"), database(db, gov, "encrypted"))
    dump = subprocess.run(
        [str(pg_server.bin / "pg_dump"), "--data-only", pg_url],
        capture_output=True,
        check=True,
    ).stdout
    assert b"governed_memory.memory_archives" in dump
    assert CANARY.encode() not in dump and b"alice" not in dump


def test_a_tampered_row_is_named_by_the_verification(
    tmp_path: Path, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", "plaintext", monkeypatch)
    source, there = files(tmp_path / "ws", gov, "plaintext"), database(db, gov, "plaintext")
    migrate_storage(source, there)
    with db.transaction() as conn:
        conn.execute(
            "UPDATE governed_memory.record_lines SET line = line || ' '::bytea "
            "WHERE log = 'consent.jsonl' AND seq = 2"
        )
    with pytest.raises(StorageError, match=r"line 2 of record log consent\.jsonl differs"):
        migrate_storage(source, there)


def test_a_destination_holding_other_data_is_refused(
    tmp_path: Path, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", "plaintext", monkeypatch)
    there = database(db, gov, "plaintext")
    there.place.write_document("holds.json", b"{}")
    with pytest.raises(StorageError, match="already holds 1 record"):
        migrate_storage(files(tmp_path / "ws", gov, "plaintext"), there)
    assert there.memory.agents() == []


def test_a_pending_purge_plan_is_refused_before_anything_is_copied(
    tmp_path: Path, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", "plaintext", monkeypatch)
    source, there = files(tmp_path / "ws", gov, "plaintext"), database(db, gov, "plaintext")
    assert source.journal is not None
    source.journal.write_plan({"v": 1}, iter([["delete", "A"]]), lambda: {"total": 1})
    with pytest.raises(StorageError, match="a purge plan is pending; finish it first"):
        migrate_storage(source, there)
    assert there.memory.agents() == [] and there.record_names().documents == []


def test_a_partial_audit_copy_is_continued_without_duplicates(
    tmp_path: Path, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a kill between two audit entries leaves it: the first entries copied, the rest not."""
    gov = build_workspace(tmp_path / "ws", "plaintext", monkeypatch)
    source, there = files(tmp_path / "ws", gov, "plaintext"), database(db, gov, "plaintext")
    assert source.audit is not None and there.audit is not None
    everything = list(source.audit.entries())
    marker = {"format": "governed_memory.migration", "version": 1, "state": "copying"}
    there.place.write_document(MARKER, json.dumps({**marker, "source": source.describe}).encode())
    segment = source.audit.segment_ids()[0]
    for entry in everything[:3]:
        there.audit.import_entry(entry, segment)  # type: ignore[attr-defined]
    report = migrate_storage(source, there)
    assert report.copied["audit entries"] == len(everything) - 3
    assert [e.seq for e in there.audit.entries()] == [e.seq for e in everything]


def test_a_marker_of_another_source_is_refused(
    tmp_path: Path, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", "plaintext", monkeypatch)
    migrate_storage(files(tmp_path / "ws", gov, "plaintext"), database(db, gov, "plaintext"))
    other = build_workspace(tmp_path / "other", "plaintext", monkeypatch)
    with pytest.raises(StorageError, match="holds a migration from"):
        migrate_storage(
            files(tmp_path / "other", other, "plaintext"), database(db, other, "plaintext")
        )
