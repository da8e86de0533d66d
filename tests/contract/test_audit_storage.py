"""Contract of the audit storage seam (AuditStorage), run over every implementation.

A backend joins by appending a ``pytest.param`` to ``AUDIT_STORAGES``: a
factory that opens the storage on the backing ``tmp_path`` names (called again,
it must open the same log, as a second process would).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from backends import AUDIT_STORAGE_BACKENDS

from governed_memory._audit import GENESIS, AuditEvent, AuditKey, AuditLog
from governed_memory._errors import ConfigurationError, NotFoundError
from governed_memory._protocols import AuditStorage

KEY = AuditKey(bytes(range(32)))
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)

Opener = Callable[[], AuditStorage]


def _file_log(tmp_path: Path) -> Opener:
    return lambda: AuditLog(tmp_path / "audit", KEY, period="day", fsync=False)


AUDIT_STORAGES = [pytest.param(_file_log, id="file"), *AUDIT_STORAGE_BACKENDS]


@pytest.fixture(params=AUDIT_STORAGES)
def open_log(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    opener: Opener = request.param(tmp_path)
    return opener


def _fill(log: AuditStorage, days: int, per_day: int = 2) -> None:
    for day in range(days):
        for i in range(per_day):
            log.append("persist", {"n": day * per_day + i}, at=T0 + day * DAY)


def test_an_empty_log_has_no_entries_head_or_segments(open_log: Opener) -> None:
    log = open_log()
    assert list(log.entries()) == []
    assert list(log.tail(5)) == []
    assert log.head() is None
    assert log.segment_ids() == []


def test_append_returns_the_entry_it_stored(open_log: Opener) -> None:
    log = open_log()
    entry = log.append("persist", {"outcome": "ok"}, at=T0)
    assert entry.event == "persist"
    assert dict(entry.attrs) == {"outcome": "ok"}
    assert [e.hash for e in log.entries()][-1] == entry.hash
    assert entry.to_dict()["seq"] == entry.seq


def test_entries_form_one_chain_in_order(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=3)
    entries = list(log.entries())
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    assert entries[0].prev == GENESIS
    assert all(b.prev == a.hash for a, b in itertools.pairwise(entries))


def test_tail_is_the_newest_entries_oldest_first(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=2)
    entries = list(log.entries())
    assert [e.seq for e in log.tail(3)] == [e.seq for e in entries[-3:]]
    assert list(log.tail(0)) == []
    assert len(log.tail(1000)) == len(entries)


def test_the_head_names_the_newest_entry_and_its_segment(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=2)
    last = list(log.entries())[-1]
    head = log.head()
    assert head is not None
    assert (head.seq, head.hash) == (last.seq, last.hash)
    assert head.segment == log.segment_ids()[-1]


def test_segments_are_named_by_id_and_hold_the_chain_between_them(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=3)
    ids = log.segment_ids()
    assert len(ids) == 3
    joined = [e.hash for sid in ids for e in log.segment_entries(sid)]
    assert joined == [e.hash for e in log.entries()]


def test_an_unknown_segment_id_is_refused(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=1)
    with pytest.raises(NotFoundError, match="not a segment"):
        log.segment_entries("no-such-segment")


def test_another_instance_continues_the_same_chain(open_log: Opener) -> None:
    first = open_log()
    a = first.append("persist", {}, at=T0)
    first.close()
    second = open_log()
    b = second.append("persist", {}, at=T0)
    assert (b.seq, b.prev) == (a.seq + 1, a.hash)
    assert [e.hash for e in open_log().entries()][-2:] == [a.hash, b.hash]


def test_expired_segments_are_the_oldest_never_the_newest(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=3)
    ids = log.segment_ids()
    now = T0 + 10 * DAY
    assert log.expired_segments(now=now, max_age=DAY) == ids[:-1]
    assert log.expired_segments(now=now, max_age=None) == []
    assert log.expired_segments(now=now, max_age=DAY, min_age=30 * DAY) == []


def test_purging_segments_records_the_purge_first(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=3)
    ids = log.segment_ids()
    assert log.purge_segments(ids[:1]) == ids[:1]
    # The purge entry is written at the storage's own time, perhaps into a new segment.
    assert log.segment_ids()[: len(ids) - 1] == ids[1:]
    purge = [e for e in log.entries() if e.event == AuditEvent.AUDIT_PURGE]
    assert len(purge) == 1
    assert purge[0].attrs["segments"] == ids[:1]


def test_purging_the_newest_segment_or_leaving_a_gap_is_refused(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=3)
    ids = log.segment_ids()
    with pytest.raises(ConfigurationError, match="newest"):
        log.purge_segments(ids[-1:])
    with pytest.raises(ConfigurationError, match="oldest first"):
        log.purge_segments(ids[1:2])
    assert log.segment_ids() == ids


def test_repair_of_a_clean_log_writes_nothing(open_log: Opener) -> None:
    log = open_log()
    _fill(log, days=1)
    before = len(list(log.entries()))
    assert list(log.repair()) == []
    assert len(list(log.entries())) == before
