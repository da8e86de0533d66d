"""The PostgreSQL agent store (_postgres/_memory.py): ciphertext only, crypto-shredding, binding, restarts.

What the contract suites (tests/contract/, pg-plaintext and pg-encrypted) do not show:
what the database holds, what an attacker moving rows gets, and a server restart.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from memory_blocks import block, contents
from pg_server import SUPERUSER, PgServer

from governed_memory import (
    DatabaseError,
    DecryptionError,
    FixedClock,
    Keyring,
    LocalKeyProvider,
)
from governed_memory._format import render_header
from governed_memory._postgres import Database, PgMemoryBackend, PgStores, pg_store_factory

HEADER = render_header("A_conversation", "2026-11-30T10:00:00")
CANARY = "canary-IBAN-DE89370400440532013000"
SUBJECT = "subject-canary-7731@example.com"


def _stores(db: Database, tmp_path: Path, encrypted: bool) -> tuple[PgStores, Keyring | None]:
    ring = Keyring(tmp_path / "keyring", LocalKeyProvider(bytes(range(32)))) if encrypted else None
    keyring: Callable[[], Keyring] | None = None if ring is None else (lambda: ring)
    return pg_store_factory(db, keyring=keyring, clock=FixedClock()), ring


def _dump(pg_server: PgServer, database: str) -> bytes:
    """``pg_dump`` of the whole database over the test server's socket (plain SQL)."""
    done = subprocess.run(
        [
            str(pg_server.bin / "pg_dump"),
            "-h",
            str(pg_server.socket_dir),
            "-p",
            str(pg_server.port),
            "-U",
            SUPERUSER,
            database,
        ],
        check=True,
        capture_output=True,
    )
    return done.stdout


def _found(dump: bytes, secret: str) -> bool:
    """Whether ``secret`` is in the dump as text or as bytea (pg_dump writes bytea in hex)."""
    raw = secret.encode()
    return raw in dump or raw.hex().encode() in dump


def _write_canaries(stores: PgStores) -> None:
    agent = stores.open("A", lambda: HEADER)
    agent.append(block(f"shared words, {CANARY}", SUBJECT))
    agent.compact(block(f"summary naming {CANARY}", SUBJECT))
    own = agent.subject_store(SUBJECT)
    own.append(block(f"own words {CANARY}", SUBJECT))
    own.compact(None)
    own.append(block(f"after the archive {CANARY}", SUBJECT))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_a_dump_of_an_encrypted_database_holds_no_canary(
    pg_server: PgServer, pg_db: Database, tmp_path: Path, encrypted: bool
) -> None:
    """Plaintext is the control: the same scan finds the canaries there, so it can find them."""
    stores, _ = _stores(pg_db, tmp_path, encrypted)
    _write_canaries(stores)
    database = pg_db.where.rsplit("/", 1)[1]
    dump = _dump(pg_server, database)
    assert b"memory_blocks" in dump and b"memory_archives" in dump
    assert _found(dump, CANARY) is not encrypted
    assert _found(dump, SUBJECT) is not encrypted
    assert contents(stores.open("A", lambda: HEADER).subject_store(SUBJECT).read_memory()) == [
        f"after the archive {CANARY}"
    ]


def test_a_shredded_subjects_rows_no_longer_decrypt(pg_db: Database, tmp_path: Path) -> None:
    stores, ring = _stores(pg_db, tmp_path, encrypted=True)
    assert ring is not None
    agent = stores.open("A", lambda: HEADER)
    agent.append(block("kept"))
    agent.append(block(f"alice's {CANARY}", "alice"))
    alice = agent.subject_store("alice")
    alice.append(block(f"alice's own {CANARY}", "alice"))
    archive = alice.compact(block("alice's summary", "alice"))
    assert archive is not None
    ring.shred_subject("alice")
    with pg_db.transaction() as conn:
        rows = conn.execute("SELECT count(*) FROM governed_memory.memory_blocks").fetchone()
    assert rows is not None and rows[0] == 5  # the rows are still there: only the key went
    fresh, _ = _stores(pg_db, tmp_path, encrypted=True)  # another host: nothing cached
    again = fresh.open("A", lambda: HEADER)
    assert contents(again.read_memory()) == ["kept"]
    assert again.subject_store("alice").read_memory() == HEADER  # her summary is gone
    assert contents(again.subject_store("alice").read_archive(archive)) == []
    again.append(block("still writable"))
    assert contents(again.read_memory()) == ["kept", "still writable"]


def _swap(db: Database, sql: str) -> None:
    with db.transaction() as conn:
        conn.execute(sql)


def test_rows_moved_to_another_subject_or_position_do_not_decrypt(
    pg_db: Database, tmp_path: Path
) -> None:
    stores, _ = _stores(pg_db, tmp_path, encrypted=True)
    agent = stores.open("A", lambda: HEADER)
    alice, bob = agent.subject_store("alice"), agent.subject_store("bob")
    alice.append(block("alice one", "alice"))
    alice.append(block("alice two", "alice"))
    bob.append(block("bob one", "bob"))
    # Bob's block replaced by Alice's first one, same position: another memory's frame.
    _swap(
        pg_db,
        f"""UPDATE governed_memory.memory_blocks b SET data = a.data
            FROM governed_memory.memory_blocks a, governed_memory.memories ma,
                 governed_memory.memories mb
            WHERE ma.partition = '{alice.partition}' AND a.memory_id = ma.id AND a.position = 1
              AND mb.partition = '{bob.partition}' AND b.memory_id = mb.id AND b.position = 1""",
    )
    with pytest.raises(DecryptionError):
        bob.read_memory()
    # Alice's two blocks swapped in place: each frame is bound to its position.
    _swap(
        pg_db,
        f"""UPDATE governed_memory.memory_blocks b SET data = o.data
            FROM governed_memory.memory_blocks o, governed_memory.memories m
            WHERE m.partition = '{alice.partition}' AND b.memory_id = m.id
              AND o.memory_id = m.id AND b.position IN (1, 2) AND o.position = 3 - b.position""",
    )
    with pytest.raises(DecryptionError):
        alice.read_memory()


def test_nothing_is_written_to_the_local_disk(pg_db: Database, tmp_path: Path) -> None:
    stores = pg_store_factory(pg_db, keyring=None, clock=FixedClock())
    workspace = tmp_path / "ws"
    store = stores(workspace / "agents" / "A" / "MEMORY.md", lambda: HEADER)
    assert store.agent == "A"
    store.append(block("one"))
    store.subject_store("alice").append(block("hers", "alice"))
    store.compact(None)
    assert not workspace.exists()
    backend = PgMemoryBackend(pg_db, stores)
    assert backend.agents() == ["A"]
    assert store.source() == "MEMORY.md"
    assert store.source(store.list_archives()[0]).startswith("archive/history_")


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_a_server_restart_between_appends_loses_nothing(
    pg_server: PgServer, pg_url: str, tmp_path: Path, encrypted: bool
) -> None:
    """The pool replaces a connection the restart closed (its check, before any statement)."""
    db = Database(pg_url, connect_timeout=2)
    try:
        from governed_memory._postgres import upgrade_schema

        upgrade_schema(db)
        stores, _ = _stores(db, tmp_path, encrypted=encrypted)
        store = stores.open("A", lambda: HEADER)
        store.append(block("before the restart"))
        pg_server.restart()
        store.append(block("after the restart"))  # the pool's dead connection is replaced
        pg_server.stop()
        try:
            with pytest.raises(DatabaseError) as refused:
                store.append(block("while it is down"))
        finally:
            pg_server.start()
        message = str(refused.value)
        assert refused.value.retryable and "\n" not in message
        assert pg_server.socket_dir.name in message and "retry" in message
        store.append(block("once it is back"))
        assert contents(store.read_memory()) == [
            "before the restart",
            "after the restart",
            "once it is back",
        ]
    finally:
        db.close()


def test_a_database_without_the_schema_is_a_one_line_error_naming_the_fix(
    pg_url: str, tmp_path: Path
) -> None:
    db = Database(pg_url)
    try:
        stores, _ = _stores(db, tmp_path, encrypted=False)
        with pytest.raises(DatabaseError, match="governed-memory db upgrade") as raised:
            stores.open("A", lambda: HEADER).append(block("one"))
        assert "\n" not in str(raised.value)
        with pytest.raises(DatabaseError, match="governed-memory db upgrade"):
            PgMemoryBackend(db, stores).agents()
    finally:
        db.close()


def test_a_memory_of_the_other_mode_is_refused_not_overwritten(
    pg_db: Database, tmp_path: Path
) -> None:
    from governed_memory import ConfigurationError

    plain, _ = _stores(pg_db, tmp_path, encrypted=False)
    sealed, _ = _stores(pg_db, tmp_path, encrypted=True)
    plain.open("P", lambda: HEADER).append(block("plain"))
    sealed.open("E", lambda: HEADER).append(block("sealed"))
    with pytest.raises(ConfigurationError, match="enables encryption"):
        sealed.open("P", lambda: HEADER).append(block("x"))
    with pytest.raises(ConfigurationError, match="does not enable encryption"):
        plain.open("E", lambda: HEADER).read_memory()
    assert contents(plain.open("P", lambda: HEADER).read_memory()) == ["plain"]
    assert contents(sealed.open("E", lambda: HEADER).read_memory()) == ["sealed"]


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_two_hosts_conversations_share_one_memory_and_write_no_file(
    pg_db: Database, tmp_path: Path, encrypted: bool
) -> None:
    """Two workspaces (two hosts' local folders), one database: one agent's memory."""
    from governed_memory import Conversation, memory_md_path

    stores, _ = _stores(pg_db, tmp_path, encrypted)
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    first = Conversation(
        name="Shared",
        memory_md_path=memory_md_path("Shared", host_a),
        store_factory=stores,
        governance=None,
    )
    first.add("user", "written on host a")
    second = Conversation(
        name="Shared",
        memory_md_path=memory_md_path("Shared", host_b),
        store_factory=stores,
        governance=None,
    )
    assert "written on host a" in second.return_history_as_string()
    second.add("user", "written on host b")
    text = stores.open("Shared", lambda: HEADER).read_memory()
    assert contents(text) == ["written on host a", "written on host b"]
    assert not host_a.exists() and not host_b.exists()


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_a_memory_rewritten_to_nothing_takes_the_next_append(
    pg_db: Database, tmp_path: Path, encrypted: bool
) -> None:
    stores, _ = _stores(pg_db, tmp_path, encrypted)
    store = stores.open("A", lambda: HEADER)
    store.append(block("erased"))
    with store.lock():
        store.rewrite_memory("")
    assert store.read_memory() == ""
    store.append(block("next"))
    assert store.read_memory() == block("next")  # no header added back over the rewrite


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_a_lock_held_through_one_set_of_stores_is_the_lock_of_every_set(
    pg_db: Database, tmp_path: Path, encrypted: bool
) -> None:
    """An erasure locks through the memory backend's stores, the gate writes through its own.

    The lock sessions are the database's: a write through the other set runs on
    the thread's lock session. (With one per set it took a pooled connection and
    waited for ever on the lock its own thread held.)
    """
    one, _ = _stores(pg_db, tmp_path, encrypted)
    two, _ = _stores(pg_db, tmp_path / "other", encrypted)
    locker, writer = one.open("A", lambda: HEADER), two.open("A", lambda: HEADER)
    writer.append(block("first"))
    writer.append(block("second"))  # (an encrypted writer now knows its end)
    with locker.lock():
        writer.append(block("under the other set's lock"))
    assert contents(writer.read_memory()) == ["first", "second", "under the other set's lock"]
