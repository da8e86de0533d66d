"""A GovernedSession on a PostgreSQL deployment keeps its items in the database, never in files."""

from __future__ import annotations

from pathlib import Path

import pytest
from oai_helpers import run

from governed_memory import ConfigurationError, Governance
from governed_memory._policy import Settings
from governed_memory.integrations.openai_agents import GovernedSession
from governed_memory.integrations.openai_agents._memory import SessionMemory


@pytest.fixture
def database(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GOVERNED_MEMORY_DATABASE_URL set (schema upgraded); the workspace folder it must not make.

    A session built without ``governance=`` runs under the process's shared Governance,
    whose pool tests/conftest.py closes when the test ends.
    """
    from governed_memory._postgres import Database, upgrade_schema

    db = Database(pg_url)
    try:
        upgrade_schema(db)
    finally:
        db.close()
    monkeypatch.setenv("GOVERNED_MEMORY_DATABASE_URL", pg_url)
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "ws"))
    return tmp_path / "ws"


def test_the_default_session_stores_its_items_in_the_database(database: Path) -> None:
    # run(), not asyncio.run(): that would drop the thread's default loop unclosed (oai_helpers).
    session = GovernedSession("conv-pg")
    run(session.add_items([{"role": "user", "content": "standing order to the 28th"}]))
    session.close()
    again = GovernedSession("conv-pg")
    items = run(again.get_items())
    again.close()
    assert [i.get("content") for i in items] == ["standing order to the 28th"]
    gov = Governance(settings=Settings())
    try:
        assert gov.memory_backend.agents() == ["conv-pg"]  # a row of the database
    finally:
        gov.storage.close()
    assert not database.exists()


def test_an_ungoverned_session_memory_refuses_to_write_local_files(database: Path) -> None:
    memory = SessionMemory("conv-pg", subject_id=None, governance=None)
    with pytest.raises(ConfigurationError, match="stores in postgres") as caught:
        memory.add([{"role": "user", "content": "kept nowhere"}])
    assert "\n" not in str(caught.value)
    assert not database.exists()
