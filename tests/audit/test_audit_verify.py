"""verify names the first altered, removed, inserted or reordered entry: file, line, seq, what."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory import FixedClock
from governed_memory._audit import AuditKey, AuditLog, FindingKind, verify_log
from governed_memory._audit._entry import canonical
from governed_memory._audit._log import HEAD_FILE

KEY = AuditKey(bytes(range(32)))
SEGMENT = "audit-2026-11.jsonl"


def build(folder: Path, count: int = 5) -> Path:
    """A log of one anchor + ``count`` entries (seq 1..count+1) in one segment."""
    log = AuditLog(folder, KEY, clock=FixedClock(dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC)))
    for i in range(count):
        log.append("persist", {"outcome": "ok", "i": i})
    log.close()
    return folder / SEGMENT


def read(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def kinds(folder: Path, key: AuditKey = KEY) -> list[str]:
    return [f.kind.value for f in verify_log(folder, key).findings]


def test_an_intact_log_verifies(tmp_path: Path) -> None:
    build(tmp_path)
    report = verify_log(tmp_path, KEY)
    assert report.ok and report.complete and report.first is None
    assert (report.entries, report.first_seq, report.last_seq) == (6, 1, 6)
    assert report.segments == (SEGMENT,)


def test_an_empty_folder_verifies_with_no_entries(tmp_path: Path) -> None:
    report = verify_log(tmp_path / "none", KEY)
    assert report.ok and report.entries == 0


def test_altered_field_is_named_with_file_line_and_seq(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    lines[2] = lines[2].replace(b'"outcome":"ok"', b'"outcome":"no"')
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.ALTERED]
    first = report.first
    assert first is not None and (first.file, first.line, first.seq) == (SEGMENT, 3, 3)
    assert str(first).startswith(f"{SEGMENT}:3 seq 3: altered: ")


def test_altered_and_rehashed_entry_fails_its_mac(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    entry = json.loads(lines[3])
    entry["attrs"]["outcome"] = "error"
    body = {k: v for k, v in entry.items() if k not in ("hash", "mac")}
    entry["hash"] = hashlib.sha256(canonical(body)).hexdigest()
    lines[3] = canonical(entry)
    # The next entry's prev must follow, or the forgery would also break the chain.
    nxt = json.loads(lines[4])
    nxt["prev"] = entry["hash"]
    lines[4] = canonical(nxt)
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert report.first is not None
    assert (report.first.kind, report.first.line, report.first.seq) == (FindingKind.FORGED, 4, 4)
    assert "without the audit key" in report.first.message


def test_whitespace_edit_counts_as_an_alteration(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    lines[1] = lines[1].replace(b'{"attrs":', b'{ "attrs":')
    write(segment, lines)
    assert kinds(tmp_path) == ["altered"]


def test_removed_entry_names_the_missing_seq(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    del lines[2]  # seq 3
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.REMOVED]
    first = report.first
    assert first is not None and (first.line, first.seq) == (3, 4)
    assert "entries seq 3 are missing" in first.message


def test_entries_removed_from_the_end_are_caught_by_the_head(tmp_path: Path) -> None:
    segment = build(tmp_path)
    write(segment, read(segment)[:-2])
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.TRUNCATED]
    first = report.first
    assert first is not None and (first.file, first.line, first.seq) == (SEGMENT, 5, 5)
    assert "seq 5..6 were removed from the end" in first.message


def test_inserted_forged_entry_is_named(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    real = json.loads(lines[2])  # seq 3, what the forger imitates
    fake = {**real, "attrs": {"outcome": "ok", "i": 99}}
    body = {k: v for k, v in fake.items() if k not in ("hash", "mac")}
    fake["hash"] = hashlib.sha256(canonical(body)).hexdigest()
    fake["mac"] = "0" * 64
    lines.insert(2, canonical(fake))
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.INSERTED]
    assert report.first is not None and (report.first.line, report.first.seq) == (3, 3)


def test_inserted_copy_of_a_genuine_entry_is_named(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    lines.insert(4, lines[1])  # a copy of seq 2 after seq 4
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.INSERTED]
    first = report.first
    assert first is not None and (first.line, first.seq) == (5, 2)
    assert "a copy of entry seq 2" in first.message


def test_inserted_garbage_line_is_named(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    lines.insert(3, b"not json at all")
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.INSERTED]
    assert report.first is not None and report.first.line == 4


def test_reordered_entries_are_named(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    lines[2], lines[3] = lines[3], lines[2]
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.REORDERED]
    first = report.first
    assert first is not None and (first.line, first.seq) == (3, 4)
    assert "seq 4 appears before seq 3" in first.message
    assert not report.complete


def test_torn_tail_from_a_crash_is_reported_distinctly(tmp_path: Path) -> None:
    """A crash mid-append leaves a partial line the head never recorded."""
    segment = build(tmp_path)
    with open(segment, "ab") as file:
        file.write(b'{"attrs":{"outcome":"ok","i":5},"ev')
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.TORN_TAIL]
    first = report.first
    assert first is not None and (first.file, first.line) == (SEGMENT, 7)
    assert "crash" in first.message and "audit repair" in first.message


def test_tail_cut_through_a_recorded_entry_is_torn_and_truncated(tmp_path: Path) -> None:
    """Cutting the file mid-entry is not a crash: the head recorded the entry as written."""
    segment = build(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data[:-40])
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.TORN_TAIL, FindingKind.TRUNCATED]
    assert report.findings[1].seq == 6


def test_wrong_key_is_reported_once_as_such(tmp_path: Path) -> None:
    build(tmp_path)
    report = verify_log(tmp_path, AuditKey(b"\x07" * 32))
    assert [f.kind for f in report.findings] == [FindingKind.WRONG_KEY]
    first = report.first
    assert first is not None and (first.line, first.seq) == (1, 1)
    assert KEY.key_id in first.message


def test_entry_signed_with_another_key_is_forged(tmp_path: Path) -> None:
    segment = build(tmp_path)
    other = AuditKey(b"\x09" * 32)
    lines = read(segment)
    entry = json.loads(lines[2])
    entry["kid"] = other.key_id
    body = {k: v for k, v in entry.items() if k not in ("hash", "mac")}
    entry["hash"] = hashlib.sha256(canonical(body)).hexdigest()
    entry["mac"] = other.mac(canonical(body))
    lines[2] = canonical(entry)
    nxt = json.loads(lines[3])
    nxt["prev"] = entry["hash"]
    lines[3] = canonical(nxt)
    write(segment, lines)
    first = verify_log(tmp_path, KEY).first
    assert first is not None and first.kind is FindingKind.FORGED and other.key_id in first.message


def _three_months(folder: Path) -> AuditLog:
    clock = FixedClock(dt.datetime(2026, 1, 15, tzinfo=dt.UTC))
    log = AuditLog(folder, KEY, clock=clock)
    for month in (1, 2, 3):
        clock.set(dt.datetime(2026, month, 15, tzinfo=dt.UTC))
        log.append("persist", {"outcome": "ok"})
    return log


def test_deleted_oldest_segment_without_a_purge_record_is_reported(tmp_path: Path) -> None:
    _three_months(tmp_path)
    (tmp_path / "audit-2026-01.jsonl").unlink()
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.MISSING_SEGMENT]
    first = report.first
    assert first is not None and (first.file, first.line) == ("audit-2026-02.jsonl", 1)
    assert "audit-2026-01.jsonl" in first.message and "no audit.purge" in first.message


def test_deleted_middle_segment_is_reported(tmp_path: Path) -> None:
    _three_months(tmp_path)
    (tmp_path / "audit-2026-02.jsonl").unlink()
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.MISSING_SEGMENT]
    first = report.first
    assert first is not None and first.file == "audit-2026-03.jsonl"
    assert "segment audit-2026-02.jsonl is missing" in first.message


def test_segments_purged_through_the_log_verify(tmp_path: Path) -> None:
    log = _three_months(tmp_path)
    log.purge_segments(["audit-2026-01.jsonl", "audit-2026-02.jsonl"])
    report = verify_log(tmp_path, KEY)
    assert report.ok
    assert report.purged == ("audit-2026-01.jsonl", "audit-2026-02.jsonl")
    assert report.first_seq == 5  # the March anchor


def test_a_purge_record_does_not_cover_a_later_deletion(tmp_path: Path) -> None:
    log = _three_months(tmp_path)
    log.purge_segments(["audit-2026-01.jsonl"])
    (tmp_path / "audit-2026-02.jsonl").unlink()
    assert kinds(tmp_path) == ["missing_segment"]


def test_missing_head_is_reported(tmp_path: Path) -> None:
    build(tmp_path)
    (tmp_path / HEAD_FILE).unlink()
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.HEAD]
    assert report.first is not None and "missing" in report.first.message


def test_edited_head_does_not_authenticate(tmp_path: Path) -> None:
    build(tmp_path)
    head = tmp_path / HEAD_FILE
    head.write_bytes(head.read_bytes().replace(b'"seq":6', b'"seq":9'))
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.HEAD]
    assert report.first is not None and "does not authenticate" in report.first.message


def test_unreadable_line_in_the_middle_stops_the_walk(tmp_path: Path) -> None:
    segment = build(tmp_path)
    lines = read(segment)
    lines[2] = b'{"broken'
    write(segment, lines)
    report = verify_log(tmp_path, KEY)
    assert [f.kind for f in report.findings] == [FindingKind.MALFORMED]
    assert report.first is not None and report.first.line == 3 and not report.complete


def test_joined_segment_files_are_reported(tmp_path: Path) -> None:
    _three_months(tmp_path)
    first, second = tmp_path / "audit-2026-01.jsonl", tmp_path / "audit-2026-02.jsonl"
    first.write_bytes(first.read_bytes() + second.read_bytes())
    second.unlink()
    report = verify_log(tmp_path, KEY)
    assert report.first is not None and report.first.kind is FindingKind.MALFORMED
    assert "joined" in report.first.message
    assert (report.first.file, report.first.line) == ("audit-2026-01.jsonl", 3)


def test_report_serialises_for_scripts(tmp_path: Path) -> None:
    segment = build(tmp_path)
    write(segment, read(segment)[:-1])
    data = verify_log(tmp_path, KEY).to_dict()
    assert data["ok"] is False and data["findings"][0]["kind"] == "truncated"
    json.dumps(data)


_MUTATIONS = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("swap"), st.integers(0, 6), st.integers(0, 6)),
    st.tuples(st.just("duplicate"), st.integers(0, 6), st.integers(0, 7)),
    st.tuples(st.just("flip"), st.integers(0, 6), st.integers(0, 10_000)),
    st.tuples(st.just("truncate"), st.integers(1, 10_000)),
)


@settings(max_examples=60, deadline=None)
@given(_MUTATIONS)
def test_any_single_edit_of_a_log_is_detected(mutation: tuple[object, ...]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        segment = build(folder, count=5)
        lines = read(segment)
        kind = mutation[0]
        if kind == "delete":
            del lines[int(mutation[1]) % len(lines)]  # type: ignore[call-overload]
        elif kind == "swap":
            i, j = (int(x) % len(lines) for x in mutation[1:])  # type: ignore[call-overload]
            if i == j:
                j = (i + 1) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "duplicate":
            i, j = int(mutation[1]) % len(lines), int(mutation[2]) % (len(lines) + 1)  # type: ignore[call-overload]
            lines.insert(j, lines[i])
        elif kind == "flip":
            i = int(mutation[1]) % len(lines)  # type: ignore[call-overload]
            pos = int(mutation[2]) % len(lines[i])  # type: ignore[call-overload]
            line = bytearray(lines[i])
            line[pos] ^= 0x01
            lines[i] = bytes(line)
        if kind == "truncate":
            # At least one byte of an entry goes: the final newline alone is no edit of
            # the record (the writer itself restores it, see the test after this one).
            data = segment.read_bytes()
            segment.write_bytes(data[: len(data) - int(mutation[1]) % (len(data) - 1) - 2])  # type: ignore[call-overload]
        else:
            write(segment, lines)
        assert not verify_log(folder, KEY).ok, mutation


def test_a_log_that_lost_only_its_final_newline_verifies_and_the_writer_restores_it(
    tmp_path: Path,
) -> None:
    segment = build(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data[:-1])
    report = verify_log(tmp_path, KEY)
    assert report.ok and report.entries == 6  # every entry is whole and MAC-checked
    log = AuditLog(tmp_path, KEY, clock=FixedClock(dt.datetime(2026, 11, 30, 11, tzinfo=dt.UTC)))
    log.append("persist", {"outcome": "ok", "i": 99})
    log.close()
    assert segment.read_bytes().startswith(data)
    assert verify_log(tmp_path, KEY).ok
