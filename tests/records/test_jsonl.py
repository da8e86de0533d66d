"""The JSON Lines log: durable appends, torn-line repair, the stat cache, sealing, versions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sealing_helpers import sealing_for

from governed_memory._base import FileLock
from governed_memory._crypto import RecordSealing
from governed_memory._errors import FormatVersionError, SealedRecordError, StorageError
from governed_memory._records import JsonlLog


def load(data: dict[str, Any], where: str) -> dict[str, Any]:
    return data


def make_log(
    tmp_path: Path, *, version: int | None = 1, sealing: RecordSealing | None = None
) -> JsonlLog[dict[str, Any]]:
    folder = tmp_path / "gov"
    return JsonlLog(
        folder / "log.jsonl",
        load=load,
        what="test log",
        lock=FileLock(folder / "log.lock"),
        version=version,
        sealing=sealing,
        purpose="consent",
    )


def test_append_writes_compact_sorted_lines_with_the_version(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append({"b": 1, "a": "é"})
    assert log.path.read_bytes() == '{"a":"é","b":1,"v":1}\n'.encode()
    assert log.path.stat().st_mode & 0o777 == 0o600
    assert list(log.read()) == [{"a": "é", "b": 1, "v": 1}]


def test_an_unversioned_log_writes_the_record_as_given(tmp_path: Path) -> None:
    log = make_log(tmp_path, version=None)
    log.append({"agent": "A"})
    assert log.path.read_bytes() == b'{"agent":"A"}\n'


def test_a_torn_last_line_is_invisible_and_cut_by_the_next_append(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})
    with open(log.path, "ab") as handle:  # a writer killed mid-line
        handle.write(b'{"n":2,"v"')
    assert [r["n"] for r in log.read()] == [1]
    log.append({"n": 3})
    assert log.path.read_bytes() == b'{"n":1,"v":1}\n{"n":3,"v":1}\n'
    assert [r["n"] for r in log.read()] == [1, 3]


def test_a_log_that_is_only_a_torn_line_is_emptied_before_the_append(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.path.parent.mkdir()
    log.path.write_bytes(b'{"n":')
    log.append({"n": 1})
    assert log.path.read_bytes() == b'{"n":1,"v":1}\n'


def test_an_unchanged_log_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})
    first = log.read()
    import builtins

    def no_open(*args: object, **kwargs: object) -> None:
        raise AssertionError("an unchanged log was opened")

    monkeypatch.setattr(builtins, "open", no_open)
    assert log.read() is first


def test_appends_by_another_writer_are_read_from_the_last_offset(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    other = make_log(tmp_path)
    log.append({"n": 1})
    assert len(log.read()) == 1
    generation = log.generation
    other.append({"n": 2})
    assert [r["n"] for r in log.read()] == [1, 2]
    assert log.generation == generation  # grown, not replaced


def test_a_replaced_log_is_read_again_in_full(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})
    log.append({"n": 2})
    assert len(log.read()) == 2
    generation = log.generation
    assert make_log(tmp_path).rewrite(lambda line: None if b'"n":1' in line else line)
    assert [r["n"] for r in log.read()] == [2]
    assert log.generation == generation + 1


def test_a_damaged_line_is_reported_and_leaves_the_cache(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})
    assert len(log.read()) == 1
    with open(log.path, "ab") as handle:
        handle.write(b"not json\n")
    with pytest.raises(StorageError, match=r"line \+1.*damaged"):
        log.read()
    with pytest.raises(StorageError, match="damaged"):
        log.read()  # still damaged: nothing was silently dropped


def test_a_line_of_another_version_names_both_versions(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.path.parent.mkdir()
    log.path.write_bytes(b'{"v":2}\n')
    with pytest.raises(FormatVersionError, match=r"version 2; this release reads version 1.*newer"):
        log.read()


def test_rewrite_converts_every_line_atomically_and_drops_a_torn_one(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})
    with open(log.path, "ab") as handle:
        handle.write(b"\n" + b'{"n":')
    assert log.rewrite(lambda line: line.replace(b"1", b"7"))
    assert log.path.read_bytes() == b'{"n":7,"v":7}\n\n'
    assert not log.rewrite(lambda line: line)  # nothing to change: not rewritten


def test_an_exception_in_rewrite_changes_nothing(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})
    before = log.path.read_bytes()

    def refuse(line: bytes) -> bytes:
        raise ValueError("no")

    with pytest.raises(ValueError):
        log.rewrite(refuse)
    assert log.path.read_bytes() == before


def test_rewrite_of_a_missing_log_creates_nothing(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    assert not log.rewrite(lambda line: line)
    assert not log.path.exists()


def test_sealed_lines_hide_the_record_and_read_back(tmp_path: Path) -> None:
    log = make_log(tmp_path, sealing=sealing_for(tmp_path / "kr"))
    log.append({"subject": "patient-7"})
    raw = log.path.read_bytes()
    assert b"patient-7" not in raw and raw.startswith(b'{"v":2,"sealed":"gm1:')
    assert list(make_log(tmp_path, sealing=sealing_for(tmp_path / "kr")).read()) == [
        {"subject": "patient-7", "v": 1}
    ]
    with pytest.raises(SealedRecordError):
        make_log(tmp_path).read()


def test_create_makes_an_empty_log_and_keeps_an_existing_one(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.create()
    assert log.path.read_bytes() == b""
    log.append({"n": 1})
    log.create()
    assert len(log.read()) == 1
    log.delete()
    assert not log.path.exists() and list(log.read()) == []


def test_a_failed_append_names_the_log_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageError, match=r"test log .*NOT written"):
        log.append({"n": 2})


def test_extend_writes_every_record_with_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path)
    log.append({"n": 1})
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    log.extend([{"n": 2}, {"n": 3}])
    assert len(calls) == 1
    assert [r["n"] for r in log.read()] == [1, 2, 3]
    log.extend([])
    assert len(calls) == 1
