"""The PostgreSQL databases the contract params open, closed when each test ends.

A contract param is a plain factory with no teardown of its own (the suites are
written once for every backend), so each ``pg_*`` module opens its databases
here and the contract fixtures (conftest.py) close them all after the test: no
pool or connection outlives the test that made it.
"""

from __future__ import annotations

from typing import Any

from governed_memory._postgres import Database

_OPEN: list[Database] = []


def open_database(url: str, **options: Any) -> Database:
    """A :class:`Database` on ``url`` that :func:`close_opened` closes at the test's end."""
    db = Database(url, **options)
    _OPEN.append(db)
    return db


def close_opened() -> None:
    """Close every database opened since the last call (using one again reopens its pool)."""
    while _OPEN:
        _OPEN.pop().close()
