"""The PostgreSQL audit storage as a parameter of the audit storage contract (test_audit_storage.py).

A factory gets the test's ``tmp_path`` only, so it makes a fresh database of this
process's test server per ``tmp_path`` (tests/pg_server.py) and opens every
storage of that test on it: called again, it opens the same log, as another
host would. The databases' pools are closed at exit, before the server stops.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from governed_memory._audit import AuditKey
from governed_memory._postgres import Database, PgAuditStorage

KEY = AuditKey(bytes(range(32)))  # the key of test_audit_storage.py

_OPEN: dict[Path, Database] = {}


def _close_all() -> None:
    for db in _OPEN.values():
        db.close()


def _database(tmp_path: Path) -> Database:
    if tmp_path not in _OPEN:
        from pg_server import server

        pg = server()
        if not _OPEN:
            atexit.register(_close_all)  # after the server's own: runs before it stops
        db = Database(pg.url(pg.schema_database()), max_size=4)
        _OPEN[tmp_path] = db
    return _OPEN[tmp_path]


def _pg_log(tmp_path: Path) -> Callable[[], Any]:
    db = _database(tmp_path)
    return lambda: PgAuditStorage(db, KEY, period="day")


AUDIT_STORAGE: list[Any] = [pytest.param(_pg_log, id="postgres")]
