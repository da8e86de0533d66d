"""The connection pool under encrypted, audited writers (_postgres/_db.py, _keyring.py, _memory.py).

An encrypted append reads (and on first use creates) keyring entries while its
agent's transaction is open. Those calls must never wait on the pool for a
second connection while the thread holds one: with as many threads as pooled
connections, every holder would wait for its second one until the pool's timeout.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg_pool
import pytest
from memory_blocks import block

from governed_memory import FixedClock, generate_audit_key, parse_memory
from governed_memory._audit import verify_storage
from governed_memory._crypto import Keyring, LocalKeyProvider
from governed_memory._format import render_header
from governed_memory._postgres import (
    Database,
    PgAuditStorage,
    PgKeyStorage,
    PgStores,
    pg_store_factory,
    upgrade_schema,
)

HEADER = render_header("A_conversation", "2026-11-30T10:00:00")


def _deployment(db: Database) -> tuple[PgStores, PgAuditStorage, Keyring]:
    """What a host opens on ``db``: encrypted stores on the database's keyring, and the audit log."""
    ring = Keyring(None, LocalKeyProvider(bytes(range(32))), storage=PgKeyStorage(db))
    stores = pg_store_factory(db, keyring=lambda: ring, clock=FixedClock())
    return stores, PgAuditStorage(db, generate_audit_key()), ring


@pytest.fixture
def small_pool(pg_url: str) -> Iterator[Any]:
    """A factory of databases on ``pg_url`` with a pool of ``max_size`` (a 3 s pool timeout)."""
    upgrade_schema(Database(pg_url))
    made: list[Database] = []

    def make(max_size: int) -> Database:
        db = Database(pg_url, min_size=1, max_size=max_size, connect_timeout=3)
        made.append(db)
        return db

    try:
        yield make
    finally:
        for db in made:
            db.close()


@pytest.fixture
def nesting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The most pooled connections one thread held at once (``max``), counted at every checkout."""
    seen = {"max": 0}
    local = threading.local()
    getconn, putconn = psycopg_pool.ConnectionPool.getconn, psycopg_pool.ConnectionPool.putconn

    def counted_get(self: Any, *args: Any, **kwargs: Any) -> Any:
        local.depth = getattr(local, "depth", 0) + 1
        seen["max"] = max(seen["max"], local.depth)
        try:
            return getconn(self, *args, **kwargs)
        except BaseException:
            local.depth -= 1
            raise

    def counted_put(self: Any, conn: Any) -> None:
        local.depth -= 1
        putconn(self, conn)

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "getconn", counted_get)
    monkeypatch.setattr(psycopg_pool.ConnectionPool, "putconn", counted_put)
    return seen


def test_sixteen_threads_on_a_pool_of_four_land_every_encrypted_audited_message(
    small_pool: Any, nesting: dict[str, int]
) -> None:
    db = small_pool(4)
    stores, audit, _ring = _deployment(db)
    threads, messages = 16, 8
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        # Half the writers share one agent (its advisory lock serialises them), every
        # writer its own subject: each first write creates a key inside the transaction.
        store = stores.open(f"agent-{n % 8}" if n % 2 else "shared", lambda: HEADER)
        subject = f"subject-{n}"
        try:
            barrier.wait()
            for i in range(messages):
                store.append(block(f"writer {n} message {i}", subject))
                audit.append("memory.persist", {"agent": store.agent, "n": n, "i": i})
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert errors == []
    stored: set[str] = set()
    for agent in ["shared", *(f"agent-{k}" for k in range(8))]:
        text = stores.open(agent, lambda: HEADER).read_memory() or ""
        stored |= {r.content for r in parse_memory(text).records}
    wanted = {f"writer {n} message {i}" for n in range(threads) for i in range(messages)}
    assert wanted <= stored
    assert len([e for e in audit.entries() if e.event == "memory.persist"]) == threads * messages
    assert verify_storage(audit, audit.key).ok
    assert nesting["max"] == 1  # no thread ever held two pooled connections


def test_one_writer_works_on_a_pool_of_one_connection(
    small_pool: Any, nesting: dict[str, int]
) -> None:
    """Every encrypted path: creating the memory and keys, appending, subjects, compaction, shredding."""
    db = small_pool(1)
    stores, audit, ring = _deployment(db)
    agent = stores.open("A", lambda: HEADER)
    agent.ensure()
    agent.append(block("first words", "S-1"))
    audit.append("memory.persist", {"agent": "A"})
    own = agent.subject_store("S-1")
    own.append(block("own words", "S-1"))
    assert own.compact(block("summary", "S-1")) is not None
    ring.shred_subject("S-1")  # the next append starts the subject's key afresh, mid-transaction
    own.append(block("after the shred", "S-1"))
    agent.append(block("more words", "S-2"))
    with agent.lock():
        agent.rewrite_memory(HEADER + block("rewritten", "S-2"))
    assert [r.content for r in parse_memory(agent.read_memory() or "").records] == ["rewritten"]
    assert "after the shred" in (own.read_memory() or "")
    assert verify_storage(audit, audit.key).ok
    assert nesting["max"] == 1


def test_readers_and_writers_of_one_agent_on_a_small_pool_never_starve(
    small_pool: Any,
) -> None:
    """Readers decrypt outside a transaction (holding the keyring's mutex) while writers queue on one agent.

    Writers waiting for the agent's lock hold every pooled connection; the lock's
    holder waits for the keyring's mutex; a reader holding that mutex must not
    then wait on the pool.
    """
    db = small_pool(2)
    stores, _audit, _ring = _deployment(db)
    stores.open("one", lambda: HEADER).append(block("first", "S-0"))
    threads, messages = 8, 6
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        store = stores.open("one", lambda: HEADER)
        try:
            barrier.wait()
            for i in range(messages):
                store.append(block(f"writer {n} message {i}", f"S-{n}-{i}"))
                store.read_memory()
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(120)
    assert errors == []
    text = stores.open("one", lambda: HEADER).read_memory() or ""
    stored = {r.content for r in parse_memory(text).records}
    assert {f"writer {n} message {i}" for n in range(threads) for i in range(messages)} <= stored
