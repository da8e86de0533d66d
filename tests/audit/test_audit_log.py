"""The audit log on disk: chain, segments, head, locks, crashes, retention, write failures."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_memory import FixedClock
from governed_memory._audit import GENESIS, AuditEvent, AuditKey, AuditLog, verify_log
from governed_memory._audit._entry import canonical, parse_entry
from governed_memory._audit._log import HEAD_FILE, HEAD_SIZE, Period, list_segments, parse_head
from governed_memory._base._syncer import GroupSync
from governed_memory._errors import AuditWriteError, ConfigurationError, NotFoundError

KEY = AuditKey(bytes(range(32)))
T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)


def make_log(folder: Path, start: dt.datetime = T0, **kwargs: object) -> AuditLog:
    clock = FixedClock(start, tick=dt.timedelta(seconds=1))
    return AuditLog(folder, KEY, clock=clock, **kwargs)  # type: ignore[arg-type]


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_first_append_creates_private_folder_segment_anchor_and_head(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    log = make_log(folder)
    entry = log.append("persist", {"outcome": "ok", "bytes": 12})
    assert (folder.stat().st_mode & 0o777) == 0o700
    segment = folder / "audit-2026-11.jsonl"
    assert (segment.stat().st_mode & 0o777) == 0o600
    anchor, written = lines(segment)
    assert anchor["event"] == "audit.segment" and anchor["seq"] == 1 and anchor["prev"] == GENESIS
    assert anchor["attrs"] == {"segment": "audit-2026-11.jsonl", "previous_segment": None}
    assert written["seq"] == 2 and written["prev"] == anchor["hash"]
    assert written["attrs"] == {"outcome": "ok", "bytes": 12} and entry.seq == 2
    head = parse_head((folder / HEAD_FILE).read_bytes())
    assert head is not None and (head.seq, head.hash) == (2, entry.hash)
    assert len((folder / HEAD_FILE).read_bytes()) == HEAD_SIZE


def test_entry_bytes_are_canonical_and_hash_and_mac_cover_the_body(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    entry = log.append("consent.grant", {"outcome": "ok", "purpose": "persist"})
    raw = (tmp_path / "audit-2026-11.jsonl").read_bytes().splitlines()[-1]
    parsed = parse_entry(raw)
    body = canonical(parsed.body())
    assert raw == canonical(parsed.to_dict())
    assert parsed.hash == hashlib.sha256(body).hexdigest() == entry.hash
    assert KEY.verify_mac(body, parsed.mac) and parsed.kid == KEY.key_id
    assert parsed.ts == "2026-11-30T10:00:00.000000Z"


def test_naive_clock_times_are_local_and_stored_as_utc(tmp_path: Path) -> None:
    local = dt.datetime(2026, 6, 1, 12, 0, 0)
    log = AuditLog(tmp_path, KEY, clock=FixedClock(local))
    entry = log.append("persist", {"outcome": "ok"})
    assert entry.time == local.astimezone(dt.UTC)


def test_new_period_starts_a_segment_whose_anchor_chains_to_the_last(tmp_path: Path) -> None:
    log = make_log(tmp_path, dt.datetime(2026, 11, 30, 23, 59, 59, tzinfo=dt.UTC))
    first = log.append("persist", {"outcome": "ok"})  # 23:59:59
    second = log.append("persist", {"outcome": "ok"})  # 00:00:00 next month
    assert [s.name for s in log.segments()] == ["audit-2026-11.jsonl", "audit-2026-12.jsonl"]
    anchor = lines(tmp_path / "audit-2026-12.jsonl")[0]
    assert anchor["event"] == "audit.segment" and anchor["prev"] == first.hash
    assert anchor["attrs"] == {
        "segment": "audit-2026-12.jsonl",
        "previous_segment": "audit-2026-11.jsonl",
    }
    assert second.seq == anchor["seq"] + 1 == first.seq + 2  # type: ignore[operator]
    assert verify_log(tmp_path, KEY).ok


def test_daily_period_names_segments_by_day(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, KEY, clock=FixedClock(T0, tick=dt.timedelta(hours=24)), period="day")
    for _ in range(3):
        log.append("persist", {"outcome": "ok"})
    assert [s.name for s in log.segments()] == [
        "audit-2026-11-30.jsonl",
        "audit-2026-12-01.jsonl",
        "audit-2026-12-02.jsonl",
    ]
    assert verify_log(tmp_path, KEY).ok


def test_unknown_period_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigurationError, match=r"'week'.*'month' or 'day'"):
        AuditLog("x", KEY, period="week")


def test_clock_going_back_stays_in_the_newest_segment(tmp_path: Path) -> None:
    clock = FixedClock(dt.datetime(2026, 12, 1, 0, 0, 1, tzinfo=dt.UTC))
    log = AuditLog(tmp_path, KEY, clock=clock)
    log.append("persist", {"outcome": "ok"})
    clock.set(dt.datetime(2026, 11, 30, 23, 0, tzinfo=dt.UTC))
    log.append("persist", {"outcome": "ok"})
    assert [s.name for s in log.segments()] == ["audit-2026-12.jsonl"]
    assert verify_log(tmp_path, KEY).ok


def test_event_names_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="'Persist!'"):
        make_log(tmp_path).append("Persist!", {})


def test_two_log_objects_interleave_into_one_chain(tmp_path: Path) -> None:
    a, b = make_log(tmp_path), make_log(tmp_path)
    for i in range(10):
        (a if i % 2 else b).append("persist", {"outcome": "ok", "i": i})
    report = verify_log(tmp_path, KEY)
    assert report.ok and report.entries == 11


def _append_many(folder: str, count: int, tag: int) -> None:
    log = AuditLog(folder, KEY)
    for i in range(count):
        log.append("persist", {"outcome": "ok", "writer": tag, "i": i})
    log.close()


def test_a_second_writer_never_finds_a_new_log_without_its_head(tmp_path: Path) -> None:
    """The first append names its entries in the head before another writer can look.

    The first writer's flush is held back; a second log object (its own open
    file, so its own flock, as another process would have) appends meanwhile.
    Finding entries and no head would read as a removed head: a discontinuity.
    """
    release = threading.Event()

    def slow_sync(fd: int) -> None:
        release.wait(10)
        os.fdatasync(fd)

    first = AuditLog(tmp_path, KEY, syncer=GroupSync(slow_sync))
    second = AuditLog(tmp_path, KEY)
    writer = threading.Thread(target=first.append, args=("persist", {"outcome": "ok"}))
    writer.start()
    while not list_segments(tmp_path):  # the first writer has started the log
        time.sleep(0.001)
    other = threading.Thread(target=second.append, args=("persist", {"outcome": "ok"}))
    other.start()
    time.sleep(0.05)  # the second writer is at the lock, or past it
    release.set()
    writer.join(10)
    other.join(10)
    first.close()
    second.close()
    report = verify_log(tmp_path, KEY)
    assert report.ok, [str(f) for f in report.findings]
    assert [e.event for e in AuditLog(tmp_path, KEY).entries()].count("audit.discontinuity") == 0


def test_processes_appending_at_once_keep_one_valid_chain(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), 25, n)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    report = verify_log(tmp_path, KEY)
    assert report.ok, [str(f) for f in report.findings]
    writes = [e for e in AuditLog(tmp_path, KEY).entries() if e.event == "persist"]
    assert len(writes) == 75
    assert {(e.attrs["writer"], e.attrs["i"]) for e in writes} == {
        (w, i) for w in range(3) for i in range(25)
    }


def test_torn_last_line_is_closed_off_and_recorded_by_the_next_append(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append("persist", {"outcome": "ok"})
    segment = tmp_path / "audit-2026-11.jsonl"
    good = segment.read_bytes()
    torn = b'{"attrs":{"outcome":"ok"},"event":"persist","ha'
    with open(segment, "ab") as file:
        file.write(torn)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == ["torn_tail"]
    assert report.findings[0].line == 3

    after = make_log(tmp_path).append("persist", {"outcome": "ok"})
    data = segment.read_bytes()
    assert data.startswith(good + torn + b"\n")  # the torn bytes stay as evidence
    repair = lines_after(data, len(good + torn + b"\n"))[0]
    assert repair["event"] == "audit.repair"
    assert repair["attrs"] == {
        "segment": "audit-2026-11.jsonl",
        "line": 3,
        "bytes": len(torn),
        "sha256": hashlib.sha256(torn).hexdigest(),
    }
    assert after.seq == repair["seq"] + 1  # type: ignore[operator]
    report = verify_log(tmp_path, KEY)
    assert report.ok and report.repaired == ("audit-2026-11.jsonl:3",)


def lines_after(data: bytes, offset: int) -> list[dict[str, object]]:
    return [json.loads(line) for line in data[offset:].splitlines()]


def test_a_last_entry_that_lost_only_its_newline_is_completed(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append("persist", {"outcome": "ok"})
    segment = tmp_path / "audit-2026-11.jsonl"
    segment.write_bytes(segment.read_bytes()[:-1])
    entry = make_log(tmp_path).append("persist", {"outcome": "ok"})
    assert entry.seq == 3
    assert not any(e.event == "audit.repair" for e in log.entries())
    assert verify_log(tmp_path, KEY).ok


def test_repair_on_an_idle_log_closes_off_the_torn_line(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append("persist", {"outcome": "ok"})
    with open(tmp_path / "audit-2026-11.jsonl", "ab") as file:
        file.write(b'{"trunc')
    written = make_log(tmp_path).repair()
    assert [e.event for e in written] == ["audit.repair"]
    assert make_log(tmp_path).repair() == []
    assert verify_log(tmp_path, KEY).ok


_WRITER = """
import sys
from governed_memory._audit import AuditKey, AuditLog
log = AuditLog(sys.argv[1], AuditKey(bytes(range(32))))
i = 0
while True:
    log.append("persist", {"outcome": "ok", "i": i, "pad": "x" * 3000})
    i += 1
    if i == 20:
        print("ready", flush=True)
"""


def test_kill_9_during_appends_leaves_a_log_that_verifies_or_repairs(tmp_path: Path) -> None:
    """A writer killed mid-stream: every fsynced entry stays, the next append continues the chain."""
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    report = verify_log(tmp_path, KEY)
    assert all(f.kind == "torn_tail" for f in report.findings), [str(f) for f in report.findings]
    assert report.entries >= 21
    AuditLog(tmp_path, KEY).append("persist", {"outcome": "ok"})
    report = verify_log(tmp_path, KEY)
    assert report.ok, [str(f) for f in report.findings]


def test_head_ahead_of_the_log_is_recorded_as_a_discontinuity(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for _ in range(3):
        log.append("persist", {"outcome": "ok"})
    log.close()
    segment = tmp_path / "audit-2026-11.jsonl"
    segment.write_bytes(b"".join(line + b"\n" for line in segment.read_bytes().splitlines()[:-2]))
    entry = make_log(tmp_path).append("persist", {"outcome": "ok"})
    gap = next(e for e in log.entries() if e.event == AuditEvent.DISCONTINUITY)
    assert gap.attrs["reason_code"] == "head_ahead"
    assert (gap.attrs["head_seq"], gap.attrs["found_seq"]) == (4, 2)
    assert gap.seq == 5 and entry.seq == 6  # seq numbers of removed entries are never reused
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == ["removed"]
    assert "seq 3..4" in report.findings[0].message


def test_missing_head_with_entries_is_recorded(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append("persist", {"outcome": "ok"})
    log.close()
    (tmp_path / HEAD_FILE).unlink()
    make_log(tmp_path).append("persist", {"outcome": "ok"})
    gap = next(e for e in log.entries() if e.event == AuditEvent.DISCONTINUITY)
    assert gap.attrs["reason_code"] == "head_missing"
    assert [f.kind for f in verify_log(tmp_path, KEY).findings] == ["discontinuity"]


def test_a_log_written_with_another_key_refuses_appends(tmp_path: Path) -> None:
    make_log(tmp_path).append("persist", {"outcome": "ok"})
    other = AuditLog(tmp_path, AuditKey(b"\x01" * 32))
    with pytest.raises(AuditWriteError, match=r"written with key id [0-9a-f]{16}.*new folder"):
        other.append("persist", {"outcome": "ok"})


def test_unwritable_folder_raises_audit_write_error_naming_the_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    log = AuditLog(blocker / "audit", KEY)
    with pytest.raises(AuditWriteError, match=r"cannot append to the audit log in .*file/audit"):
        log.append("persist", {"outcome": "ok"})


def test_a_failed_write_does_not_poison_later_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path)
    log.append("persist", {"outcome": "ok"})
    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(AuditWriteError, match="No space left"):
        log.append("persist", {"outcome": "ok"})
    monkeypatch.setattr(os, "fdatasync", real)
    log.append("persist", {"outcome": "ok"})
    assert verify_log(tmp_path, KEY).ok  # the unsynced entry is complete and chained


def test_purge_records_the_removal_then_deletes_oldest_segments(tmp_path: Path) -> None:
    clock = FixedClock(dt.datetime(2026, 1, 15, tzinfo=dt.UTC))
    log = AuditLog(tmp_path, KEY, clock=clock)
    for month in (1, 2, 3, 4):
        clock.set(dt.datetime(2026, month, 15, tzinfo=dt.UTC))
        log.append("persist", {"outcome": "ok"})
    names = [s.name for s in log.segments()]
    last_of_feb = [e for e in log.entries() if e.ts.startswith("2026-02")][-1]
    assert (
        log.expired_segments(
            now=dt.datetime(2026, 4, 20, tzinfo=dt.UTC), max_age=dt.timedelta(days=40)
        )
        == names[:2]
    )
    removed = log.purge_expired(
        now=dt.datetime(2026, 4, 20, tzinfo=dt.UTC), max_age=dt.timedelta(days=40)
    )
    assert removed == names[:2]
    assert [s.name for s in log.segments()] == names[2:]
    purge = next(e for e in log.entries() if e.event == AuditEvent.AUDIT_PURGE)
    assert purge.attrs == {
        "segments": names[:2],
        "last_segment": names[1],
        "last_seq": last_of_feb.seq,
        "last_hash": last_of_feb.hash,
    }
    report = verify_log(tmp_path, KEY)
    assert report.ok and report.purged == tuple(names[:2])


def test_purge_respects_the_minimum_age_and_forever(tmp_path: Path) -> None:
    clock = FixedClock(dt.datetime(2026, 1, 15, tzinfo=dt.UTC))
    log = AuditLog(tmp_path, KEY, clock=clock)
    for month in (1, 2, 3):
        clock.set(dt.datetime(2026, month, 15, tzinfo=dt.UTC))
        log.append("persist", {"outcome": "ok"})
    now = dt.datetime(2026, 3, 20, tzinfo=dt.UTC)
    assert log.expired_segments(now=now, max_age=None) == []
    assert log.expired_segments(now=now, max_age=dt.timedelta(days=1)) == [
        "audit-2026-01.jsonl",
        "audit-2026-02.jsonl",
    ]
    assert log.expired_segments(
        now=now, max_age=dt.timedelta(days=1), min_age=dt.timedelta(days=40)
    ) == ["audit-2026-01.jsonl"]


def test_purge_refuses_the_newest_a_gap_and_unknown_names(tmp_path: Path) -> None:
    clock = FixedClock(dt.datetime(2026, 1, 15, tzinfo=dt.UTC))
    log = AuditLog(tmp_path, KEY, clock=clock)
    for month in (1, 2, 3):
        clock.set(dt.datetime(2026, month, 15, tzinfo=dt.UTC))
        log.append("persist", {"outcome": "ok"})
    with pytest.raises(ConfigurationError, match=r"audit-2026-03\.jsonl is the newest"):
        log.purge_segments(["audit-2026-03.jsonl"])
    with pytest.raises(ConfigurationError, match=r"older segments \['audit-2026-01.jsonl'\]"):
        log.purge_segments(["audit-2026-02.jsonl"])
    with pytest.raises(NotFoundError, match=r"audit-1999-01\.jsonl"):
        log.purge_segments(["audit-1999-01.jsonl"])
    assert len(log.segments()) == 3 and verify_log(tmp_path, KEY).ok


def test_segments_are_ordered_by_their_first_seq_not_their_name(tmp_path: Path) -> None:
    clock = FixedClock(dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC))
    log = AuditLog(tmp_path, KEY, clock=clock, period="month")
    log.append("persist", {"outcome": "ok"})
    clock.set(dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC))
    day_log = AuditLog(tmp_path, KEY, clock=clock, period="day")
    day_log.append("persist", {"outcome": "ok"})
    names = [s.name for s in list_segments(tmp_path)]
    assert names == ["audit-2026-11.jsonl", "audit-2026-12-01.jsonl"]
    assert verify_log(tmp_path, KEY).ok


def test_tail_and_entries_read_without_a_key(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for i in range(5):
        log.append("persist", {"outcome": "ok", "i": i})
    assert [e.attrs.get("i") for e in log.tail(2)] == [3, 4]
    assert log.tail(0) == []
    assert len(list(log.entries())) == 6


def test_a_log_emptied_under_a_live_writer_is_recorded(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for _ in range(3):
        log.append("persist", {"outcome": "ok"})
    for path in tmp_path.iterdir():
        path.unlink()
    entry = log.append("persist", {"outcome": "ok"})
    gap = next(e for e in log.entries() if e.event == AuditEvent.DISCONTINUITY)
    assert gap.attrs["reason_code"] == "log_missing" and gap.attrs["head_seq"] == 4
    assert entry.seq == gap.seq + 1 == 6
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == ["removed"]
    assert "seq 2..4" in report.findings[0].message


def test_a_segments_last_entry_is_its_last_readable_one(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append("persist", {"outcome": "ok"})
    last = log.append("persist", {"outcome": "error"})
    [segment] = list_segments(tmp_path)
    with open(segment.path, "ab") as file:
        file.write(b'{"trunc')  # a torn line a crashed writer left is skipped
    found = segment.last_entry()
    assert found is not None and (found.seq, found.hash) == (last.seq, last.hash)


def test_a_segment_without_entries_or_gone_has_no_last_entry(tmp_path: Path) -> None:
    make_log(tmp_path).append("persist", {"outcome": "ok"})
    [segment] = list_segments(tmp_path)
    segment.path.write_bytes(b"not an entry\n")
    assert segment.last_entry() is None
    segment.path.unlink()
    assert segment.last_entry() is None


@pytest.mark.parametrize("period", list(Period))
@given(
    when=st.datetimes(
        timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=-11, minutes=-30))])
    )
)
def test_a_segment_label_is_strftimes_text_for_any_instant(
    period: Period, when: dt.datetime
) -> None:
    utc = when.astimezone(dt.UTC)
    expected = utc.strftime("%Y-%m" if period is Period.MONTH else "%Y-%m-%d")
    assert period.label(when) == expected
