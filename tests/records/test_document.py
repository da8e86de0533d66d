"""The atomic JSON document: read, replace under its lock, version check, sealing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sealing_helpers import sealing_for

from governed_memory._base import FileLock
from governed_memory._crypto import RecordSealing
from governed_memory._errors import FormatVersionError, SealedRecordError, StorageError
from governed_memory._records import JsonDocument


def make_doc(tmp_path: Path, sealing: RecordSealing | None = None) -> JsonDocument:
    folder = tmp_path / "gov"
    return JsonDocument(
        folder / "doc.json",
        what="test document",
        version=1,
        lock=FileLock(folder / "doc.lock"),
        sealing=sealing,
        purpose="holds",
    )


def test_a_missing_document_reads_as_none_and_creates_nothing(tmp_path: Path) -> None:
    assert make_doc(tmp_path).read() is None
    assert not (tmp_path / "gov").exists()


def test_replace_writes_the_version_first_in_the_given_layout(tmp_path: Path) -> None:
    doc = make_doc(tmp_path)
    doc.replace({"items": [1]})
    assert doc.path.read_bytes() == b'{"v": 1, "items": [1]}\n'
    assert doc.path.stat().st_mode & 0o777 == 0o600
    assert make_doc(tmp_path).read() == {"v": 1, "items": [1]}


def test_an_unchanged_document_is_parsed_once(tmp_path: Path) -> None:
    doc = make_doc(tmp_path)
    doc.replace({"items": []})
    assert doc.read() is doc.read()
    make_doc(tmp_path).replace({"items": [2]})
    assert doc.read() == {"v": 1, "items": [2]}


@pytest.mark.parametrize(
    ("stored", "error", "message"),
    [
        (
            '{"items": []}',
            FormatVersionError,
            r"version None; this release reads version 1.*corrupted",
        ),
        ('{"v": 3}', FormatVersionError, r"test document .*doc.json has format version 3.*newer"),
        ("{nope", StorageError, r"not valid JSON.*damaged"),
    ],
    ids=["no-version", "newer-version", "not-json"],
)
def test_an_unreadable_document_names_the_file_and_the_cause(
    tmp_path: Path, stored: str, error: type[Exception], message: str
) -> None:
    doc = make_doc(tmp_path)
    doc.path.parent.mkdir()
    doc.path.write_text(stored)
    with pytest.raises(error, match=message):
        doc.read()


def test_writers_under_the_lock_lose_no_update(tmp_path: Path) -> None:
    def add_one() -> None:
        doc = make_doc(tmp_path)  # each thread its own object, as each process would
        for _ in range(20):
            with doc.locked():
                current = doc.read() or {"n": 0}
                doc.write({"n": current["n"] + 1})

    threads = [threading.Thread(target=add_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert make_doc(tmp_path).read() == {"v": 1, "n": 80}


def test_a_sealed_document_hides_its_content_and_reads_back(tmp_path: Path) -> None:
    doc = make_doc(tmp_path, sealing_for(tmp_path / "kr"))
    doc.replace({"reason": "litigation"})
    raw = doc.path.read_bytes()
    assert b"litigation" not in raw and raw.endswith(b'"}\n')
    assert make_doc(tmp_path, sealing_for(tmp_path / "kr")).read() == {
        "v": 1,
        "reason": "litigation",
    }
    with pytest.raises(SealedRecordError):
        make_doc(tmp_path).read()


def test_rewrite_converts_the_stored_bytes_once(tmp_path: Path) -> None:
    doc = make_doc(tmp_path)
    doc.replace({"n": 1})
    assert doc.rewrite(lambda raw: raw.replace(b"1}", b"2}"))
    assert doc.read() == {"v": 1, "n": 2}
    assert not doc.rewrite(lambda raw: raw)
    assert doc.delete() and not doc.delete()
    assert not doc.rewrite(lambda raw: raw) and not doc.path.exists()
