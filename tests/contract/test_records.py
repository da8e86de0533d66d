"""The RecordLog and RecordDocument contracts, over every backend in backends.py.

Consent and erasure progress are record logs; holds, erasure state and the
scheduled erasures are documents. The tests use only the protocol's methods
(governed_memory._protocols.RecordLog / RecordDocument), plus ``open`` to read a
stored record's plaintext, which every log offers to the registries that
decide on stored records.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from backends import OpenLog

from governed_memory import StorageError
from governed_memory._protocols import RecordDocument, RecordLog


def _log(open_log: OpenLog) -> RecordLog:
    log: RecordLog = open_log()
    return log


def _document(open_document: OpenLog) -> RecordDocument:
    document: RecordDocument = open_document()
    return document


def _bodies(log: RecordLog) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "v"} for r in log.read()]


# -- record logs -----------------------------------------------------------------------


def test_a_missing_log_reads_empty(open_log: OpenLog) -> None:
    log = _log(open_log)
    assert list(log.read()) == []
    assert log.rewrite(lambda raw: None) is False  # nothing to rewrite, nothing created
    assert list(_log(open_log).read()) == []


def test_appended_records_read_back_in_order_in_every_reader(open_log: OpenLog) -> None:
    log = _log(open_log)
    records = [{"n": n, "text": f"record {n} — ünïcödé"} for n in range(5)]
    for record in records:
        log.append(record)
    assert _bodies(log) == records
    assert _bodies(_log(open_log)) == records  # another process's reader


def test_a_reader_sees_what_another_writer_appended_since(open_log: OpenLog) -> None:
    reader, writer = _log(open_log), _log(open_log)
    writer.append({"n": 1})
    assert _bodies(reader) == [{"n": 1}]
    writer.append({"n": 2})
    assert _bodies(reader) == [{"n": 1}, {"n": 2}]


def _holds(guard: Any) -> bool:
    """Whether a write guard is true now, checked in its database as a write would."""

    def query(conn: Any) -> bool:
        return bool(conn.execute(f"SELECT {guard.sql}", guard.params).fetchone()[0])

    held: bool = guard.database.read("checking a write guard", query)
    return held


def test_a_cached_read_and_its_guard_hold_until_any_writer_changes_the_log(
    open_log: OpenLog,
) -> None:
    """``cached`` reads nothing; a guard (a database place's) is false after any change.

    A place may give none (the file place: the consent gate then reads before
    each write, tests/records/test_consent.py); one that does must not outlive a change.
    """
    reader, writer = _log(open_log), _log(open_log)
    writer.append({"n": 1})
    records, _, guard = reader.cached()
    assert list(records) == [] and guard is None  # nothing read yet
    reader.read()
    records, generation, guard = reader.cached()
    assert [{k: v for k, v in r.items() if k != "v"} for r in records] == [{"n": 1}]
    changes: list[Any] = [
        lambda: writer.append({"n": 2}),
        lambda: writer.rewrite(lambda raw: raw),  # (rewritten the same: nothing changed)
        lambda: writer.rewrite(lambda raw: None),
        writer.delete,
    ]
    for change in changes:
        reader.read()
        records, generation, guard = reader.cached()
        assert guard is None or _holds(guard)
        unchanged = change() is False
        assert guard is None or _holds(guard) is unchanged
        assert reader.cached()[2] == guard  # (still cached: nothing was read)
    assert reader.read() == [] and reader.cached()[1] >= generation


def test_rewrite_drops_and_keeps_records_atomically(open_log: OpenLog) -> None:
    log = _log(open_log)
    for n in range(4):
        log.append({"n": n})
    opener: Any = log

    def drop_odd(raw: bytes) -> bytes | None:
        import json

        return None if json.loads(opener.open(raw))["n"] % 2 else raw

    assert log.rewrite(drop_odd) is True
    assert _bodies(_log(open_log)) == [{"n": 0}, {"n": 2}]
    assert log.rewrite(lambda raw: raw) is False  # nothing changed


def test_a_failing_rewrite_changes_nothing(open_log: OpenLog) -> None:
    log = _log(open_log)
    log.append({"n": 1})
    log.append({"n": 2})

    def fail(raw: bytes) -> bytes | None:
        raise ValueError("a decision failed half-way")

    with pytest.raises(ValueError):
        log.rewrite(fail)
    assert _bodies(_log(open_log)) == [{"n": 1}, {"n": 2}]


def test_appends_wait_while_the_log_is_locked_and_are_kept(open_log: OpenLog) -> None:
    log, other = _log(open_log), _log(open_log)
    log.append({"n": 0})
    started, done = threading.Event(), threading.Event()

    def append() -> None:
        started.set()
        other.append({"n": 1})
        done.set()

    with log.locked():
        thread = threading.Thread(target=append)
        thread.start()
        started.wait(5)
        assert not done.wait(0.2)  # the writer waits for the lock
        assert _bodies(log) == [{"n": 0}]
    thread.join(10)
    assert _bodies(_log(open_log)) == [{"n": 0}, {"n": 1}]


def test_no_record_is_lost_to_concurrent_writers(open_log: OpenLog) -> None:
    def write(n: int) -> None:
        log = _log(open_log)
        for i in range(10):
            log.append({"w": n, "i": i})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    got = sorted((r["w"], r["i"]) for r in _log(open_log).read())
    assert got == sorted((n, i) for n in range(4) for i in range(10))


def test_delete_removes_every_record(open_log: OpenLog) -> None:
    log = _log(open_log)
    log.append({"n": 1})
    log.delete()
    assert list(_log(open_log).read()) == []
    log.delete()  # deleting nothing is not an error
    log.append({"n": 2})
    assert _bodies(_log(open_log)) == [{"n": 2}]


# -- documents -------------------------------------------------------------------------


def test_a_missing_document_reads_as_none(open_document: OpenLog) -> None:
    document = _document(open_document)
    assert document.read() is None
    assert document.delete() is False


def test_a_written_document_is_read_back_whole_by_every_reader(open_document: OpenLog) -> None:
    document = _document(open_document)
    body = {"holds": [{"id": "hold-1", "subject": "S-1", "reason": "litigation — case 7"}]}
    with document.locked():
        document.write(body)
    again = _document(open_document).read()
    assert again is not None
    assert {k: v for k, v in again.items() if k != "v"} == body


def test_a_new_write_replaces_the_document(open_document: OpenLog) -> None:
    reader, writer = _document(open_document), _document(open_document)
    writer.write({"n": 1})
    assert (reader.read() or {}).get("n") == 1
    writer.write({"n": 2, "more": True})
    got = reader.read()
    assert got is not None and got.get("n") == 2 and got.get("more") is True


def test_concurrent_read_modify_write_under_the_lock_loses_no_update(
    open_document: OpenLog,
) -> None:
    _document(open_document).write({"count": 0})

    def bump() -> None:
        document = _document(open_document)
        for _ in range(10):
            with document.locked():
                current = document.read()
                assert current is not None
                document.write({"count": current["count"] + 1})

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    final = _document(open_document).read()
    assert final is not None and final["count"] == 40


def test_delete_removes_the_document(open_document: OpenLog) -> None:
    document = _document(open_document)
    document.write({"n": 1})
    assert document.delete() is True
    assert _document(open_document).read() is None


def test_a_damaged_document_is_an_error_not_an_empty_one(open_document: OpenLog) -> None:
    """A backend that cannot read what it stored says so; it never answers 'nothing'.

    The damage is done the file backend's way (a database backend overwrites its row).
    """
    document: Any = _document(open_document)
    document.write({"n": 1})
    document.path.write_bytes(b"\x00not json")
    with pytest.raises(StorageError):
        _document(open_document).read()
