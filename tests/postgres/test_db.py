"""Connections and their loss (_postgres/_db.py): what an error says was committed, and when.

A connection lost before ``COMMIT`` was sent: nothing was committed, retrying is
safe. Lost while committing: the server may have committed before the loss, so the
outcome is unknown and the error says to check before retrying.
"""

from __future__ import annotations

import psycopg
import pytest

from governed_memory import DatabaseError
from governed_memory._postgres import Database
from governed_memory._postgres._db import translate

WHERE = "db.example:5432/gm"


def _terminate(url: str, pid: int) -> None:
    """End backend ``pid`` from another connection, waiting until it is gone."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))


def _lost_connection_error(url: str) -> psycopg.OperationalError:
    """The exception psycopg raises on a connection whose backend was terminated."""
    with psycopg.connect(url, autocommit=True) as victim:
        _terminate(url, victim.info.backend_pid)
        with pytest.raises(psycopg.OperationalError) as caught:
            victim.execute("SELECT 1")
    return caught.value


def test_a_connection_lost_while_committing_leaves_the_outcome_unknown(pg_url: str) -> None:
    exc = _lost_connection_error(pg_url)
    error = translate(exc, where=WHERE, doing="appending", committing=True)
    assert "outcome of the last statement is unknown" in str(error)
    assert "check what is stored before retrying" in str(error)
    assert "nothing was committed" not in str(error)
    assert error.retryable is False
    assert WHERE in str(error) and len(str(error).splitlines()) == 1


def test_a_connection_lost_before_the_commit_committed_nothing(pg_url: str) -> None:
    error = translate(_lost_connection_error(pg_url), where=WHERE, doing="appending")
    assert "nothing was committed" in str(error)
    assert error.retryable is True


def test_a_refused_statement_at_commit_is_not_an_unknown_outcome() -> None:
    """A statement the server refused (it carries its SQLSTATE) was rolled back, commit or not."""
    refused = psycopg.errors.SerializationFailure("could not serialize access")
    error = translate(refused, where=WHERE, doing="appending", committing=True)
    assert "nothing was committed" in str(error)


def test_a_transaction_whose_connection_dies_before_commit_reports_the_unknown_outcome(
    pg_schema_url: str,
) -> None:
    db = Database(pg_schema_url)
    try:
        with pytest.raises(DatabaseError) as caught, db.transaction("writing the probe") as conn:
            conn.execute("CREATE TABLE probe (n int)")
            _terminate(pg_schema_url, conn.info.backend_pid)  # gone before COMMIT reaches it
        assert "outcome of the last statement is unknown" in str(caught.value)
        assert caught.value.retryable is False
        with db.transaction("reading the probe") as conn:  # the pool replaced the dead connection
            found = conn.execute("SELECT to_regclass('probe') IS NOT NULL").fetchone()
        assert found == (False,)  # here the loss came first: nothing was committed
    finally:
        db.close()


def test_a_statement_whose_connection_dies_says_nothing_was_committed(pg_schema_url: str) -> None:
    db = Database(pg_schema_url)
    try:
        with pytest.raises(DatabaseError) as caught, db.transaction("writing the probe") as conn:
            _terminate(pg_schema_url, conn.info.backend_pid)
            conn.execute("CREATE TABLE probe (n int)")
        assert "nothing was committed" in str(caught.value)
        assert caught.value.retryable is True
    finally:
        db.close()


def test_pooled_connections_the_server_dropped_are_replaced_without_an_error(
    pg_schema_url: str,
) -> None:
    """A restart ends every pooled session; the next calls get fresh ones (first statement retried)."""
    db = Database(pg_schema_url, min_size=2, max_size=2)
    try:
        pids = []
        with db.transaction() as one, db.transaction() as two:  # two: outside the pool (nested)
            pids.append(one.info.backend_pid)
            del two
        with db.transaction("listing") as conn:
            pids.append(conn.info.backend_pid)
        for pid in set(pids):
            _terminate(pg_schema_url, pid)
        with db.transaction("writing after the loss", lock=1) as conn:
            conn.execute("CREATE TABLE probe (n int)")
        assert db.read("reading", lambda c: c.execute("SELECT count(*) FROM probe").fetchone()) == (
            0,
        )
    finally:
        db.close()


# -- one-round-trip transactions (Database.pipelined) -----------------------------------------


def _pipelined_table(db: Database) -> None:
    with db.transaction("making the table") as conn:
        conn.execute("CREATE TABLE sent (n integer PRIMARY KEY)")


def _sent(db: Database) -> list[int]:
    rows = db.read("reading", lambda conn: conn.execute("SELECT n FROM sent ORDER BY n").fetchall())
    return [int(row[0]) for row in rows]


def test_a_pipelined_transaction_commits_all_its_statements_and_counts_each(pg_url: str) -> None:
    db = Database(pg_url, min_size=0)
    try:
        _pipelined_table(db)
        counts = db.pipelined(
            "inserting",
            [
                ("INSERT INTO sent VALUES (1), (2)", ()),
                ("INSERT INTO sent SELECT 3 WHERE false", ()),
            ],
            lock=7,
        )
        assert counts == [2, 0]
        rows = db.pipelined_rows(
            "inserting",
            [
                ("WITH i AS (INSERT INTO sent VALUES (4) RETURNING 1) SELECT count(*) FROM i", ()),
                ("SELECT %s::int + 1", (5,)),
            ],
        )
        assert rows == [(1,), (6,)]
        assert _sent(db) == [1, 2, 4]
    finally:
        db.close()


def test_a_pipelined_transaction_whose_last_statement_fails_commits_none_of_it(
    pg_url: str,
) -> None:
    """No BEGIN is sent: the statements up to the pipeline's Sync are one implicit
    transaction, rolled back whole when one fails, and the connection is usable after."""
    db = Database(pg_url, min_size=0, max_size=1)
    try:
        _pipelined_table(db)
        with pytest.raises(psycopg.errors.UniqueViolation):  # (its caller says what failed)
            db.pipelined(
                "inserting",
                [("INSERT INTO sent VALUES (1)", ()), ("INSERT INTO sent VALUES (1)", ())],
                lock=7,
            )
        assert _sent(db) == []
        status = db.read("checking", lambda conn: conn.info.transaction_status)
        assert status == psycopg.pq.TransactionStatus.IDLE
        assert db.pipelined("inserting", [("INSERT INTO sent VALUES (5)", ())]) == [1]
        assert _sent(db) == [5]
    finally:
        db.close()


def test_a_pooled_connection_the_server_ended_while_idle_is_replaced_before_the_send(
    pg_url: str,
) -> None:
    """Nothing of the transaction was sent on it, so its outcome is known: it runs once,
    on a fresh connection, instead of coming back as lost (None)."""
    db = Database(pg_url, min_size=0, max_size=1)
    try:
        _pipelined_table(db)
        pid = db.read("the pooled session", lambda conn: conn.info.backend_pid)
        _terminate(pg_url, pid)
        assert db.pipelined("inserting", [("INSERT INTO sent VALUES (1)", ())], lock=7) == [1]
        assert db.read("the pooled session", lambda conn: conn.info.backend_pid) != pid
        assert _sent(db) == [1]
    finally:
        db.close()


def test_a_pipelined_transaction_holds_its_lock_until_it_commits(pg_url: str) -> None:
    """The advisory lock is transaction-scoped: gone once the implicit transaction ended."""
    db = Database(pg_url, min_size=0, max_size=1)
    try:
        _pipelined_table(db)
        mine = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )
        assert db.pipelined_rows("inserting", [(mine, ())], lock=(7, 8, 9)) == [(3,)]
        db.pipelined("inserting", [("INSERT INTO sent VALUES (1)", ())], lock=(7, 8))
        with psycopg.connect(pg_url, autocommit=True) as other:
            held = other.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            ).fetchone()
            assert held == (0,)
            taken = other.execute("SELECT pg_try_advisory_xact_lock(7)").fetchone()
            assert taken == (True,)
    finally:
        db.close()
