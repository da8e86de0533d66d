"""Plaintext appends of several threads in one transaction (``LockSessions.append``),
against a real server: one round trip each, shared by the threads appending at once,
each block stored once, in order, and an outcome lost with the connection reported so."""

from __future__ import annotations

from typing import Any

import pytest
from memory_blocks import block, contents
from sends import HeldBatches, Spy, lose_the_next_send

from governed_memory import DatabaseError, FixedClock
from governed_memory._format import render_header
from governed_memory._postgres import Database, pg_store_factory
from governed_memory._postgres._memory import PgAgentStore

HEADER = render_header("A_conversation", "2026-11-30T10:00:00")


def _open(db: Database, agent: str) -> PgAgentStore:
    store = pg_store_factory(db, keyring=None, clock=FixedClock()).open(agent, lambda: HEADER)
    assert isinstance(store, PgAgentStore)
    return store


def _at_once(writes: list[tuple[PgAgentStore, str]]) -> list[int]:
    """Each append in a thread of its own: the first one's batch held until the others
    queued behind it, in the order given. The size of each batch written."""
    held = HeldBatches(writes[0][0]._stores.sessions._appends)
    calls = [lambda store=store, text=text: store.append(block(text)) for store, text in writes]
    assert held.at_once(calls) == [None] * len(writes)
    return held.sizes


def test_an_append_to_a_plaintext_memory_is_one_round_trip_under_the_agents_lock(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _open(pg_db, "A")
    store.append(block("first"))  # creates the memory: the usual locked transaction
    spy = Spy(pg_db, monkeypatch)
    store.append(block("second"))
    assert spy.sent == [[1]] and spy.locked == 0
    assert spy.locks == [[store._key]]
    assert contents(store.read_memory()) == ["first", "second"]


def test_threads_appending_at_once_share_one_transaction_each_block_stored_in_order(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = [_open(pg_db, name) for name in ("A", "B", "C")]
    for store in stores:
        store.append(block("created"))
    spy = Spy(pg_db, monkeypatch)
    sizes = _at_once(
        [
            (stores[0], "a1"),
            (stores[1], "b1"),
            (stores[0], "a2"),
            (stores[2], "c1"),
        ]
    )
    assert sizes == [1, 3]  # the first alone (held), the three behind it together
    assert spy.sent == [[1], [1, 1, 1]] and spy.locked == 0
    # every memory's lock once, in the order of the memories (as a thread holding several takes them)
    assert spy.locks[1] == [stores[0]._key, stores[1]._key, stores[2]._key]
    assert contents(stores[0].read_memory()) == ["created", "a1", "a2"]
    assert contents(stores[1].read_memory()) == ["created", "b1"]
    assert contents(stores[2].read_memory()) == ["created", "c1"]


def test_in_a_batch_a_memory_not_there_yet_is_created_and_the_others_appended_once(
    pg_db: Database,
) -> None:
    """A statement writing no row (no memory yet) leaves its caller to the usual way."""
    known, new = _open(pg_db, "Known"), _open(pg_db, "New")
    known.append(block("created"))
    _at_once(
        [
            (known, "k1"),
            (new, "n1"),
            (known, "k2"),
        ]
    )
    assert contents(known.read_memory()) == ["created", "k1", "k2"]
    assert contents(new.read_memory()) == ["n1"]


def test_a_batch_the_server_refuses_is_appended_one_by_one_each_with_its_own_outcome(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    first, second = _open(pg_db, "A"), _open(pg_db, "B")
    first.append(block("created"))
    second.append(block("created"))
    real = pg_db.pipelined

    def refusing(doing: str, statements: Any, **kwargs: Any) -> Any:
        if len(statements) > 1:
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return real(doing, statements, **kwargs)

    monkeypatch.setattr(pg_db, "pipelined", refusing)
    sizes = _at_once(
        [
            (first, "a0"),
            (first, "a1"),
            (second, "b1"),
        ]
    )
    assert sizes[:2] == [1, 2]
    assert contents(first.read_memory()) == ["created", "a0", "a1"]
    assert contents(second.read_memory()) == ["created", "b1"]


def test_a_statement_refused_alone_is_a_one_line_error_and_writes_nothing(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    store = _open(pg_db, "A")
    store.append(block("created"))

    def refusing(doing: str, statements: Any, **kwargs: Any) -> Any:
        raise psycopg.errors.UndefinedTable('relation "memory_blocks" does not exist')

    monkeypatch.setattr(pg_db, "pipelined", refusing)
    with pytest.raises(DatabaseError, match="governed-memory db upgrade") as refused:
        store.append(block("refused"))
    assert "\n" not in str(refused.value)
    monkeypatch.undo()
    assert contents(store.read_memory()) == ["created"]


@pytest.mark.parametrize("committed", [True, False], ids=["lost-after-commit", "lost-before"])
def test_a_connection_lost_after_the_send_says_the_outcome_is_unknown_and_repeats_nothing(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    store = _open(pg_db, "A")
    store.append(block("created"))
    lose_the_next_send(pg_db, monkeypatch, committed=committed)
    with pytest.raises(DatabaseError, match="outcome is unknown") as lost:
        store.append(block("lost"))
    assert lost.value.retryable is False and "check what is stored" in str(lost.value)
    assert pg_db.where in str(lost.value) and "\n" not in str(lost.value)
    expected = ["created", "lost"] if committed else ["created"]
    assert contents(store.read_memory()) == expected  # once, or not at all
    store.append(block("next"))
    assert contents(store.read_memory()) == [*expected, "next"]


def test_inside_a_held_lock_an_append_is_not_batched_and_does_not_wait_on_itself(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _open(pg_db, "A")
    store.append(block("created"))
    spy = Spy(pg_db, monkeypatch)
    with store.lock():
        store.append(block("locked"))
    assert spy.sent == []  # the lock session's own connection, the usual transaction
    assert contents(store.read_memory()) == ["created", "locked"]


def test_a_batch_takes_an_agents_own_lock_before_its_subjects_as_an_erasure_does(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure holds the agent's lock, then its subjects': a batch taking them the
    other way round could wait on it while it waits on the batch."""
    agent = _open(pg_db, "A")
    hers = agent.subject_store("alice")
    assert isinstance(hers, PgAgentStore)
    other = _open(pg_db, "B")
    for store in (agent, hers, other):
        store.append(block("created"))
    spy = Spy(pg_db, monkeypatch)
    sizes = _at_once([(other, "first, held"), (other, "b1"), (hers, "hers"), (agent, "its own")])
    assert sizes == [1, 3]
    assert spy.locks[1] == [agent._key, hers._key, other._key]
    assert contents(hers.read_memory()) == ["created", "hers"]
    assert contents(agent.read_memory()) == ["created", "its own"]
