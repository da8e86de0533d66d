"""Guarded writes (_postgres/_guarded.py): one round trip while this process wrote last.

An encrypted append and an audit append sent whole (BEGIN, lock, guarded write,
COMMIT) by a writer that remembers the end it wrote. What must hold: the guess
is used when it is right, every guess that is wrong (another writer, a shred,
a tampered head) writes nothing and falls back to the locked path, and a
connection lost after the send neither loses nor repeats the write.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from memory_blocks import block, contents
from sends import Spy, lose_the_next_send

from governed_memory import DecryptionError, FixedClock, Keyring, LocalKeyProvider
from governed_memory._audit import AuditEvent, AuditKey, verify_storage
from governed_memory._format import render_header
from governed_memory._postgres import (
    Database,
    PgAuditStorage,
    PgKeyStorage,
    PgStores,
    pg_store_factory,
)
from governed_memory._postgres._guarded import Guess

HEADER = render_header("A_conversation", "2026-11-30T10:00:00")
KEY = AuditKey(bytes(range(32)))
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


def _encrypted(db: Database, tmp_path: Path) -> tuple[PgStores, Keyring]:
    """Stores on ``db`` with the deployment's keyring in it too (a host of its own: no cache)."""
    ring = Keyring(None, LocalKeyProvider(bytes(range(32))), storage=PgKeyStorage(db))
    return pg_store_factory(db, keyring=lambda: ring, clock=FixedClock()), ring


def _seqs(db: Database) -> list[int]:
    with db.transaction() as conn:
        rows = conn.execute("SELECT seq FROM governed_memory.audit_entries ORDER BY seq").fetchall()
    return [int(row[0]) for row in rows]


# -- the guess itself ----------------------------------------------------------------------------


def test_a_guess_backs_off_twice_as_long_after_each_miss_and_resets_on_a_hit() -> None:
    guess: Guess[str] = Guess()
    assert guess.get() is None
    guess.wrote("end-1")
    assert guess.get() == "end-1"
    guess.forget(missed=True)  # 1 miss: the next append skips the guess
    guess.wrote("end-2")
    assert [guess.get() for _ in range(2)] == [None, "end-2"]
    guess.forget(missed=True)  # 2 misses: the next 3 skip it
    guess.wrote("end-3")
    assert [guess.get() for _ in range(4)] == [None, None, None, "end-3"]
    guess.hit("end-4")
    guess.forget(missed=True)  # the hit reset the count: 1 miss again
    guess.wrote("end-5")
    assert [guess.get() for _ in range(2)] == [None, "end-5"]


def test_a_guess_is_contended_until_a_hit_and_a_locked_append_skips_once() -> None:
    guess: Guess[str] = Guess()
    guess.wrote("end-1")
    assert not guess.contended
    guess.forget(missed=True)
    guess.forget(missed=True)  # 2 misses: 3 appends skip the guess
    assert guess.contended
    guess.skipped()  # the missing append read the end under the lock: one of the 3
    guess.wrote("end-2")
    assert [guess.get() for _ in range(3)] == [None, None, "end-2"]
    guess.skipped()  # nothing left to skip: no effect
    assert guess.get() == "end-2" and guess.contended
    guess.hit("end-3")
    assert not guess.contended


def test_a_forked_child_does_not_use_its_parents_guess() -> None:
    guess: Guess[str] = Guess()
    guess.wrote("parent's end")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it sees, and leave at once
        os.write(write, b"none" if guess.get() is None else b"guess")
        os._exit(0)
    os.close(write)
    seen = os.read(read, 16)
    os.waitpid(pid, 0)
    os.close(read)
    assert seen == b"none"
    assert guess.get() == "parent's end"


# -- encrypted appends ---------------------------------------------------------------------------


def test_an_encrypted_append_after_its_own_is_one_round_trip(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores, _ = _encrypted(pg_db, tmp_path)
    store = stores.open("A", lambda: HEADER)
    store.append(block("first"))  # reads the end under the lock, and remembers it
    spy = Spy(pg_db, monkeypatch)
    store.append(block("second"))
    assert spy.sent == [[1]] and spy.locked == 0
    # alice's keys are read, the first time, under the lock; then remembered
    store.append(block("third", "alice") + block("fourth"))
    assert spy.sent == [[1]] and spy.locked == 1
    store.append(block("fifth", "alice") + block("sixth"))  # two frames, two keys
    assert spy.sent == [[1], [2]] and spy.locked == 1
    assert contents(store.read_memory()) == [
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
    ]


def test_two_writers_taking_turns_on_one_memory_miss_their_guesses_and_lose_nothing(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's append in between: the guard writes nothing, the locked path appends."""
    one, _ = _encrypted(pg_db, tmp_path)
    two, _ = _encrypted(pg_db, tmp_path)  # another process or host: nothing shared
    a, b = one.open("A", lambda: HEADER), two.open("A", lambda: HEADER)
    a.append(block("a0"))
    b.append(block("b0"))
    spy = Spy(pg_db, monkeypatch)
    a.append(block("a1"))  # a's guess is before b0: missed
    assert spy.sent == [[0]] and spy.locked == 1
    for n in range(2, 8):
        (a if n % 2 == 0 else b).append(block(f"{'ab'[n % 2]}{n}"))
    assert contents(a.read_memory()) == ["a0", "b0", "a1", "a2", "b3", "a4", "b5", "a6", "b7"]
    positions = _positions(pg_db)
    assert positions == list(range(len(positions)))


def test_a_locked_append_authenticates_the_memory_once_until_it_changes(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers taking turns read the end under the lock. A header and first frame already
    authenticated under the same keyring counter are not decrypted again; others are."""
    one, _ = _encrypted(pg_db, tmp_path)
    two, _ = _encrypted(pg_db, tmp_path)
    a, b = one.open("A", lambda: HEADER), two.open("A", lambda: HEADER)
    a.append(block("a0"))
    b.append(block("b0"))
    decoded: list[str] = []
    real = a.codec.decode

    def decode(*args: Any, **kwargs: Any) -> Any:
        decoded.append(args[3])  # (the source named)
        return real(*args, **kwargs)

    monkeypatch.setattr(a.codec, "decode", decode)
    for n in range(1, 4):
        a.append(block(f"a{n}"))
        b.append(block(f"b{n}"))
    assert decoded == ["MEMORY.md.gmenc"]  # the first locked append only
    # Another agent's header and first frame put in place of A's: authenticated anew.
    other = one.open("B", lambda: HEADER)
    other.append(block("B's words"))
    with pg_db.transaction() as conn:
        conn.execute(
            """UPDATE governed_memory.memories a SET header = b.header
               FROM governed_memory.memories b WHERE a.agent = 'A' AND b.agent = 'B'"""
        )
        conn.execute(
            """UPDATE governed_memory.memory_blocks x SET data = y.data
               FROM governed_memory.memories ma, governed_memory.memories mb,
                    governed_memory.memory_blocks y
               WHERE ma.agent = 'A' AND mb.agent = 'B' AND x.memory_id = ma.id
                 AND y.memory_id = mb.id AND x.position = 0 AND y.position = 0"""
        )
    rows = _positions(pg_db)
    with pytest.raises(DecryptionError):
        a.append(block("after the swap"))
    assert len(decoded) == 2 and _positions(pg_db) == rows  # refused: nothing appended


def _positions(db: Database) -> list[int]:
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT position FROM governed_memory.memory_blocks ORDER BY position"
        ).fetchall()
    return [int(row[0]) for row in rows]


def test_a_shred_between_appends_makes_the_guess_miss_and_the_memory_start_afresh(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys are guessed with the keyring's counter: a shred (from any host) moves it."""
    stores, ring = _encrypted(pg_db, tmp_path)
    alice = stores.open("A", lambda: HEADER).subject_store("alice")
    alice.append(block("alice's first words", "alice"))
    alice.append(block("alice's second words", "alice"))
    ring.shred_subject("alice")
    spy = Spy(pg_db, monkeypatch)
    alice.append(block("after the erasure", "alice"))
    assert spy.locked == 1 and all(counts in ([0], None) for counts in spy.sent)
    assert contents(alice.read_memory()) == ["after the erasure"]


def test_with_a_keyring_outside_the_database_every_append_reads_its_end_under_the_lock(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard checks the database's keyring counter: a keyring in a folder has another."""
    ring = Keyring(tmp_path / "keyring", LocalKeyProvider(bytes(range(32))))
    stores = pg_store_factory(pg_db, keyring=lambda: ring, clock=FixedClock())
    alice = stores.open("A", lambda: HEADER).subject_store("alice")
    alice.append(block("alice's first words", "alice"))
    spy = Spy(pg_db, monkeypatch)
    alice.append(block("alice's second words", "alice"))
    ring.shred_subject("alice")
    alice.append(block("after the erasure", "alice"))
    assert spy.sent == [] and spy.locked == 2
    assert contents(alice.read_memory()) == ["after the erasure"]


def test_a_compaction_by_the_store_is_followed_by_a_locked_append_then_guessed_ones(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores, _ = _encrypted(pg_db, tmp_path)
    store = stores.open("A", lambda: HEADER)
    store.append(block("old"))
    store.compact(block("summary"))
    spy = Spy(pg_db, monkeypatch)
    store.append(block("new 1"))
    store.append(block("new 2"))
    assert spy.locked == 2 - len(spy.sent) and spy.sent in ([], [[1]])  # never a wasted guess
    assert contents(store.read_memory()) == ["summary", "new 1", "new 2"]


@pytest.mark.parametrize("committed", [True, False], ids=["lost-after-commit", "lost-before"])
def test_a_connection_lost_after_the_send_neither_loses_nor_repeats_an_append(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """The outcome unknown: settled under the lock, by the frames' own bytes."""
    stores, _ = _encrypted(pg_db, tmp_path)
    store = stores.open("A", lambda: HEADER)
    store.append(block("before"))
    lose_the_next_send(pg_db, monkeypatch, committed=committed)
    store.append(block("the one sent"))
    store.append(block("after"))
    assert contents(store.read_memory()) == ["before", "the one sent", "after"]


def test_inside_a_held_lock_an_append_uses_the_lock_session(
    pg_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pooled connection would wait for ever on the lock this thread's session holds."""
    stores, _ = _encrypted(pg_db, tmp_path)
    store = stores.open("A", lambda: HEADER)
    store.append(block("first"))
    spy = Spy(pg_db, monkeypatch)
    with store.lock():
        store.append(block("under the lock"))
    assert spy.sent == []
    assert contents(store.read_memory()) == ["first", "under the lock"]


# -- audit appends ---------------------------------------------------------------------------------


def test_an_audit_append_after_its_own_is_one_round_trip(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PgAuditStorage(pg_db, KEY, period="day")
    log.append("persist", {"n": 0}, at=T0)
    spy = Spy(pg_db, monkeypatch)
    for n in range(1, 4):
        log.append("persist", {"n": n}, at=T0)
    log.append("persist", {"n": 4}, at=T0 + dt.timedelta(days=1))  # a new segment too
    assert spy.sent == [[1]] * 4 and spy.locked == 0
    assert verify_storage(log, [KEY]).ok
    assert [e.attrs.get("n") for e in log.entries() if e.event == "persist"] == [0, 1, 2, 3, 4]
    assert len(log.segment_ids()) == 2


def test_two_hosts_taking_turns_on_the_chain_keep_one_chain_without_gaps(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = PgAuditStorage(pg_db, KEY), PgAuditStorage(pg_db, KEY)
    one.append("persist", {"n": 0}, at=T0)
    two.append("persist", {"n": 1}, at=T0)
    spy = Spy(pg_db, monkeypatch)
    one.append("persist", {"n": 2}, at=T0)  # its guess is before two's entry: missed
    assert spy.sent == [[0]] and spy.locked == 1
    for n in range(3, 12):
        (one if n % 3 else two).append("persist", {"n": n}, at=T0)
    entries = list(one.entries())
    assert verify_storage(one, [KEY]).ok
    assert [e.attrs.get("n") for e in entries if e.event == "persist"] == list(range(12))
    assert not [e for e in entries if e.event == AuditEvent.DISCONTINUITY]
    assert _seqs(pg_db) == list(range(1, len(entries) + 1))


def test_a_tampered_head_makes_the_guess_miss_and_is_recorded_as_before(
    pg_db: Database, pg_url: str
) -> None:
    log = PgAuditStorage(pg_db, KEY)
    log.append("persist", {"n": 0}, at=T0)
    log.append("persist", {"n": 1}, at=T0)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE governed_memory.audit_head SET mac = 'forged'")
    log.append("persist", {"n": 2}, at=T0)
    events = [e.event for e in log.entries()]
    assert events[-2:] == [AuditEvent.DISCONTINUITY, "persist"]
    discontinuity = next(e for e in log.entries() if e.event == AuditEvent.DISCONTINUITY)
    assert discontinuity.attrs["reason_code"] == "head_unauthenticated"


@pytest.mark.parametrize("committed", [True, False], ids=["lost-after-commit", "lost-before"])
def test_a_connection_lost_after_the_send_neither_loses_nor_repeats_an_entry(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    log = PgAuditStorage(pg_db, KEY)
    log.append("persist", {"n": 0}, at=T0)
    lose_the_next_send(pg_db, monkeypatch, committed=committed)
    sent = log.append("persist", {"n": 1}, at=T0)
    log.append("persist", {"n": 2}, at=T0)
    entries = [e for e in log.entries() if e.event == "persist"]
    assert [e.attrs.get("n") for e in entries] == [0, 1, 2]
    assert entries[1].seq == sent.seq and entries[1].hash == sent.hash
    assert verify_storage(log, [KEY]).ok


def test_an_append_made_from_the_newest_entry_is_never_guessed(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append_after``'s attributes come from the entry read under the lock."""
    log = PgAuditStorage(pg_db, KEY)
    newest = log.append("persist", {"n": 0}, at=T0)
    spy = Spy(pg_db, monkeypatch)
    made: Callable[[Any], dict[str, Any]] = lambda last: {"after": last.seq}  # noqa: E731
    entry = log.append_after("persist", made)
    assert spy.sent == [] and spy.locked == 1
    assert entry.attrs["after"] == newest.seq
