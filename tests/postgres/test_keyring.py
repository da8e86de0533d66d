"""A Keyring on PgKeyStorage: two hosts on one database share one keyring, holding only wrapped keys."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
from pathlib import Path

import pytest
from pg_server import PgServer, bindir

from governed_memory import DatabaseError, DecryptionError, IntegrityError, memory_md_path
from governed_memory._crypto import AGENT, SUBJECT, KeyChain, Keyring, LocalKeyProvider
from governed_memory._crypto._frames import FrameKey
from governed_memory._errors import StorageError
from governed_memory._keys._rotation import rotate_master_key
from governed_memory._postgres import SCHEMA, Database, PgKeyStorage
from governed_memory._stores._encrypted import EncryptedAgentStore

MASTER = bytes(range(32))
HEADER = "# Memory\n\n"


def _host(db: Database, master: bytes = MASTER) -> Keyring:
    """The keyring as one host opens it: its own storage object on the shared database."""
    return Keyring(None, LocalKeyProvider(master), storage=PgKeyStorage(db))


def test_two_hosts_agree_on_every_key(pg_db: Database) -> None:
    first, second = _host(pg_db), _host(pg_db)
    agent = first.current(AGENT, "agent-1")
    subject = second.current(SUBJECT, "subject-1")
    assert second.current(AGENT, "agent-1") == agent
    assert first.current(SUBJECT, "subject-1") == subject
    assert first.workspace_id == second.workspace_id
    assert len(agent.key) == 32 and agent.key != subject.key


def test_hosts_creating_one_key_at_once_get_the_same_key(pg_db: Database) -> None:
    hosts = [_host(pg_db) for _ in range(4)]
    hosts[0].current(AGENT, "warm-up")  # one keyring.json, so all race on the entry only
    got: list[bytes] = []
    barrier = threading.Barrier(len(hosts))

    def create(keyring: Keyring) -> None:
        barrier.wait()
        got.append(keyring.current(SUBJECT, "contended").key)

    threads = [threading.Thread(target=create, args=(k,)) for k in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(got) == len(hosts) and len(set(got)) == 1


def test_a_shred_on_one_host_is_seen_by_the_other(pg_db: Database) -> None:
    writer, reader = _host(pg_db), _host(pg_db)
    key = writer.current(SUBJECT, "subject-1")
    assert reader.key(key.ref, key.gen) == key.key
    epoch = reader.epoch()
    assert writer.shred_subject("subject-1") == [1]
    assert reader.epoch() > epoch  # the change counter tells writers to drop remembered keys
    assert reader.key(key.ref, key.gen) is None
    fresh = reader.current(SUBJECT, "subject-1")
    assert fresh.gen == 2 and fresh.key != key.key
    assert writer.current(SUBJECT, "subject-1") == fresh


def test_a_snapshot_sees_a_shred_made_before_it_began(pg_db: Database) -> None:
    writer, reader = _host(pg_db), _host(pg_db)
    agent = writer.current(AGENT, "agent-1")
    assert reader.snapshot().frame_cipher(agent.ref, FrameKey(agent.gen)) is not None
    writer.shred_agent("agent-1")
    assert reader.snapshot().frame_cipher(agent.ref, FrameKey(agent.gen)) is None


def test_an_encrypted_store_on_two_hosts_reads_the_other_hosts_frames(
    pg_db: Database, tmp_path: Path
) -> None:
    """The memory is still in files here; the keys it is sealed under come from the database."""
    path = memory_md_path("A", tmp_path / "ws")
    one = EncryptedAgentStore(path, lambda: HEADER, keyring=_host(pg_db))
    one.append("### user\nhello from host one\n\n")
    two = EncryptedAgentStore(path, lambda: HEADER, keyring=_host(pg_db))
    assert "hello from host one" in (two.read_memory() or "")
    _host(pg_db).shred_agent("A")
    assert "hello from host one" not in (
        EncryptedAgentStore(path, lambda: HEADER, keyring=_host(pg_db)).read_memory() or ""
    )


def test_an_entry_edited_in_the_database_is_refused(pg_db: Database) -> None:
    keyring = _host(pg_db)
    key = keyring.current(SUBJECT, "subject-1")
    with pg_db.transaction() as conn:
        row = conn.execute(f"SELECT data FROM {SCHEMA}.keyring_entries WHERE ref = %s", (key.ref,))
        doc = json.loads(bytes(row.fetchone()[0]))  # type: ignore[index]
        doc["keys"] = {}  # "shredded" by hand, to empty the subject's records
        doc["shredded_through"] = 1
        conn.execute(
            f"UPDATE {SCHEMA}.keyring_entries SET data = %s WHERE ref = %s",
            (json.dumps(doc).encode(), key.ref),
        )
    with pytest.raises(IntegrityError):
        _host(pg_db).key(key.ref, key.gen)


def test_the_master_key_is_rotated_in_the_database(pg_db: Database) -> None:
    old = _host(pg_db)
    agent = old.current(AGENT, "agent-1")
    new_master = bytes(range(32, 64))
    chain = KeyChain(LocalKeyProvider(new_master), LocalKeyProvider(MASTER))
    report = rotate_master_key(Keyring(None, chain, storage=PgKeyStorage(pg_db)))
    assert report.rewrapped == 2  # the index key and the agent's one generation
    assert _host(pg_db, new_master).key(agent.ref, agent.gen) == agent.key
    with pytest.raises(DecryptionError):
        _host(pg_db).key(agent.ref, agent.gen)  # the old master key alone opens nothing now


def test_a_pg_dump_holds_no_key_material(
    pg_db: Database, pg_server: PgServer, tmp_path: Path
) -> None:
    keyring = _host(pg_db)
    keys = [
        keyring.current(AGENT, "agent-1").key,
        keyring.current(SUBJECT, "subject-1").key,
        keyring._index(),
        MASTER,
    ]
    keyring.shred_subject("subject-2")
    dbname = pg_db.where.rsplit("/", 1)[1]
    dump = subprocess.run(
        [str(bindir() / "pg_dump"), "--data-only", pg_server.url(dbname)],
        check=True,
        capture_output=True,
    ).stdout
    assert f"COPY {SCHEMA}.keyring_entries".encode() in dump  # the keyring is in the dump
    # bytea columns are dumped as \\x<hex>: search their bytes as well as the text
    stored = b"".join(bytes.fromhex(h.decode()) for h in re.findall(rb"\\\\x([0-9a-f]+)", dump))
    assert b"wrapped_by" in stored  # the entries' JSON was decoded
    forms = [
        form
        for key in keys
        for form in (key, key.hex().encode(), base64.b64encode(key), base64.b64encode(key)[:-2])
    ]
    for haystack in (dump, stored):
        assert all(form not in haystack for form in forms)


def test_a_keyring_without_folder_or_storage_is_refused() -> None:
    with pytest.raises(ValueError, match="storage="):
        Keyring(None, LocalKeyProvider(MASTER))


def test_a_database_keyring_has_no_folder(pg_db: Database) -> None:
    keyring = _host(pg_db)
    with pytest.raises(StorageError, match="has no folder"):
        _ = keyring.folder
    assert "PgKeyStorage" in repr(keyring)


def test_a_database_without_the_tables_names_the_upgrade(pg_url: str) -> None:
    db = Database(pg_url)
    try:
        with pytest.raises(DatabaseError, match="governed-memory db upgrade") as caught:
            PgKeyStorage(db).read_meta()
        assert "\n" not in str(caught.value)
    finally:
        db.close()
