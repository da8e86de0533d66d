"""Fixtures of the PostgreSQL backend's tests: a fresh database with the schema applied."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from governed_memory._postgres import Database, upgrade_schema


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[Database]:
    """A :class:`Database` on a fresh database of the test server, schema upgraded."""
    db = Database(pg_url)
    upgrade_schema(db)
    try:
        yield db
    finally:
        db.close()
