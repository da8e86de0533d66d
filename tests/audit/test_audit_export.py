"""Reading the audit log for reviewers: whether a log exists, ``--since``, JSON Lines, the export file."""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from governed_memory import ConfigurationError, FixedClock, StorageError
from governed_memory._audit import (
    AuditKey,
    AuditLog,
    audit_log_exists,
    export_lines,
    export_since,
    write_export,
)

KEY = AuditKey(bytes(range(32)))
T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)


@pytest.fixture
def log_folder(tmp_path: Path) -> Path:
    """An audit log: a segment anchor and three entries at T0, T0 + 1 s and T0 + 2 s."""
    folder = tmp_path / "audit"
    log = AuditLog(folder, KEY, clock=FixedClock(T0, tick=dt.timedelta(seconds=1)))
    try:
        for n in range(3):
            log.append("persist", {"outcome": "ok", "bytes": n})
    finally:
        log.close()
    return folder


# -- audit_log_exists ---------------------------------------------------------


def test_a_written_log_exists(log_folder: Path) -> None:
    assert audit_log_exists(log_folder)


def test_a_missing_or_empty_folder_holds_no_log(tmp_path: Path) -> None:
    assert not audit_log_exists(tmp_path / "nowhere")
    assert not audit_log_exists(tmp_path)


# -- export_since -------------------------------------------------------------


def test_since_an_iso_date_is_utc_unless_it_has_an_offset() -> None:
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert export_since("2026-11-01", now) == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    offset = export_since("2026-11-01T08:00:00+02:00", now)
    assert offset == dt.datetime(2026, 11, 1, 6, 0, tzinfo=dt.UTC)


def test_since_an_age_counts_back_from_now() -> None:
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert export_since("7d", now) == now - dt.timedelta(days=7)
    assert export_since("12h", now) == now - dt.timedelta(hours=12)


def test_since_neither_names_the_value_and_both_forms() -> None:
    with pytest.raises(ConfigurationError, match="'last tuesday' is neither an ISO date/time"):
        export_since("last tuesday", dt.datetime(2026, 12, 1, tzinfo=dt.UTC))


# -- export_lines -------------------------------------------------------------


def test_export_lines_are_the_entries_since_the_time_as_recorded(log_folder: Path) -> None:
    lines = export_lines(log_folder, T0 + dt.timedelta(seconds=1))
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    exported = [json.loads(line) for line in lines]
    log = AuditLog(log_folder, KEY)
    try:
        recorded = [e.to_dict() for e in log.entries()]
    finally:
        log.close()
    assert exported == recorded[-2:]
    assert [e["attrs"]["bytes"] for e in exported] == [1, 2]


def test_export_lines_before_the_first_entry_are_all_of_them(log_folder: Path) -> None:
    assert len(export_lines(log_folder, T0 - dt.timedelta(days=1))) == 4  # anchor + 3


# -- write_export -------------------------------------------------------------


def test_write_export_is_0600_and_creates_missing_folders_0700(
    tmp_path: Path, open_umask: None
) -> None:
    path = tmp_path / "reviews" / "2026" / "audit.jsonl"
    write_export(path, ['{"seq": 1}\n', '{"seq": 2}\n'])
    assert path.read_text() == '{"seq": 1}\n{"seq": 2}\n'
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["audit.jsonl"]


def test_write_export_replaces_an_earlier_export(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    write_export(path, ["new\n"])
    assert path.read_text() == "new\n"
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_an_unwritable_folder_gives_a_clear_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File modes do not stop root, so the denial is simulated where the folder is made."""
    real = os.mkdir
    target = tmp_path / "reviews"

    def denied(path: Any, mode: int = 0o777, **kwargs: Any) -> None:
        if Path(path) == target / "2026":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        real(path, mode, **kwargs)

    monkeypatch.setattr(os, "mkdir", denied)
    path = target / "2026" / "audit.jsonl"
    with pytest.raises(StorageError) as caught:
        write_export(path, ["x\n"])
    message = str(caught.value)
    assert f"could not write the audit export {path}" in message
    assert "Permission denied" in message
    assert f"choose a folder you can write to, or fix the permissions of {path.parent}" in message
    assert list(tmp_path.iterdir()) == []  # the folder it made on the way is gone again


def test_a_full_disk_keeps_the_previous_export_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    path = tmp_path / "audit.jsonl"
    path.write_text("previous\n")
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(StorageError, match="free some space on that disk"):
        write_export(path, ["new\n"])
    assert path.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["audit.jsonl"]


def test_a_file_in_place_of_the_folder_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "reviews"
    blocker.write_text("")
    with pytest.raises(StorageError, match=f"could not write the audit export {blocker}"):
        write_export(blocker / "audit.jsonl", ["x\n"])
    assert blocker.read_text() == ""
