"""One write per transaction (_postgres/_wire.py): prepared once per connection, the same
results and errors as psycopg's own pipeline, and a connection left usable or closed."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

import psycopg
import pytest

from governed_memory._postgres import _wire
from governed_memory._postgres._wire import Sent, send

_INSERT = "INSERT INTO sent VALUES (%s, %s)"


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE sent (n integer PRIMARY KEY, note text)")
        yield conn


def _ours(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM pg_prepared_statements WHERE name LIKE 'gm\\_%' ORDER BY name"
    ).fetchall()
    return [str(row[0]) for row in rows]


def _rows(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    return [int(row[0]) for row in conn.execute("SELECT n FROM sent ORDER BY n").fetchall()]


def test_a_transaction_returns_each_statements_count_and_first_row_loaded(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    when = _dt.datetime(2026, 12, 7, 8, 0, tzinfo=_dt.UTC)
    sent = send(
        conn,
        [
            ("SELECT pg_advisory_xact_lock(%s)", (7,)),
            ("INSERT INTO sent VALUES (%s, %s), (%s, %s)", (1, "a", 2, "b")),
            (
                "SELECT %s::bool, %s::bigint, %s::bytea, %s::timestamptz",
                (True, 2**40, b"\0x", when),
            ),
            ("SELECT 100 %% 7", ()),
        ],
    )
    assert sent[1] == Sent(2, None)
    assert sent[2] == Sent(1, (True, 2**40, b"\0x", when))
    assert sent[3] == Sent(1, (2,))
    assert _rows(conn) == [1, 2]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_each_statement_is_prepared_once_per_connection_and_reused(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    send(conn, [(_INSERT, (1, "a")), (_INSERT, (2, "b"))])  # (twice in one: parsed once)
    send(conn, [(_INSERT, (3, "c"))])
    assert len(_ours(conn)) == 1
    assert _rows(conn) == [1, 2, 3]


def test_a_failing_statement_rolls_back_the_whole_transaction_and_leaves_the_connection_usable(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    with pytest.raises(psycopg.errors.UniqueViolation):
        send(conn, [(_INSERT, (1, "a")), (_INSERT, (1, "again")), ("SELECT 1", ())])
    assert _rows(conn) == []
    assert send(conn, [(_INSERT, (1, "a"))]) == [Sent(1, None)]
    assert _rows(conn) == [1]


def test_a_statement_the_server_cannot_parse_is_reported_and_not_taken_as_prepared(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    for _ in range(2):  # (the second time too: a syntax error, not a duplicate name)
        with pytest.raises(psycopg.errors.SyntaxError):
            send(conn, [("INSERT INTO sent VALUES (1, 'a')", ()), ("SELEC %s", (1,))])
    assert _rows(conn) == []
    assert len(_ours(conn)) == 1  # (the INSERT's Parse ran before the failure)


def test_prepared_statements_the_server_forgot_are_sent_again_and_run_once(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    send(conn, [(_INSERT, (1, "a"))])
    conn.execute("DEALLOCATE ALL")
    assert send(conn, [(_INSERT, (2, "b"))]) == [Sent(1, None)]
    assert _rows(conn) == [1, 2]
    assert len(_ours(conn)) == 1  # (prepared again)
    assert send(conn, [(_INSERT, (3, "c"))]) == [Sent(1, None)]
    assert _rows(conn) == [1, 2, 3]


def test_a_rollback_through_psycopg_deallocating_everything_costs_nothing_but_a_resend(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """psycopg runs DEALLOCATE ALL when it rolls back a connection where it prepared
    statements of its own: ours go too, and are prepared again."""
    send(conn, [(_INSERT, (1, "a"))])
    for n in range(2, 3 + _wire._MOST_MISSES):  # (each time: not counted as a miss)
        for k in range(6):  # (psycopg prepares a statement it ran 5 times)
            conn.execute("SELECT %s::int", (k,))
        conn.execute("BEGIN")
        conn.rollback()
        assert len(_ours(conn)) == 0
        assert send(conn, [(_INSERT, (n, "b"))]) == [Sent(1, None)]
    assert _rows(conn) == [1, 2, 3, 4, 5]
    assert len(_ours(conn)) == 1
    assert conn not in _wire._unprepared


def test_inside_a_transaction_of_the_callers_a_forgotten_statement_is_the_callers_error(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    send(conn, [(_INSERT, (1, "a"))])
    conn.execute("DEALLOCATE ALL")
    conn.execute("BEGIN")
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        send(conn, [(_INSERT, (2, "b")), ("COMMIT", ())])
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    conn.execute("ROLLBACK")
    assert _rows(conn) == [1]


def test_past_the_limit_statements_are_sent_unnamed(
    conn: psycopg.Connection[tuple[object, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_wire, "_MOST_PREPARED", 3)
    for n in range(6):
        assert send(conn, [(f"SELECT {n} + %s", (1,))]) == [Sent(1, (n + 1,))]
    assert len(_ours(conn)) == 3


def test_b_placeholders_send_arrays_in_binary_with_every_byte_and_null_kept(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    when = _dt.datetime(2026, 12, 7, 8, 0, tzinfo=_dt.UTC)
    frames = [bytes(range(256)), b'\\"{},NULL', b"", None]
    sent = send(
        conn,
        [
            (
                "SELECT %b::bytea[], %b::integer[], %b::timestamptz[], %b::text[]",
                (
                    frames,
                    [0, 2**31 - 1],
                    [when, None],
                    ['a"b', "{c,d}", "NULL"],
                ),
            ),
            ("SELECT %b::bigint[], %b::bytea[], %s::text", ([], [None, None], "%b")),
            ("SELECT count(*) FROM unnest(%b::integer[], %b::bytea[])", ([1, 2], [b"x", b"y"])),
        ],
    )
    assert sent[0].row == (frames, [0, 2**31 - 1], [when, None], ['a"b', "{c,d}", "NULL"])
    assert sent[1].row == ([], [None, None], "%b")
    assert sent[2].row == (2,)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_placeholders_and_parameters_that_do_not_match_send_nothing(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    with pytest.raises(ValueError, match="2 parameters for the 1 placeholders"):
        send(conn, [("INSERT INTO sent VALUES (1, 'a')", ()), ("SELECT %s", (1, 2))])
    with pytest.raises(ValueError, match="only %s and %b are supported"):
        send(conn, [("SELECT %d", (1,))])
    assert _rows(conn) == []
    assert send(conn, [("SELECT 1", ())]) == [Sent(1, (1,))]


def test_a_lost_connection_raises_operational_error_and_shows_broken(
    conn: psycopg.Connection[tuple[object, ...]], pg_url: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (conn.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError):
        send(conn, [("INSERT INTO sent VALUES (1, 'a')", ())])
    assert conn.broken


def test_an_interrupt_mid_transaction_closes_the_connection(
    conn: psycopg.Connection[tuple[object, ...]], pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its results unread, its state unknown, the connection must not be used again: the
    pool discards a closed one. What was sent still runs whole: the Sync had gone out."""

    def interrupted(fd: int, *, write: bool) -> None:
        raise KeyboardInterrupt

    backend = conn.info.backend_pid
    monkeypatch.setattr(_wire, "_wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        send(conn, [("SELECT pg_sleep(0.2)", ()), ("INSERT INTO sent VALUES (1, 'a')", ())])
    assert conn.closed
    with psycopg.connect(pg_url, autocommit=True) as other:
        gone = "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = %s)"
        for _ in range(100):
            if other.execute(gone, (backend,)).fetchone() == (True,):
                break
            other.execute("SELECT pg_sleep(0.05)")
        assert other.execute("SELECT n FROM sent").fetchall() == [(1,)]


def test_a_session_that_already_holds_the_name_is_answered_unprepared(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """A pooler in front may hand the client another server session, one where the
    name was prepared before: the Parse fails, and the transaction runs unprepared."""
    send(conn, [(_INSERT, (1, "a"))])
    _wire._prepared.pop(conn)  # (as if this session were another's)
    assert send(conn, [(_INSERT, (2, "b")), ("SELECT count(*) FROM sent", ())]) == [
        Sent(1, None),
        Sent(1, (2,)),
    ]
    assert _rows(conn) == [1, 2]
    assert _rows(conn) == [1, 2]


def test_a_connection_that_keeps_meeting_other_sessions_prepares_no_more(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    send(conn, [(_INSERT, (1, "a"))])
    for n in range(2, 2 + _wire._MOST_MISSES):
        _wire._prepared.pop(conn)  # (as if each send met another session)
        send(conn, [(_INSERT, (n, "b"))])
    assert conn in _wire._unprepared
    conn.execute("DEALLOCATE ALL")
    send(conn, [(_INSERT, (9, "c"))])  # (unnamed: no Parse, nothing to miss)
    assert _ours(conn) == []
    assert _rows(conn) == [1, 2, 3, 4, 9]
