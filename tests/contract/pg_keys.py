"""The PostgreSQL implementations of the keyring, purge journal and leadership contract suites.

Each opener works on a fresh database of this test process's throw-away server
(tests/pg_server.py), schema upgraded, closed when the test ends (pg_open.py); the leadership candidates share the
server's ``postgres`` database (advisory locks need no table) and a lock named
after ``tmp_path``. A leadership factory is pickled with the server's URL, so a
spawned process reaches the same server instead of starting its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pg_open import open_database

from governed_memory._postgres import (
    Database,
    PgKeyStorage,
    PgLeadership,
    PgPurgeJournal,
)


def _fresh_database() -> Database:
    from pg_server import server

    srv = server()
    return open_database(srv.url(srv.schema_database()), min_size=1, max_size=4)


def _pg_key_storage(tmp_path: Path) -> Callable[[], PgKeyStorage]:
    db = _fresh_database()
    return lambda: PgKeyStorage(db)


def _pg_journal(tmp_path: Path) -> Callable[[], PgPurgeJournal]:
    db = _fresh_database()
    return lambda: PgPurgeJournal(db, "purge")


class _PgLeaderships:
    """A candidate per call for the lock ``tmp_path`` names, on the server of the process that made it."""

    def __init__(self) -> None:
        self._url: str | None = None

    def _server_url(self) -> str:
        if self._url is None:
            from pg_server import server

            self._url = server().url("postgres")
        return self._url

    def __call__(self, tmp_path: Path) -> PgLeadership:
        return PgLeadership(Database(self._server_url()), f"contract {tmp_path}")

    def __getstate__(self) -> dict[str, Any]:
        return {"_url": self._server_url()}  # a spawned child uses this process's server


KEY_STORAGES = [pytest.param(_pg_key_storage, id="postgres")]
JOURNALS = [pytest.param(_pg_journal, id="postgres")]
LEADERSHIPS = [pytest.param(_PgLeaderships(), id="postgres-leader")]
