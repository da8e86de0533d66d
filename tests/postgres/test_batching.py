"""Group commit inside one process (_postgres/_batching.py), and the audit appends that use it."""

from __future__ import annotations

import datetime as dt
import gc
import os
import signal
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import pytest
from sends import HeldJoins, Spy, lose_the_next_send

from governed_memory import generate_audit_key
from governed_memory._audit import verify_storage
from governed_memory._base import FixedClock
from governed_memory._postgres import Database, PgAuditStorage, _batching
from governed_memory._postgres._audit import JoinedEntry, JoinStatement
from governed_memory._postgres._batching import Batcher, Request

_ONE = ("agent", "")  # the memory of a lone join: (agent, partition), its locks' order


class _Log:
    """A ``write`` for a Batcher: records each batch; the first waits until released."""

    def __init__(self, fail: set[int] | None = None) -> None:
        self.batches: list[list[int]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail or set()

    def write(self, batch: Sequence[Request[int, str]]) -> None:
        if not self.batches:
            self.entered.set()
            self.release.wait(60)
        self.batches.append([r.item for r in batch])
        if any(r.item in self.fail for r in batch):
            raise RuntimeError("the transaction failed")
        for request in batch:
            if request.item < 0:
                request.error = ValueError(f"item {request.item} refused")
            else:
                request.result = f"done {request.item}"


def _entry_only(store_guard: str = "true") -> JoinStatement:
    """A join's statement writing its entry alone, if ``store_guard`` (SQL) holds too."""

    def statement(entry: JoinedEntry) -> tuple[str, tuple[Any, ...]]:
        add, add_params, head, head_params = entry.parts("(SELECT chain AND mine FROM g)")
        sql = f"""
            WITH g AS (SELECT ({entry.guard[0]}) AS chain, ({store_guard}) AS mine),
            e AS ({add} RETURNING 1), h AS ({head} RETURNING 1)
            SELECT g.chain, g.mine, (SELECT count(*) FROM h), 0 FROM g"""
        return sql, (*entry.guard[1], *add_params, *head_params)

    return statement


def _queued(batcher: Batcher[Any, Any], n: int) -> None:
    """Wait until ``n`` requests are queued behind the batch being written."""
    while len(batcher._queue) < n:
        threading.Event().wait(0.01)


def _submit_all(batcher: Batcher[int, str], log: _Log, items: list[int]) -> dict[int, object]:
    """Submit ``items[0]`` (it leads and waits), queue the rest behind it, then release."""
    got: dict[int, object] = {}

    def submit(item: int) -> None:
        try:
            got[item] = batcher.submit(item)
        except Exception as exc:
            got[item] = exc

    first = threading.Thread(target=submit, args=(items[0],))
    first.start()
    log.entered.wait(60)
    rest = [threading.Thread(target=submit, args=(i,)) for i in items[1:]]
    for thread in rest:
        thread.start()
    _queued(batcher, len(rest))
    log.release.set()
    for thread in [first, *rest]:
        thread.join(60)
    return got


def test_requests_queued_during_a_write_share_the_next_one() -> None:
    log = _Log()
    batcher: Batcher[int, str] = Batcher(log.write)
    got = _submit_all(batcher, log, [0, 1, 2, 3, 4])
    assert log.batches[0] == [0]
    assert sorted(log.batches[1]) == [1, 2, 3, 4] and len(log.batches) == 2
    assert got == {i: f"done {i}" for i in range(5)}


def test_a_failed_write_fails_every_request_of_its_batch_only() -> None:
    log = _Log(fail={3})
    batcher: Batcher[int, str] = Batcher(log.write)
    got = _submit_all(batcher, log, [0, 1, 2, 3])
    assert got[0] == "done 0"
    assert all(isinstance(got[i], RuntimeError) for i in (1, 2, 3))
    assert batcher.submit(7) == "done 7"  # the batcher goes on


def test_a_request_refused_on_its_own_fails_alone() -> None:
    log = _Log()
    batcher: Batcher[int, str] = Batcher(log.write)
    got = _submit_all(batcher, log, [0, 1, -2, 3])
    assert isinstance(got[-2], ValueError)
    assert got[1] == "done 1" and got[3] == "done 3"


def test_threads_appending_at_once_keep_one_chain_and_every_entry(pg_db: Database) -> None:
    audit = PgAuditStorage(pg_db, generate_audit_key())
    threads, each = 12, 10
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            barrier.wait()
            for i in range(each):
                entry = audit.append("memory.persist", {"writer": n, "i": i})
                assert entry.attrs["writer"] == n and entry.attrs["i"] == i
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(120)
    assert errors == []
    entries = [e for e in audit.entries() if e.event == "memory.persist"]
    assert sorted((e.attrs["writer"], e.attrs["i"]) for e in entries) == [
        (n, i) for n in range(threads) for i in range(each)
    ]
    assert verify_storage(audit, audit.key).ok


def test_a_checkpoint_append_after_sees_the_entry_before_it(pg_db: Database) -> None:
    audit = PgAuditStorage(pg_db, generate_audit_key())
    first = audit.append("memory.persist", {"n": 1})
    seen = audit.append_after("audit.checkpoint", lambda last: {"after": last.seq if last else 0})
    assert seen.attrs["after"] == first.seq


def test_an_append_after_whose_attributes_fail_writes_nothing(pg_db: Database) -> None:
    audit = PgAuditStorage(pg_db, generate_audit_key())

    def broken(last: object) -> dict[str, object]:
        raise ValueError("cannot make the attributes")

    with pytest.raises(ValueError):
        audit.append_after("audit.checkpoint", broken)
    assert audit.tail(5) == []


def test_a_batcher_is_idle_only_while_no_batch_is_written_or_waiting() -> None:
    """What a joined write checks before it skips the batch (``PgAuditStorage.join``)."""
    log = _Log()
    batcher: Batcher[int, str] = Batcher(log.write)
    assert batcher.idle
    leader = threading.Thread(target=batcher.submit, args=(1,))
    leader.start()
    assert log.entered.wait(60)
    assert not batcher.idle  # a batch is being written
    follower = threading.Thread(target=batcher.submit, args=(2,))
    follower.start()
    _queued(batcher, 1)
    log.release.set()
    leader.join(60)
    follower.join(60)
    assert batcher.idle and log.batches == [[1], [2]]


def test_an_audit_entry_is_not_joined_while_the_process_has_a_batch_in_flight(
    pg_db: Database,
) -> None:
    log = PgAuditStorage(pg_db, generate_audit_key())
    log.append("persist", {"n": 0})  # the end is known now
    entered, release = threading.Event(), threading.Event()
    real = log._write_batch

    def slow(batch: Sequence[Request[object, object]]) -> None:
        entered.set()
        release.wait(60)
        real(batch)  # type: ignore[arg-type]

    log._batcher._write = slow  # type: ignore[assignment]
    writer = threading.Thread(target=log.append, args=("persist", {"n": 1}))
    writer.start()
    assert entered.wait(60)
    assert log.join("persist", {"n": 2}, 1, _entry_only(), memory=_ONE) is None  # (appending)
    release.set()
    writer.join(60)
    joined = log.join("persist", {"n": 2}, 1, _entry_only(), memory=_ONE)
    assert joined is not None and joined.row == (True, True, 1, 0)  # idle again, end known
    assert [entry.attrs.get("n") for entry in log.entries()] == [None, 0, 1, 2]  # (the anchor)
    assert verify_storage(log, log.key).ok


# -- joins: a store's statement with its entry, the joins of a process's threads batched ---------


def _join_at_once(
    log: PgAuditStorage, statements: list[JoinStatement], *, lock: int = 1
) -> list[Any]:
    """Join one entry per statement from a thread each: the first leads (held), the others
    queue behind it and are written together. Their outcomes (Joined, None or the error)."""
    held = HeldJoins(log)

    def join(n: int) -> Callable[[], Any]:
        return lambda: log.join(
            "persist", {"n": n}, lock + n, statements[n], memory=(f"agent-{n}", "")
        )

    got = held.at_once([join(n) for n in range(len(statements))])
    assert held.sizes == [1, len(statements) - 1]
    return got


def _numbers(log: PgAuditStorage) -> list[int]:
    return [int(entry.attrs["n"]) for entry in log.entries() if "n" in entry.attrs]


def test_joins_of_threads_at_once_are_one_transaction_each_entry_after_the_one_before(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PgAuditStorage(pg_db, generate_audit_key())
    log.append("persist", {"n": -1})  # the end is known now
    spy = Spy(pg_db, monkeypatch)
    got = _join_at_once(log, [_entry_only()] * 4)
    assert [joined.row for joined in got] == [(True, True, 1, 0)] * 4
    # Two transactions: the leader's own, then the three queued behind it, each
    # agent's lock in order and the chain's last.
    assert [len(locks) for locks in spy.locks] == [2, 4, 4, 4]
    assert spy.locks[1] == (2, 3, 4, log._lock_key)
    assert _numbers(log) == [-1, 0, *sorted(n for n in (1, 2, 3))]
    assert [joined.entry.seq for joined in got] == sorted(joined.entry.seq for joined in got)
    assert verify_storage(log, log.key).ok
    assert log.join("persist", {"n": 9}, 1, _entry_only(), memory=_ONE) is not None  # end known


def test_a_batch_of_joins_takes_its_locks_in_the_order_of_the_memories_not_of_the_keys(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure holding several locks takes an agent's own memory's before its
    subjects' (``_memory_locks``): a batch taking them in another order could meet
    it, each holding the lock the other waits for."""
    log = PgAuditStorage(pg_db, generate_audit_key())
    log.append("persist", {"n": -1})
    spy = Spy(pg_db, monkeypatch)
    held = HeldJoins(log)
    # (memory, key): the keys in the opposite order of the memories
    joins = [(("lead", ""), 99), (("b", ""), 10), (("a", "s1"), 20), (("a", ""), 30)]

    def join(n: int) -> Callable[[], Any]:
        memory, key = joins[n]
        return lambda: log.join("persist", {"n": n}, key, _entry_only(), memory=memory)

    got = held.at_once([join(n) for n in range(len(joins))])
    assert held.sizes == [1, 3]
    assert [joined.row for joined in got] == [(True, True, 1, 0)] * 4
    assert spy.locks[1] == (30, 20, 10, log._lock_key)
    assert verify_storage(log, log.key).ok


def test_joins_in_a_batch_that_cross_into_new_segments_open_each_with_its_anchor(
    pg_db: Database,
) -> None:
    """Half a day between entries, one segment a day: two joins of the batch begin a
    segment, so each writes the segment's anchor entry before its own, in its statement."""
    start = dt.datetime(2026, 1, 1, 6, tzinfo=dt.UTC)
    log = PgAuditStorage(
        pg_db, generate_audit_key(), period="day", clock=FixedClock(start, dt.timedelta(hours=12))
    )
    log.append("persist", {"n": -1})
    got = _join_at_once(log, [_entry_only()] * 4)
    assert [joined.row for joined in got] == [(True, True, 1, 0)] * 4
    assert len(log.segment_ids()) == 3
    assert _numbers(log) == [-1, 0, 1, 2, 3]
    assert verify_storage(log, log.key).ok


def test_a_join_whose_own_guard_fails_writes_nothing_and_those_after_it_go_the_usual_way(
    pg_db: Database,
) -> None:
    """The entries after it were sealed after its entry: they find the chain ending
    before it, write nothing, and say so (the store then appends them waiting)."""
    log = PgAuditStorage(pg_db, generate_audit_key())
    log.append("persist", {"n": -1})
    got = _join_at_once(log, [_entry_only(), _entry_only(), _entry_only("false"), _entry_only()])
    assert [joined.row for joined in got] == [
        (True, True, 1, 0),
        (True, True, 1, 0),
        (True, False, 0, 0),
        (False, True, 0, 0),
    ]
    assert _numbers(log) == [-1, 0, 1]
    # The end is the last entry written: the next join is written after it.
    joined = log.join("persist", {"n": 4}, 1, _entry_only(), memory=_ONE)
    assert joined is not None and joined.row == (True, True, 1, 0)
    assert _numbers(log) == [-1, 0, 1, 4]
    assert verify_storage(log, log.key).ok


def test_a_refused_batch_of_joins_writes_none_and_each_goes_the_usual_way(
    pg_db: Database,
) -> None:
    """A server error in one statement rolls back the batch: the others are not failed by
    it but told to append the usual way, where each meets its own fate; alone, it raises."""
    log = PgAuditStorage(pg_db, generate_audit_key())
    log.append("persist", {"n": -1})
    refused = _entry_only("1 / (SELECT count(*) FROM governed_memory.audit_head WHERE false) = 1")
    assert _join_at_once(log, [_entry_only(), _entry_only(), refused])[1:] == [None, None]
    assert _numbers(log) == [-1, 0]
    log.append("persist", {"n": 5})  # (the end known again)
    with pytest.raises(psycopg.errors.DivisionByZero):
        log.join("persist", {"n": 6}, 1, refused, memory=_ONE)
    assert _numbers(log) == [-1, 0, 5]
    assert verify_storage(log, log.key).ok


def test_a_join_after_another_writers_entry_writes_nothing_and_stops_guessing(
    pg_db: Database,
) -> None:
    log, other = PgAuditStorage(pg_db, generate_audit_key()), None
    log.append("persist", {"n": -1})
    other = PgAuditStorage(pg_db, log.key)  # another process's view of the same chain
    other.append("persist", {"n": -2})
    joined = log.join("persist", {"n": 0}, 1, _entry_only(), memory=_ONE)
    assert joined is not None and joined.row == (False, True, 0, 0)
    assert log.join("persist", {"n": 1}, 1, _entry_only(), memory=_ONE) is None  # backing off
    assert _numbers(log) == [-1, -2]


@pytest.mark.parametrize("committed", [True, False], ids=["lost-after-commit", "lost-before"])
def test_a_batch_of_joins_lost_after_the_send_reads_back_whether_each_entry_committed(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    log = PgAuditStorage(pg_db, generate_audit_key())
    log.append("persist", {"n": -1})
    held = HeldJoins(log)
    lose_the_next_send(pg_db, monkeypatch, committed=committed)
    held.release.set()
    joined = log.join("persist", {"n": 0}, 1, _entry_only(), memory=_ONE)
    assert joined is not None and joined.row is None
    assert joined.committed() is committed
    assert _numbers(log) == ([-1, 0] if committed else [-1])
    again = log.join("persist", {"n": 1}, 1, _entry_only(), memory=_ONE)
    assert again is None  # the end is read again


def test_a_forked_child_starts_with_no_batch_of_its_parent() -> None:
    """A fork while a thread leads a batch copies its queue and its held mutex: the
    child, whose copy of that thread does not exist, must still write its own."""
    log = _Log()
    batcher: Batcher[int, str] = Batcher(log.write)
    leader = threading.Thread(target=batcher.submit, args=(1,))
    leader.start()
    assert log.entered.wait(60)
    with batcher._mutex:  # (held, as another thread of the parent might at the fork)
        pid = os.fork()
        if pid == 0:  # the child: its submit leads a batch of its own
            signal.alarm(20)
            log.release.set()  # (the child's copy: its batch is not held)
            os._exit(0 if batcher.submit(2) == "done 2" else 1)
    _, status = os.waitpid(pid, 0)
    log.release.set()
    leader.join(60)
    assert os.waitstatus_to_exitcode(status) == 0


def test_batchers_share_one_fork_hook_and_a_dropped_one_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One hook per instance would grow for ever in a service building a Governance
    (and its audit log) per request: os.register_at_fork cannot unregister."""
    hooks: list[object] = []
    monkeypatch.setattr(os, "register_at_fork", lambda **kw: hooks.append(kw))
    batchers = [Batcher(_Log().write) for _ in range(50)]
    assert all(b in _batching._LIVE for b in batchers)
    refs = [weakref.ref(b) for b in batchers]
    del batchers
    gc.collect()
    assert [ref() for ref in refs] == [None] * 50  # (the set held none of them)
    assert hooks == []


def test_an_append_inside_a_transaction_is_not_queued_behind_a_leader_waiting_for_its_pool(
    pg_url: str, pg_db: Database
) -> None:
    """A thread holding a pooled connection (an agent's append creating a key records
    ``keys.create``) writes its entry alone: queued, it would wait for the batch's
    leader, which waits for a connection it holds (16 threads on a pool of 8 did)."""
    db = Database(pg_url, max_size=1, connect_timeout=3)
    try:
        log = PgAuditStorage(db, generate_audit_key())
        holding, appended = threading.Event(), threading.Event()
        real = log._write_batch
        errors: list[BaseException] = []

        def leading(batch: Sequence[Request[Any, Any]]) -> None:
            if batch[0].item[0] == "persist":  # the leader's batch (the holder's is alone)
                assert holding.wait(60)
                # (queued behind this batch, the holder would be in the queue now)
                while not appended.is_set() and not log._batcher._queue:
                    threading.Event().wait(0.005)
            real(batch)  # the leader's needs the pool's one connection

        log._batcher._write = leading  # type: ignore[assignment]

        def holder() -> None:
            try:
                with db.transaction("holding the pool's one connection"):
                    holding.set()
                    log.append("keys.create", {"n": 1})
                    appended.set()
            except BaseException as exc:
                errors.append(exc)

        def leader() -> None:
            try:
                log.append("persist", {"n": 2})
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=leader), threading.Thread(target=holder)]
        threads[0].start()
        while not log._batcher._leading:
            threading.Event().wait(0.005)
        threads[1].start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert sorted(int(e.attrs["n"]) for e in log.entries() if "n" in e.attrs) == [1, 2]
        assert verify_storage(log, log.key).ok
    finally:
        db.close()
