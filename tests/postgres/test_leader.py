"""PgLeadership across processes: exactly one leads, a killed leader is replaced, a dropped session leads no more."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing.connection import Connection

from pg_server import PgServer

from governed_memory._postgres import Database, PgLeadership

POLL = 0.05  # how often a candidate tries, as a scheduler's tick would


def _candidate(url: str, name: str, conn: Connection) -> None:
    """Try to lead every POLL seconds; report (pid, monotonic time) on becoming leader."""
    leadership = PgLeadership(Database(url), name)
    while True:
        if leadership.try_acquire():
            conn.send((os.getpid(), time.monotonic()))
            while leadership.held:
                time.sleep(POLL)
        time.sleep(POLL)


def test_one_of_two_processes_leads_and_a_killed_leader_is_replaced(pg_server: PgServer) -> None:
    ctx = multiprocessing.get_context("spawn")
    inbox, outbox = ctx.Pipe(duplex=False)
    url = pg_server.url("postgres")
    procs = [
        ctx.Process(target=_candidate, args=(url, "leader-test", outbox), daemon=True)
        for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    try:
        assert inbox.poll(60), "no candidate became leader"
        leader_pid, _ = inbox.recv()
        time.sleep(10 * POLL)  # both candidates have tried many times by now
        assert not inbox.poll(0), "a second process led while the first held the lock"
        killed = time.monotonic()
        os.kill(leader_pid, signal.SIGKILL)
        assert inbox.poll(30), "the surviving candidate never took over"
        successor, took_over = inbox.recv()
        assert successor != leader_pid
        assert {leader_pid, successor} == {p.pid for p in procs}
        takeover = took_over - killed
        print(f"takeover after kill -9: {takeover * 1000:.0f} ms (poll {POLL * 1000:.0f} ms)")
        assert takeover < 2.0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
            proc.join(30)


def test_a_leader_whose_session_was_dropped_leads_no_more(pg_server: PgServer) -> None:
    db = Database(pg_server.url("postgres"))
    holder, other = PgLeadership(db, "dropped"), PgLeadership(db, "dropped")
    assert holder.try_acquire()
    assert holder._conn is not None
    pid = holder._conn.info.backend_pid
    with db.dedicated() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        admin.execute("SELECT pg_sleep(0.2)")  # the backend has ended, and its locks with it
    assert not holder.held  # it does not keep believing it leads
    assert other.try_acquire()
    assert not holder.try_acquire()  # a new session of its own, refused while the other leads
    other.release()
    assert holder.try_acquire()
    holder.release()
    db.close()


def test_different_names_are_different_locks(pg_server: PgServer) -> None:
    db = Database(pg_server.url("postgres"))
    scheduler, purge = PgLeadership(db, "scheduler-x"), PgLeadership(db, "purge-x")
    assert scheduler.try_acquire() and purge.try_acquire()
    assert not PgLeadership(db, "scheduler-x").try_acquire()
    scheduler.release()
    purge.release()
    assert not scheduler.held and not purge.held
