"""Joined writes (_postgres/_memory.py ``append_audited``): a block and its audit entry, one transaction.

On a database deployment with audit on, an allowed add stores the block and its
``persist`` entry in one transaction sent in one round trip, once the process
knows the ends of the memory and of the chain. What must hold: a block is never
stored without its entry (nor the entry without the block); every guess that is
wrong (another host's entry, another writer's block) writes nothing and the add
goes the usual way; a connection lost after the send neither loses nor repeats
either; and the other ways in (a held lock, an unknown end) still work.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from memory_blocks import block
from sealing_helpers import TEST_MASTER_KEY_B64
from sends import HeldJoins, Spy, lose_the_next_send

from governed_memory import (
    AuditWriteError,
    Conversation,
    DatabaseError,
    Governance,
    memory_md_path,
    parse_memory,
)
from governed_memory._audit import ActorSink, AuditEvent, AuditKey, verify_storage
from governed_memory._governance._policy_load import PolicyLoadSink
from governed_memory._policy import Settings
from governed_memory._postgres import Database, PgAuditStorage, PgPlace, upgrade_schema
from governed_memory._postgres._guarded import Guess
from governed_memory._protocols import WriteGuard
from governed_memory._records import ConsentAction, ConsentRegistry

SUBJECT = "alice"
AUDIT_KEY = "ab" * 32


def _environment(monkeypatch: pytest.MonkeyPatch, url: str, tmp_path: Path, policy: str) -> None:
    db = Database(url)
    try:
        upgrade_schema(db)
    finally:
        db.close()
    monkeypatch.setenv("GOVERNED_MEMORY_DATABASE_URL", url)
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", policy)
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", AUDIT_KEY)
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", TEST_MASTER_KEY_B64)
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "ws"))


@pytest.fixture
def made() -> Iterator[list[Governance]]:
    """The Governances a test builds (each a host of its own), closed at the end."""
    governances: list[Governance] = []
    yield governances
    for gov in governances:
        gov.close()


@pytest.fixture(params=["regulated", "plaintext"])
def host(
    request: pytest.FixtureRequest,
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    made: list[Governance],
) -> Governance:
    """A regulated host (consent, subject isolation, encryption, audit), or a plaintext audited one."""
    if request.param == "regulated":
        _environment(monkeypatch, pg_url, tmp_path, "regulated")
    else:
        policy = tmp_path / "audited.toml"
        policy.write_text('[policy]\nid = "audited"\nversion = "1"\n[audit]\nenabled = true\n')
        _environment(monkeypatch, pg_url, tmp_path, str(policy))
    return _another_host(made)


def _another_host(made: list[Governance]) -> Governance:
    gov = Governance(settings=Settings())
    assert gov.storage.files is None  # really the database
    gov.grant(SUBJECT, "persist", actor="dpo@bank.example")
    made.append(gov)
    return gov


def _chat(gov: Governance, agent: str = "teller") -> Conversation:
    return Conversation(
        name=f"{agent}_conv",
        memory_md_path=memory_md_path(agent, gov.workspace),
        governance=gov,
        subject_id=SUBJECT,
    )


def _db(gov: Governance) -> Database:
    db = getattr(gov.storage, "db", None)
    assert isinstance(db, Database)
    return db


def _store(gov: Governance, agent: str = "teller") -> Any:
    """The memory the agent's turns go to (the subject's own under isolation)."""
    store = gov.memory_backend.open(agent, str)
    return store.subject_store(SUBJECT) if gov.policy.memory.isolation == "subject" else store


def _stored(gov: Governance, agent: str = "teller") -> list[str]:
    """The turns stored for the agent."""
    text = _store(gov, agent).read_memory()
    return [] if text is None else [r.content for r in parse_memory(text).records]


def _persisted(gov: Governance) -> list[int]:
    """The bytes recorded by each ``persist`` entry of the chain, oldest first."""
    log = gov.audit.log
    assert log is not None
    return [int(e.attrs["bytes"]) for e in log.entries() if e.event == "persist"]


def _verified(gov: Governance) -> None:
    log = gov.audit.log
    assert log is not None
    assert verify_storage(log, [AuditKey.from_text(AUDIT_KEY)]).ok
    assert not [e for e in log.entries() if e.event == AuditEvent.DISCONTINUITY]


# -- the joined write ----------------------------------------------------------------------------


def test_an_add_after_the_first_is_one_transaction_for_the_block_and_its_entry(
    host: Governance, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = _chat(host)
    chat.add("Human", "first: the ends are read under the locks")
    spy = Spy(_db(host), monkeypatch)
    for n in range(5):
        chat.add("Human", f"turn {n}")
    assert len(spy.joined) == 5 and all(counts and counts[2] == 1 for counts in spy.joined)
    assert spy.locked == 0 and len(spy.sent) == 5  # nothing else was written
    assert _stored(host) == ["first: the ends are read under the locks"] + [
        f"turn {n}" for n in range(5)
    ]
    persisted = _persisted(host)
    assert len(persisted) == 6 and persisted[1:] == [persisted[1]] * 5  # one entry per block
    _verified(host)


def test_a_refused_write_stores_neither_the_block_nor_its_entry(
    host: Governance, pg_url: str
) -> None:
    """Both in one transaction: the server refusing the entry keeps the block out too."""
    chat = _chat(host)
    chat.add("Human", "kept")
    chat.add("Human", "kept too")  # (the ends are now known: the next add is joined)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'the audit table is full'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON governed_memory.audit_entries "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    with pytest.raises((DatabaseError, AuditWriteError)) as raised:
        chat.add("Human", "refused with its entry")
    assert "audit" in str(raised.value)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER refuse ON governed_memory.audit_entries")
    chat.add("Human", "after the refusal")
    assert _stored(host) == ["kept", "kept too", "after the refusal"]
    assert len(_persisted(host)) == 3
    _verified(host)


def test_another_hosts_entry_in_between_makes_the_joined_write_miss_and_lose_nothing(
    host: Governance, made: list[Governance], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _another_host(made)  # the same database: its grant moved the chain's end
    chat, theirs = _chat(host), _chat(other, "clerk")
    chat.add("Human", "a0")
    theirs.add("Human", "b0")
    spy = Spy(_db(host), monkeypatch)
    chat.add("Human", "a1")  # the chain's end it knows (if any) is before b0
    # A joined write guessing that end wrote nothing (its guard missed); the block and
    # its entry went in one write with the entry waiting to be chained.
    assert all(counts is not None and counts[2] == 0 for counts in spy.joined)
    assert [counts for counts in spy.sent if counts == [1, 1, 1]] == [[1, 1, 1]]
    for n in range(2, 8):
        (chat if n % 2 == 0 else theirs).add("Human", f"turn {n}")
    assert _stored(host) == ["a0", "a1", "turn 2", "turn 4", "turn 6"]
    assert _stored(host, "clerk") == ["b0", "turn 3", "turn 5", "turn 7"]
    assert len(_persisted(host)) == 9
    _verified(host)


def test_another_writer_on_the_same_memory_makes_the_joined_write_miss_and_lose_nothing(
    host: Governance, made: list[Governance], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _another_host(made)
    mine, theirs = _chat(host), _chat(other)  # one agent, two hosts
    mine.add("Human", "a0")
    mine.add("Human", "a1")
    theirs.add("Human", "b0")  # its entry moves the chain too
    mine.add("Human", "a2")
    theirs.add("Human", "b1")
    mine.add("Human", "a3")
    assert _stored(host) == ["a0", "a1", "b0", "a2", "b1", "a3"]
    assert len(_persisted(host)) == 6
    _verified(host)


@pytest.mark.parametrize("committed", [True, False], ids=["lost-after-commit", "lost-before"])
def test_a_connection_lost_after_the_send_neither_loses_nor_repeats_the_block_or_its_entry(
    host: Governance, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    chat = _chat(host)
    chat.add("Human", "before")
    chat.add("Human", "before too")
    lose_the_next_send(_db(host), monkeypatch, committed=committed)
    chat.add("Human", "the one sent")
    chat.add("Human", "after")
    assert _stored(host) == ["before", "before too", "the one sent", "after"]
    assert len(_persisted(host)) == 4
    _verified(host)


def test_threads_adding_at_once_each_store_every_block_with_its_entry(host: Governance) -> None:
    """One joined write in flight per process; the others take the usual path meanwhile."""
    chats = [_chat(host, f"agent{t}") for t in range(6)]
    errors: list[BaseException] = []

    def talk(chat: Conversation) -> None:
        try:
            for n in range(15):
                chat.add("Human", f"turn {n}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=talk, args=(chat,)) for chat in chats]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for t in range(6):
        assert _stored(host, f"agent{t}") == [f"turn {n}" for n in range(15)]
    assert len(_persisted(host)) == 90
    _verified(host)


def test_threads_adding_at_once_share_one_transaction_each_block_with_its_entry(
    host: Governance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The joins queued while one is written go in the next transaction together (one
    commit for all), each entry sealed after the one before, each with its block."""
    chats = [_chat(host, f"agent{t}") for t in range(4)]
    for chat in chats:
        chat.add("Human", "first")  # (the ends are known: the next adds are joined)
    held, spy = HeldJoins(host.audit.log), Spy(_db(host), monkeypatch)
    got = held.at_once([lambda chat=chat: chat.add("Human", "at once") for chat in chats])
    assert not [g for g in got if isinstance(g, Exception)] and held.sizes == [1, 3]
    assert spy.joined == [[1, 1, 1, 1]] * 4 and len(spy.sent) == 4
    assert [len(locks) for locks in spy.locks] == [2, 4, 4, 4]  # the agents', then the chain's
    assert spy.locked == 0  # nothing read under a lock
    for t in range(4):
        assert _stored(host, f"agent{t}") == ["first", "at once"]
    assert len(_persisted(host)) == 8
    _verified(host)


def test_a_join_whose_memory_moved_goes_the_usual_way_and_those_after_it_wait(
    regulated: Governance, monkeypatch: pytest.MonkeyPatch, pg_url: str
) -> None:
    """Two conversations of one agent guess the same end of its memory: the second one's
    join finds it moved by the first and writes nothing, so the chain does not end where
    the joins after it were sealed; they go to ``audit_pending`` at once. Nothing is lost."""
    first, second = _chat(regulated), _chat(regulated)
    other, another = _chat(regulated, "clerk"), _chat(regulated, "cashier")
    first.add("Human", "a0")
    second.add("Human", "b0")  # (the first's guess of the memory's end is stale now)
    other.add("Human", "c0")
    another.add("Human", "d0")
    first.add("Human", "a1")  # (each now knows its end: the next add of each is joined)
    second.add("Human", "b1")
    _chained(regulated)  # (the entries of the misses above waited: chained, the end known)
    held, spy = HeldJoins(regulated.audit.log), Spy(_db(regulated), monkeypatch)
    calls = [
        lambda: other.add("Human", "c1"),
        lambda: second.add("Human", "b2"),
        lambda: first.add("Human", "a2"),  # its guard fails: the memory ends at b2
        lambda: another.add("Human", "d1"),
    ]
    got = held.at_once(calls)
    assert not [g for g in got if isinstance(g, Exception)] and held.sizes[:2] == [1, 3]
    # c1 alone, then b2 written, a2 refused by its own guard, d1 by the chain's.
    assert spy.joined[:4] == [[1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0]]
    stored = _stored(regulated)
    assert stored[:4] == ["a0", "b0", "a1", "b1"] and sorted(stored[4:]) == ["a2", "b2"]
    assert _stored(regulated, "clerk") == ["c0", "c1"]
    assert _stored(regulated, "cashier") == ["d0", "d1"]
    assert _outcomes(regulated) == ["ok"] * 10
    assert _waiting(pg_url) <= 1  # (d1's entry: chained soon, or by the next read)
    _verified(regulated)


def _chained(gov: Governance) -> None:
    """Chain what waits, and wait out the background chaining: the process knows the end."""
    log = gov.audit.log
    assert isinstance(log, PgAuditStorage)
    log.chain_all_waiting()
    deadline = dt.datetime.now() + dt.timedelta(seconds=20)
    while not log._chainer.idle and dt.datetime.now() < deadline:
        threading.Event().wait(0.01)
    assert log._chainer.idle


def test_more_threads_than_pooled_connections_start_conversations_for_new_customers_at_once(
    regulated: Governance,
) -> None:
    """Each first add creates its customer's key inside the agent's transaction and
    records ``keys.create``: written alone, not queued behind a batch whose leader waits
    for the pool those transactions hold (16 threads on a pool of 8 hung 10 s and failed)."""
    customers = [f"customer{n}" for n in range(16)]
    for customer in customers:
        regulated.grant(customer, "persist", actor="dpo@bank.example")
    errors: list[BaseException] = []
    start = threading.Barrier(len(customers))

    def talk(n: int) -> None:
        try:
            start.wait(60)
            chat = Conversation(
                name=f"teller{n}_conv",
                memory_md_path=memory_md_path(f"teller{n}", regulated.workspace),
                governance=regulated,
                subject_id=customers[n],
            )
            for turn in range(3):
                chat.add("Human", f"turn {turn}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=talk, args=(n,)) for n in range(len(customers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    store = regulated.memory_backend
    for n, customer in enumerate(customers):
        text = store.open(f"teller{n}", str).subject_store(customer).read_memory()
        assert [r.content for r in parse_memory(text or "").records] == [
            "turn 0",
            "turn 1",
            "turn 2",
        ]
    _verified(regulated)


def test_inside_a_held_lock_an_add_is_not_joined_and_does_not_wait_on_itself(
    host: Governance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is held through a store of another set (the memory backend's, not the gate's).

    A joined write runs on a pooled connection, which would wait for ever on the
    lock this thread's session holds; the locked path runs on that session. (Before
    the lock sessions were one per database, the gate's store did not see the
    backend's session, and any add here waited on itself.)
    """
    chat = _chat(host)
    chat.add("Human", "first")
    chat.add("Human", "second")
    spy = Spy(_db(host), monkeypatch)
    with _store(host).lock():
        chat.add("Human", "under the lock")
    assert spy.joined == []
    assert _stored(host) == ["first", "second", "under the lock"]


def test_an_add_without_consent_stores_nothing(
    host: Governance, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = _chat(host)
    chat.add("Human", "first")
    chat.add("Human", "second")
    if host.policy.consent.required_for:
        host.withdraw(SUBJECT, "persist", actor="dpo@bank.example")
        spy = Spy(_db(host), monkeypatch)
        chat.add("Human", "kept in memory only")
        chat.add("Human", "this one too")
        # The first is tried on the grant it had read: the consent guard fails (the
        # ends held), nothing is written, the log is read again. The second reads first.
        assert spy.joined == [[1, 1, 0, 0]]
        assert _stored(host) == ["first", "second"]
        assert _outcomes(host)[-2:] == ["memory_only", "memory_only"]
    else:  # (the plaintext policy asks no consent: joined, stored)
        chat.add("Human", "stored")
        assert _stored(host) == ["first", "second", "stored"]
    _verified(host)


# -- the consent guard (regulated: consent is needed to persist) ------------------------------


@pytest.fixture
def regulated(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Governance]
) -> Governance:
    _environment(monkeypatch, pg_url, tmp_path, "regulated")
    return _another_host(made)


def _outcomes(gov: Governance) -> list[str]:
    """The outcome of each ``persist`` entry of the chain, oldest first."""
    log = gov.audit.log
    assert log is not None
    return [str(e.attrs["outcome"]) for e in log.entries() if e.event == "persist"]


def _talking(gov: Governance) -> Conversation:
    """A conversation after two adds ("a0", "a1"): its ends and its consent are known."""
    chat = _chat(gov)
    chat.add("Human", "a0")
    chat.add("Human", "a1")
    return chat


def _withdrawn_elsewhere(pg_url: str, gov: Governance, subject: str = SUBJECT) -> None:
    """``subject`` withdraws on another host: the consent log alone changes."""
    elsewhere = Database(pg_url)
    try:
        registry = ConsentRegistry(PgPlace(elsewhere), sealing=gov.consent.sealing)
        registry.record(
            registry.make_event(
                subject,
                "persist",
                ConsentAction.WITHDRAW,
                at=dt.datetime.now(dt.UTC),
                actor=subject,
                policy_id="p",
                policy_version="1",
            )
        )
    finally:
        elsewhere.close()


class Reads:
    """The reads sent outside a transaction (a consent check is one)."""

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self._read = db.read
        monkeypatch.setattr(db, "read", self.read)

    def read(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self._read(*args, **kwargs)


def test_an_allowed_add_reads_no_consent_first_its_write_checks_the_consent_log(
    regulated: Governance, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = _chat(regulated)
    chat.add("Human", "first: consent is read, the ends under the locks")
    reads, spy = Reads(_db(regulated), monkeypatch), Spy(_db(regulated), monkeypatch)
    for n in range(5):
        chat.add("Human", f"turn {n}")
    assert reads.count == 0  # one round trip per add: the joined write, nothing before it
    assert spy.joined == [[1, 1, 1, 1]] * 5
    assert _stored(regulated)[1:] == [f"turn {n}" for n in range(5)]


def test_a_withdrawal_on_another_host_stops_the_next_add_inside_its_own_transaction(
    regulated: Governance, made: list[Governance], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No window: the write commits only if the consent log is as this host read it."""
    other, chat = _another_host(made), _talking(regulated)
    other.withdraw(SUBJECT, "persist", actor=SUBJECT)  # committed on the other host
    spy = Spy(_db(regulated), monkeypatch)
    chat.add("Human", "said after the withdrawal")
    # Nothing written. (The withdrawal's own audit entry moved the chain too, so the
    # chain's guard refused it as well: the next test changes consent alone.)
    assert [counts[2:] for counts in spy.joined if counts] == [[0, 0]]
    assert _stored(regulated) == ["a0", "a1"]
    assert chat.conversation_history[-1]["content"] == "said after the withdrawal"
    other.grant(SUBJECT, "persist", actor=SUBJECT)
    for n in range(3):  # (the grant's entry moved the chain: one miss, one back-off)
        chat.add("Human", f"granted again {n}")
    assert _stored(regulated) == ["a0", "a1"] + [f"granted again {n}" for n in range(3)]
    # Written again on the new read's guard, with its entry: joined to the chain's end,
    # or waiting to be chained (while the background chaining moves the end it knows).
    assert spy.sent[-1] in ([1, 1, 1, 1], [1, 1, 1])
    assert _outcomes(regulated)[-4:] == ["memory_only", "ok", "ok", "ok"]
    _verified(regulated)


def test_another_subjects_consent_changing_costs_one_read_and_loses_nothing(
    regulated: Governance, made: list[Governance], monkeypatch: pytest.MonkeyPatch
) -> None:
    other, chat = _another_host(made), _talking(regulated)
    other.grant("bob", "persist", actor="dpo@bank.example")  # the log changed, not alice's
    reads, spy = Reads(_db(regulated), monkeypatch), Spy(_db(regulated), monkeypatch)
    chat.add("Human", "a2")  # not written (the guards), the log is read again: still granted
    assert [counts[2:] for counts in spy.joined if counts] == [[0, 0]] and reads.count >= 1
    chat.add("Human", "a3")
    assert spy.joined[-1] == [1, 1, 1, 1]  # the new read's guard holds
    assert _stored(regulated) == ["a0", "a1", "a2", "a3"]
    assert _outcomes(regulated)[-4:] == ["ok"] * 4
    _verified(regulated)


def test_the_consent_guard_alone_refuses_a_write_after_a_change_it_did_not_read(
    regulated: Governance, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consent log changed on another host, and nothing else: the ends held."""
    chat = _talking(regulated)
    _withdrawn_elsewhere(pg_url, regulated)
    spy = Spy(_db(regulated), monkeypatch)
    chat.add("Human", "said after the withdrawal")
    assert spy.joined == [[1, 1, 0, 0]]  # both ends held: the consent guard refused it
    assert _stored(regulated) == ["a0", "a1"]
    assert _outcomes(regulated)[-1] == "memory_only"
    _verified(regulated)


# -- several writers on one memory ---------------------------------------------------------------


class _LockedHere:
    """The locks of the transactions this thread opens on ``db`` (not the background chaining's)."""

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.locks: list[int] = []
        self._thread = threading.current_thread()
        self._transaction = db.transaction
        monkeypatch.setattr(db, "transaction", self.transaction)

    def transaction(self, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is self._thread and kwargs.get("lock") is not None:
            self.locks.append(kwargs["lock"])
        return self._transaction(*args, **kwargs)


def test_an_add_to_a_memory_another_writer_moved_is_one_locked_transaction_with_its_entry(
    regulated: Governance, made: list[Governance], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end read under the agent's lock, the frames and the entry (waiting to be chained)
    sent with the commit: no separate append, no transaction of the log's own."""
    from governed_memory._postgres._memory import PgAgentStore

    other = _another_host(made)
    mine, theirs = _talking(regulated), _chat(other)  # one agent and customer, two hosts
    theirs.add("Human", "b0")

    def unused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the block was appended apart from its entry")

    monkeypatch.setattr(PgAgentStore, "append_guarded", unused)
    locked = _LockedHere(_db(regulated), monkeypatch)
    mine.add("Human", "a2")  # its guess of the end is before b0: missed, then read
    theirs.add("Human", "b1")
    mine.add("Human", "a3")  # backing off: no guess, the end read at once
    assert len(locked.locks) == 2 and len(set(locked.locks)) == 1  # the agent's lock, once each
    assert _stored(regulated) == ["a0", "a1", "b0", "a2", "b1", "a3"]
    assert _outcomes(regulated) == ["ok"] * 6
    _verified(regulated)


def _missed_once(gov: Governance, made: list[Governance]) -> tuple[Conversation, Conversation]:
    """Two hosts' conversations on one agent and customer: the first's add "a2" missed its
    guess of the memory's end (after "b0" of the second), so its next adds read it."""
    mine, theirs = _talking(gov), _chat(_another_host(made))
    theirs.add("Human", "b0")
    mine.add("Human", "a2")
    return mine, theirs


def test_a_refused_entry_keeps_out_the_block_of_an_add_to_a_memory_another_writer_moved(
    regulated: Governance, made: list[Governance], pg_url: str
) -> None:
    """Both in the locked transaction: the server refusing the waiting entry refuses the block."""
    mine, theirs = _missed_once(regulated, made)
    theirs.add("Human", "b1")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'the audit table is full'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON governed_memory.audit_pending "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    with pytest.raises(DatabaseError) as raised:
        mine.add("Human", "refused with its entry")
    assert "audit" in str(raised.value) and "\n" not in str(raised.value)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER refuse ON governed_memory.audit_pending")
    mine.add("Human", "after the refusal")
    assert _stored(regulated) == ["a0", "a1", "b0", "a2", "b1", "after the refusal"]
    assert _outcomes(regulated) == ["ok"] * 5 + ["error", "ok"]  # (the refusal recorded)
    _verified(regulated)


class _Aborted(Exception):
    """Ends the transaction it is raised in, which rolls back."""


@pytest.mark.parametrize("committed", [True, False], ids=["lost-after-commit", "lost-before"])
def test_a_connection_lost_committing_an_add_to_a_memory_another_writer_moved_is_settled(
    regulated: Governance, made: list[Governance], monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """The outcome of the COMMIT unknown to the client: the entry's token tells. Committed,
    the add is done (stored once, one entry); not, its error is raised and nothing is kept."""
    mine, theirs = _missed_once(regulated, made)
    theirs.add("Human", "b1")
    db, main = _db(regulated), threading.current_thread()
    real = db.transaction
    lost: list[int] = []

    @contextlib.contextmanager
    def losing(*args: Any, **kwargs: Any) -> Iterator[Any]:
        if lost or threading.current_thread() is not main or kwargs.get("lock") is None:
            with real(*args, **kwargs) as conn:
                yield conn
            return
        lost.append(1)
        try:
            with real(*args, **kwargs) as conn:
                yield conn
                if not committed:
                    raise _Aborted
        except _Aborted:
            pass
        raise DatabaseError("PostgreSQL lost the connection while committing (a test)")

    monkeypatch.setattr(db, "transaction", losing)
    if committed:
        mine.add("Human", "the one sent")
    else:
        with pytest.raises(DatabaseError, match="while committing"):
            mine.add("Human", "the one sent")
    mine.add("Human", "after")
    assert lost == [1]
    sent = ["the one sent"] if committed else []
    assert _stored(regulated) == ["a0", "a1", "b0", "a2", "b1", *sent, "after"]
    assert _outcomes(regulated) == ["ok"] * 5 + (["ok"] if committed else ["error"]) + ["ok"]
    _verified(regulated)


def test_a_withdrawal_stops_an_add_to_a_memory_another_writer_moved_inside_its_transaction(
    regulated: Governance, made: list[Governance], pg_url: str
) -> None:
    mine, _ = _missed_once(regulated, made)
    _withdrawn_elsewhere(pg_url, regulated)  # the consent log alone changes
    mine.add("Human", "said after the withdrawal")
    assert _stored(regulated) == ["a0", "a1", "b0", "a2"]
    assert _outcomes(regulated)[-1] == "memory_only"
    _verified(regulated)


def test_a_guard_of_another_database_is_not_joined_and_writes_nothing(
    regulated: Governance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guard is checked where it was read: a write elsewhere cannot, so it is not joined."""
    _talking(regulated)  # (the ends are known: the write would be joined)
    log = regulated.audit.log
    assert log is not None
    elsewhere = WriteGuard(object(), "true", ())
    spy = Spy(_db(regulated), monkeypatch)
    written = _store(regulated).append_audited("a block", log, "persist", {}, also=elsewhere)
    assert written is None and spy.sent == []
    assert _stored(regulated) == ["a0", "a1"]


# -- the parts -------------------------------------------------------------------------------------


def test_a_taken_guess_is_given_to_one_writer_and_a_later_end_is_not_replaced_by_an_earlier() -> (
    None
):
    guess: Guess[int] = Guess(order=lambda end: end)
    guess.wrote(5)
    assert guess.take() == 5
    assert guess.take() is None and guess.get() is None  # taken: the others read under the lock
    guess.wrote(7)  # another thread wrote the chain meanwhile
    guess.hit(6)  # the taker reports its end late: the later one stays
    assert guess.get() == 7


def test_the_first_entry_after_loading_a_policy_is_not_joined_so_policy_load_comes_first() -> None:
    seen: list[str] = []

    class Trail:
        def record_with(self, operation: str, write: Any, **attrs: Any) -> bool:
            seen.append(f"joined {operation}")
            return True

        def record(self, operation: str, **attrs: Any) -> None:
            seen.append(operation)

    sink = PolicyLoadSink(Trail(), {"policy_id": "p", "policy_version": "1", "source": "x"})  # type: ignore[arg-type]
    assert not sink.record_with("persist", None, agent="a", subject_id=None, outcome="ok")
    sink.record("persist", agent="a", subject_id=None, outcome="ok")
    assert sink.record_with("persist", None, agent="a", subject_id=None, outcome="ok")
    assert seen == ["policy.load", "persist", "joined persist"]


def test_an_actor_sink_names_its_actor_in_a_joined_entry() -> None:
    seen: list[dict[str, Any]] = []

    class Trail:
        def record_with(self, operation: str, write: Any, **attrs: Any) -> bool:
            seen.append(attrs)
            return True

    sink = ActorSink(Trail(), "ops:alice")  # type: ignore[arg-type]
    assert sink.record_with("persist", None, agent="a", subject_id=None, outcome="ok")
    assert seen == [{"agent": "a", "subject_id": None, "outcome": "ok", "actor": "ops:alice"}]
    bare = ActorSink(object(), "ops:alice")  # type: ignore[arg-type]
    assert not bare.record_with("persist", None, agent="a", subject_id=None, outcome="ok")


# -- the entry waiting to be chained (group chaining) --------------------------------------------


def _waiting(pg_url: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM governed_memory.audit_pending").fetchone()
        return int(row[0]) if row else -1


def test_hosts_taking_turns_commit_each_block_with_an_entry_chained_after(
    host: Governance, made: list[Governance], monkeypatch: pytest.MonkeyPatch, pg_url: str
) -> None:
    """Each host's guess of the chain's end is stale: the entry waits, and is chained later,
    here (background chaining held back) by the first read of the log, as after a kill -9."""
    from governed_memory._postgres._audit import PgAuditStorage

    monkeypatch.setattr(PgAuditStorage, "chain_soon", lambda self: None)
    other = _another_host(made)
    chat, theirs = _chat(host), _chat(other, "clerk")
    spy = Spy(_db(host), monkeypatch)
    for n in range(6):
        (chat if n % 2 == 0 else theirs).add("Human", f"turn {n}")
    waiting_writes = [counts for counts in spy.sent if counts == [1, 1, 1]]
    assert waiting_writes  # block and entry in one transaction, the entry left to chain
    assert _waiting(pg_url) >= len(waiting_writes)
    assert _stored(host) == ["turn 0", "turn 2", "turn 4"]
    assert _stored(host, "clerk") == ["turn 1", "turn 3", "turn 5"]
    assert len(_persisted(host)) == 6  # the read chained every waiting entry first
    assert _waiting(pg_url) == 0
    _verified(host)


def test_background_chaining_empties_the_waiting_entries(
    host: Governance, made: list[Governance], pg_url: str
) -> None:
    other = _another_host(made)
    chat, theirs = _chat(host), _chat(other, "clerk")
    for n in range(6):
        (chat if n % 2 == 0 else theirs).add("Human", f"turn {n}")
    deadline = dt.datetime.now() + dt.timedelta(seconds=20)
    while _waiting(pg_url) and dt.datetime.now() < deadline:
        threading.Event().wait(0.02)
    assert _waiting(pg_url) == 0  # chained without any read of the log
    assert len(_persisted(host)) == 6
    _verified(host)


def test_closing_a_governance_chains_what_it_left_waiting_and_keeps_no_thread_or_connection(
    host: Governance, made: list[Governance], pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _another_host(made)
    chat, theirs = _chat(host), _chat(other, "clerk")
    for gov in (host, other):  # no background chaining: what waits is left waiting
        log = gov.audit.log
        assert isinstance(log, PgAuditStorage)
        monkeypatch.setattr(log._chainer, "soon", lambda: None)
        monkeypatch.setattr(log._chainer, "_thread", (os.getpid(), threading.current_thread()))
    for n in range(6):  # hosts taking turns: each finds the chain's end moved
        (chat if n % 2 == 0 else theirs).add("Human", f"turn {n}")
    assert _waiting(pg_url) > 0
    with other:
        pass
    assert _waiting(pg_url) == 0  # chained by the close
    assert other.storage.db._pool is None  # (the pool closed: no session left on the server)
    assert len(_persisted(host)) == 6
    _verified(host)


def test_a_waiting_entry_without_the_audit_keys_mac_is_recorded_as_a_discontinuity(
    host: Governance, pg_url: str
) -> None:
    """A role that may insert but has no audit key cannot get an entry of its making chained."""
    chat = _chat(host)
    chat.add("Human", "a0")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO governed_memory.audit_pending (token, at, event, attrs, kid, mac) "
            "VALUES (%s, now(), 'erasure.complete', %s, 'k', 'not a mac')",
            (b"\x07" * 16, b'{"subject.hash":"forged"}'),
        )
    log = host.audit.log
    assert log is not None
    entries = list(log.entries())
    assert not [e for e in entries if e.event == "erasure.complete"]
    found = [e for e in entries if e.event == AuditEvent.DISCONTINUITY]
    assert [e.attrs["reason_code"] for e in found] == ["pending_unauthenticated"]
    report = verify_storage(log, [AuditKey.from_text(AUDIT_KEY)])
    assert [f.kind.value for f in report.findings] == ["discontinuity"]
    assert _waiting(pg_url) == 0


def test_a_waiting_entry_cannot_be_changed_or_dropped_before_it_is_chained(
    pg_schema_url: str,
) -> None:
    with psycopg.connect(pg_schema_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO governed_memory.audit_pending (token, at, event, attrs, kid, mac) "
            "VALUES ('\\x01'::bytea, now(), 'persist', '{}', 'k', 'm')"
        )
        for statement in (
            "DELETE FROM governed_memory.audit_pending",
            "UPDATE governed_memory.audit_pending SET event = 'other'",
            "TRUNCATE governed_memory.audit_pending",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="refused"):
                conn.execute(statement)
        row = conn.execute("SELECT event FROM governed_memory.audit_pending").fetchone()
        assert row is not None and row[0] == "persist"


def test_while_waiting_entries_are_being_chained_an_add_waits_too_rather_than_join(
    host: Governance, monkeypatch: pytest.MonkeyPatch, pg_url: str
) -> None:
    """The chaining moves the chain's end: a joined write guessing it meanwhile would miss,
    a wasted round trip on the chain's lock. So the add goes to ``audit_pending`` at once."""
    from governed_memory._postgres._audit import PgAuditStorage

    chat = _talking(host)  # (the ends are known: the next add would be joined)
    log = host.audit.log
    assert isinstance(log, PgAuditStorage)
    chainer = log._chainer
    running, release = threading.Event(), threading.Event()
    chain = chainer._chain

    def held_back() -> object:
        running.set()
        release.wait(20)
        return chain()

    monkeypatch.setattr(chainer, "_chain", held_back)
    log.chain_soon()  # the background chaining starts, and is held inside
    assert running.wait(20) and not chainer.idle
    spy = Spy(_db(host), monkeypatch)
    chat.add("Human", "while chaining")
    assert spy.joined == [] and spy.sent == [[1, 1, 1]]  # block and waiting entry, at once
    release.set()
    deadline = dt.datetime.now() + dt.timedelta(seconds=20)
    while not chainer.idle and dt.datetime.now() < deadline:
        threading.Event().wait(0.01)
    assert chainer.idle
    spy.reset()
    chat.add("Human", "after")  # the chaining done and nothing waiting: joined again
    assert len(spy.joined) == 1 and spy.joined[0] == [1, 1, 1, 1]
    assert _stored(host) == ["a0", "a1", "while chaining", "after"]
    assert len(_persisted(host)) == 4 and _waiting(pg_url) == 0
    _verified(host)


# -- consent needed, no audit: the write checks the grant itself ---------------------------------


@pytest.fixture(params=["encrypted", "plaintext"])
def unaudited(
    request: pytest.FixtureRequest,
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    made: list[Governance],
) -> Governance:
    """A host whose policy needs consent to persist and keeps no audit log."""
    policy = tmp_path / "consent.toml"
    encryption = "[encryption]\nenabled = true\n" if request.param == "encrypted" else ""
    policy.write_text(
        '[policy]\nid = "consent-only"\nversion = "1"\n'
        '[consent]\nrequired_for = ["persist"]\n[audit]\nenabled = false\n' + encryption
    )
    _environment(monkeypatch, pg_url, tmp_path, str(policy))
    gov = _another_host(made)
    assert type(gov.audit).__name__ == "NullAuditSink"
    assert gov.policy.consent.required_for == ("persist",)
    return gov


def test_without_audit_an_allowed_add_reads_no_consent_first(
    unaudited: Governance, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = _talking(unaudited)
    reads = Reads(_db(unaudited), monkeypatch)
    for n in range(4):
        chat.add("Human", f"turn {n}")
    assert reads.count == 0  # the grant as last read, checked by each write itself
    assert _stored(unaudited) == ["a0", "a1"] + [f"turn {n}" for n in range(4)]


def test_without_audit_a_withdrawal_on_another_host_stops_the_next_write(
    unaudited: Governance, pg_url: str
) -> None:
    """The grant this host cached is stale: the write's own check refuses, and the
    consent read then finds the withdrawal: memory only, nothing stored."""
    chat = _talking(unaudited)
    _withdrawn_elsewhere(pg_url, unaudited)
    chat.add("Human", "said after the withdrawal")
    assert _stored(unaudited) == ["a0", "a1"]
    assert chat.conversation_history[-1]["content"] == "said after the withdrawal"
    unaudited.grant(SUBJECT, "persist", actor=SUBJECT)
    chat.add("Human", "granted again")
    assert _stored(unaudited) == ["a0", "a1", "granted again"]


def test_without_audit_another_subjects_consent_changing_costs_one_read_and_loses_nothing(
    unaudited: Governance, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = _talking(unaudited)
    _withdrawn_elsewhere(pg_url, unaudited, subject="bob")  # the log changed, not alice's
    reads = Reads(_db(unaudited), monkeypatch)
    chat.add("Human", "a2")  # refused by its check, the log read again: still granted
    assert reads.count >= 1
    reads.count = 0
    chat.add("Human", "a3")
    assert reads.count == 0  # the new read's guard holds
    assert _stored(unaudited) == ["a0", "a1", "a2", "a3"]


def test_a_guarded_append_writes_nothing_when_its_guard_fails(
    unaudited: Governance, pg_url: str
) -> None:
    """The store's own contract: False and nothing written; None for another database's."""
    chat = _talking(unaudited)
    store = _store(unaudited)
    guard = unaudited.consent.granted_guard(SUBJECT, "persist")
    assert guard is not None
    _withdrawn_elsewhere(pg_url, unaudited, subject="bob")
    assert store.append_guarded(block("not kept"), guard) is False
    assert _stored(unaudited) == ["a0", "a1"]
    foreign = WriteGuard(object(), "true", ())
    assert store.append_guarded(block("not checked"), foreign) is None
    assert _stored(unaudited) == ["a0", "a1"]
    assert chat.conversation_history[-1]["content"] == "a1"


def test_without_audit_a_withdrawal_committed_between_the_decision_and_the_write_stops_it(
    unaudited: Governance, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window a read before the write leaves: the other host's withdrawal commits
    after this host decided to persist and before its write reaches the server."""
    from governed_memory._postgres._memory import PgAgentStore

    chat = _talking(unaudited)
    landed: list[str] = []

    def withdrawing_first(real: Any) -> Any:
        def write(self: PgAgentStore, *args: Any) -> Any:
            if not landed:
                landed.append("withdrawn")
                _withdrawn_elsewhere(pg_url, unaudited)
            return real(self, *args)

        return write

    monkeypatch.setattr(PgAgentStore, "append", withdrawing_first(PgAgentStore.append))
    monkeypatch.setattr(
        PgAgentStore, "append_guarded", withdrawing_first(PgAgentStore.append_guarded)
    )
    chat.add("Human", "decided before the withdrawal, written after it")
    assert landed == ["withdrawn"]
    assert _stored(unaudited) == ["a0", "a1"]  # the write's own check refused it


def test_without_audit_a_guard_the_store_cannot_check_is_replaced_by_a_read(
    unaudited: Governance, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consent guard of another database cannot be checked in the write: consent is
    read instead, so a withdrawal still stops the write."""
    chat = _talking(unaudited)
    foreign = WriteGuard(object(), "true", ())
    monkeypatch.setattr(type(unaudited.consent), "granted_guard", lambda *a, **k: foreign)
    _withdrawn_elsewhere(pg_url, unaudited)
    chat.add("Human", "said after the withdrawal")
    assert _stored(unaudited) == ["a0", "a1"]
    unaudited.grant(SUBJECT, "persist", actor=SUBJECT)
    chat.add("Human", "granted again")
    assert _stored(unaudited) == ["a0", "a1", "granted again"]
