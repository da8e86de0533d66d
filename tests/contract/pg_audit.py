"""The PostgreSQL audit storage as a parameter of the audit storage contract (test_audit_storage.py).

A factory gets the test's ``tmp_path`` only, so it makes a fresh database of this
process's test server per ``tmp_path`` (tests/pg_server.py) and opens every
storage of that test on it: called again, it opens the same log, as another
host would. Its pool is closed when the test ends (pg_open.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pg_open import open_database

from governed_memory._audit import AuditKey
from governed_memory._postgres import PgAuditStorage

KEY = AuditKey(bytes(range(32)))  # the key of test_audit_storage.py


def _pg_log(tmp_path: Path) -> Callable[[], Any]:
    from pg_server import server

    pg = server()
    db = open_database(pg.url(pg.schema_database()), max_size=4)
    return lambda: PgAuditStorage(db, KEY, period="day")


AUDIT_STORAGE: list[Any] = [pytest.param(_pg_log, id="postgres")]
