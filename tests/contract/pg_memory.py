"""The PostgreSQL agent stores and memory backend in the contract suites (plaintext and encrypted).

One database per test process, its schema upgraded once and its memory tables emptied
for each test: the suites see an empty backend, as on a fresh workspace folder, without
a ``CREATE DATABASE`` per test. Its pool is closed when each test ends (pg_open.py)
and reopens on the next test's first query.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from backends import HEADER, Backend
from pg_open import open_database

from governed_memory import FixedClock

_DATABASE: list[str] = []  # the URL of this process's test database


def fresh_database() -> Any:
    """This process's test database (tests/pg_server.py), its memory tables emptied."""
    from pg_server import server

    if not _DATABASE:
        pg = server()
        _DATABASE.append(pg.url(pg.schema_database()))
    db = open_database(_DATABASE[0])
    with db.transaction("emptying the memory tables") as conn:
        conn.execute(
            "TRUNCATE governed_memory.memories, governed_memory.memory_blocks, "
            "governed_memory.memory_archives"
        )
    return db


def _stores(workspace: Path, clock: FixedClock, encrypted: bool) -> Any:
    from governed_memory import Keyring, LocalKeyProvider
    from governed_memory._postgres import pg_store_factory

    keyring = None
    if encrypted:
        ring = Keyring(workspace.parent / "keyring", LocalKeyProvider(bytes(range(32))))
        keyring = lambda: ring  # noqa: E731
    return pg_store_factory(fresh_database(), keyring=keyring, clock=clock)


def _pg(encrypted: bool) -> Callable[[Path, FixedClock, Callable[[], str]], Backend]:
    def make(workspace: Path, clock: FixedClock, header: Callable[[], str]) -> Backend:
        stores = _stores(workspace, clock, encrypted)
        return Backend(lambda agent: stores.open(agent, header), clock, persistent=True)

    return make


def _pg_backend(workspace: Path, encrypted: bool) -> Any:
    from governed_memory._postgres import PgMemoryBackend

    clock = FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0))
    stores = _stores(workspace, clock, encrypted)
    return PgMemoryBackend(stores.db, lambda path, header: stores(path, lambda: HEADER))


AGENT_STORE: list[Any] = [
    pytest.param(_pg(encrypted=False), id="pg-plaintext"),
    pytest.param(_pg(encrypted=True), id="pg-encrypted"),
]
MEMORY_BACKEND: list[Any] = [
    pytest.param(lambda ws: _pg_backend(ws, encrypted=False), id="pg-plaintext"),
    pytest.param(lambda ws: _pg_backend(ws, encrypted=True), id="pg-encrypted"),
]
