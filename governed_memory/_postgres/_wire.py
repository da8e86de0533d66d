"""A transaction known in advance, sent in one write: the hot path of every audited append.

:meth:`Database.pipelined` sends the locks, the statements and one Sync, an
implicit transaction, in one round trip. psycopg's pipeline mode does that,
but flushes and polls after every statement (a lock and one statement cost three
``sendto`` and six ``poll`` calls) and converts and dumps each statement in
Python: with 4 writer processes on a 2-core machine, 0.25-0.36 ms of an audited
add's 0.66-0.99 ms of client CPU, about 0.2 ms once sent this way. :func:`send`
drives libpq's pipeline itself, through psycopg's public ``pq`` and ``adapt``
layers: every statement is queued, the Sync flushes them in one write, the
results are read as they come.

Placeholders are psycopg's: ``%s`` as psycopg chooses the format, ``%b`` in
binary. Every array goes as ``%b``, here and through psycopg alike: psycopg
writes an array's text form in Python, escaping each element with a regular
expression (an 80-entry audit batch took about 4 ms, a thousand 600-byte frames
about half a second), and its binary form in one pass.

Each statement is prepared on its connection the first time it is sent there
(the Parse travels in the same pipeline, so preparing costs no round trip),
keyed by its text and its parameters' types, as psycopg's own cache is; a
connection holds at most ``_MOST_PREPARED`` of ours, later ones are sent
unnamed. A server session that does not hold what this connection prepared
fails the transaction before anything commits, and it is sent again, prepared
anew: psycopg deallocates every prepared statement of a connection when it
rolls a transaction back there, and a ``DISCARD ALL`` does the same. A
connection that meets that ``_MOST_MISSES`` times (a pooler such as PgBouncer in
transaction mode, handing the client other server sessions) prepares nothing
more. Only an implicit transaction is sent again: inside one of the caller's,
the error is the caller's.

What the caller sees is what psycopg's pipeline gave: each statement's row count
and first row, loaded by the connection's own loaders, psycopg's errors (the
server's, by SQLSTATE, or ``OperationalError`` for a lost connection, after
which ``conn.broken`` is true). An interrupt mid-transaction closes the
connection: its state is unknown, so the pool must not hand it out again.
"""

from __future__ import annotations

import functools
import hashlib
import re
import select
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import psycopg
    from psycopg.adapt import PyFormat

__all__ = ["Sent", "send"]

_MOST_PREPARED = 64  # of our statements prepared on one connection (psycopg's own: 100)
# The server session does not hold the prepared statements this connection thinks it
# does: invalid_sql_statement_name (forgotten: a rollback through psycopg, DISCARD ALL),
# duplicate_prepared_statement (a pooler in front handed the client another session).
_FORGOTTEN, _HELD = "26000", "42P05"
_NOT_AS_PREPARED = (_FORGOTTEN, _HELD)
_PLACEHOLDER = re.compile(r"%(.)", re.DOTALL)
_FORMATS = frozenset("sb")

# Per connection: the prepared name of each (statement, parameter types) sent there.
_prepared: weakref.WeakKeyDictionary[Any, dict[tuple[str, tuple[int, ...]], bytes]] = (
    weakref.WeakKeyDictionary()
)

# How often each connection found its session holding a name it had not prepared there;
# from _MOST_MISSES on, it prepares no more.
_misses: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_unprepared: weakref.WeakSet[Any] = weakref.WeakSet()
_MOST_MISSES = 3
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE


class _Queued(NamedTuple):
    """One statement ready to send: its query, parameters, their types and formats, the
    prepared name it runs as (None: unnamed), and whether its Parse goes first."""

    key: tuple[str, tuple[int, ...]]
    query: bytes
    values: Sequence[Any]
    types: tuple[int, ...]
    formats: Sequence[Any] | None
    name: bytes | None
    parse: bool


class Sent(NamedTuple):
    """What one statement of a sent transaction returned."""

    rowcount: int
    row: tuple[Any, ...] | None


@functools.lru_cache(maxsize=1024)
def _numbered(sql: str) -> tuple[bytes, tuple[PyFormat, ...]]:
    """``sql`` with psycopg's placeholders as PostgreSQL's ``$1, $2...``; each one's format.

    ``%s`` is dumped as psycopg chooses, ``%b`` in binary (arrays: psycopg dumps an
    array's text in Python, escaping each element, its binary form in one pass).
    """
    from psycopg.adapt import PyFormat

    formats: list[PyFormat] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) == "%":
            return "%"
        if match.group(1) not in _FORMATS:
            raise ValueError(
                f"placeholder %{match.group(1)} in {sql!r}: only %s and %b are supported"
            )
        formats.append(PyFormat.BINARY if match.group(1) == "b" else PyFormat.AUTO)
        return f"${len(formats)}"

    return _PLACEHOLDER.sub(number, sql).encode("utf-8"), tuple(formats)


def send(
    conn: psycopg.Connection[Any], statements: Sequence[tuple[str, Sequence[Any]]]
) -> list[Sent]:
    """Run ``statements`` on ``conn`` (autocommit, idle) as one implicit transaction, one write.

    Raises:
        psycopg.Error: the server refused a statement (the transaction rolled
            back whole), or the connection was lost (the outcome unknown when it
            was lost after the write).
        ValueError: a statement's placeholders and parameters do not match
            (nothing was sent).
    """
    try:
        return _send(conn, statements, prepare=conn not in _unprepared)
    except Exception as exc:
        state = getattr(exc, "sqlstate", None)
        if (
            state not in _NOT_AS_PREPARED
            or conn.broken
            or conn.info.transaction_status != _IDLE  # (in a transaction of the caller's)
        ):
            raise
        # The Sync rolled the whole implicit transaction back: nothing ran. Forgotten
        # statements are prepared anew (psycopg deallocates every statement of a
        # connection when it rolls one back there). A name this session holds already
        # means another session held the rest: sent unnamed (its Parse would fail
        # again), and from the _MOST_MISSES-th time on, nothing more is prepared.
        _prepared.pop(conn, None)
        forgotten = state == _FORGOTTEN
        if not forgotten:
            misses = _misses[conn] = _misses.get(conn, 0) + 1
            if misses >= _MOST_MISSES:
                _unprepared.add(conn)
        return _send(conn, statements, prepare=forgotten and conn not in _unprepared)


@functools.lru_cache(maxsize=1024)
def _name(key: tuple[str, tuple[int, ...]]) -> bytes:
    return b"gm_" + hashlib.sha256(repr(key).encode()).hexdigest()[:24].encode()


def _send(
    conn: psycopg.Connection[Any], statements: Sequence[tuple[str, Sequence[Any]]], *, prepare: bool
) -> list[Sent]:
    from psycopg import errors, pq
    from psycopg.adapt import Transformer

    pgconn = conn.pgconn
    names = _prepared.setdefault(conn, {})
    transformer = Transformer(conn)
    queued: list[_Queued] = []
    parsing: set[tuple[str, tuple[int, ...]]] = set()
    for sql, params in statements:
        query, wanted = _numbered(sql)
        if len(wanted) != len(params):
            raise ValueError(
                f"{len(params)} parameters for the {len(wanted)} placeholders of {sql!r}"
            )
        values = transformer.dump_sequence(params, wanted)
        types, formats = tuple(transformer.types or ()), transformer.formats
        key = (sql, types)
        name, parse = (names.get(key), False) if prepare else (None, False)
        if name is None and prepare and len(names) + len(parsing) < _MOST_PREPARED:
            name = _name(key)
            parse = key not in parsing  # (a statement sent twice is parsed once)
            parsing.add(key)
        queued.append(_Queued(key, query, values, types, formats, name, parse))
    pgconn.enter_pipeline_mode()
    try:
        for each in queued:
            if each.parse:
                assert each.name is not None
                pgconn.send_prepare(each.name, each.query, param_types=each.types)
            if each.name is None:
                pgconn.send_query_params(
                    each.query, each.values, param_types=each.types, param_formats=each.formats
                )
            else:
                pgconn.send_query_prepared(each.name, each.values, param_formats=each.formats)
        pgconn.pipeline_sync()  # (libpq flushes what it can: the rest below)
        _flush(pgconn)
        sent, failure = [], None
        for each in queued:
            results = [_result(pgconn), _result(pgconn)] if each.parse else [_result(pgconn)]
            if each.parse and each.name and results[0].status == pq.ExecStatus.COMMAND_OK:
                names[each.key] = each.name
            for result in results:
                if result.status == pq.ExecStatus.FATAL_ERROR and failure is None:
                    failure = errors.error_from_result(result, encoding=conn.info.encoding)
            if failure is not None:
                continue  # (what comes after the failure was not run: PIPELINE_ABORTED)
            result = results[-1]
            if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
                failure = errors.InterfaceError(
                    f"unexpected result {result.status!r} of {each.key[0]!r}"
                )
                continue
            row = None
            if result.ntuples:
                transformer.set_pgresult(result)
                row = transformer.load_row(0, tuple)
            sent.append(Sent(result.command_tuples or 0, row))
        synced = _result(pgconn)
        if synced.status != pq.ExecStatus.PIPELINE_SYNC:  # pragma: no cover (libpq's protocol)
            raise errors.InterfaceError(f"expected the pipeline's Sync, got {synced.status!r}")
        pgconn.exit_pipeline_mode()
    except BaseException:
        if pgconn.status != pq.ConnStatus.BAD:
            conn.close()  # mid-pipeline, its state unknown: the pool discards a closed one
        raise
    if failure is not None:
        raise failure
    return sent


def _result(pgconn: Any) -> Any:
    """The next result of the pipeline (a statement's, or the Sync's), waiting for it."""
    while True:
        while pgconn.is_busy():
            _wait(pgconn.socket, write=False)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is not None:  # (None ends each statement's results)
            return result


def _flush(pgconn: Any) -> None:
    while pgconn.flush():
        _wait(pgconn.socket, write=True)


def _wait(fd: int, *, write: bool) -> None:
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    poller.poll()
