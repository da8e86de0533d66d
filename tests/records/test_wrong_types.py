"""Wrong-typed fields in a governance record: one clear StorageError naming the file (issue 13).

Each record reader (tombstones with their receipt, scheduled erasures, an
erasure's progress lines, consent lines, legal holds) is fed a valid record
with one field, at any depth, replaced by a value of another type or
removed. It reads it, or raises a StorageError that names the file and says
how to fix it; never a KeyError, TypeError, AttributeError or ValueError.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory import StorageError
from governed_memory._records import ConsentRegistry, ErasureReceipt, HoldRegistry, TombstoneStore
from governed_memory._subjects._removal import aggregate_blocked, aggregate_files

AT = "2026-05-01T09:00:00+02:00"
ID = "20260501T070000000000Z-0a0b0c0d"
SCOPE = {"subject": "customer-42", "agent": None}
REQUEST = {"id": ID, "scope": SCOPE, "requested_at": AT, "requested_by": "dpo", "reason": "r"}
FILE = {
    "agent": "A",
    "file": "agents/A/MEMORY.md",
    "records": 1,
    "summaries": 0,
    "bytes_removed": 10,
    "bytes_written": 5,
    "deleted": False,
}
HELD = {"agent": "A", "file": "agents/A/MEMORY.md", "summaries": 1, "holds": ["hold-1"]}
RECEIPT = {
    **REQUEST,
    "completed_at": AT,
    "policy_id": "p",
    "policy_version": "3",
    "files": [FILE],
    "keys_shredded": ["subject"],
    "resumed": False,
    "state": "blocked",
    "blocked": [HELD],
    "unreached": [{"agent": "Evil", "file": "agents/Evil", "reason": "a symbolic link"}],
}
TOMBSTONE = {
    "v": 1,
    **REQUEST,
    "policy_id": "p",
    "policy_version": "3",
    "state": "complete",
    "completed_at": AT,
    "receipt": RECEIPT,
}
SCHEDULED = {"v": 1, **REQUEST, "due_at": AT}
PROGRESS = {"agent": "A", "partition": "p1", "files": [FILE], "blocked": [HELD]}
CONSENT = {
    "v": 1,
    "subject": "customer-42",
    "purpose": "persist",
    "action": "grant",
    "at": AT,
    "actor": "dpo",
    "policy_id": "p",
    "policy_version": "3",
}
HOLDS = {
    "v": 1,
    "holds": [
        {"id": "hold-1", "reason": "case", "placed_by": "legal", "placed_at": AT, "agent": "A"},
        {
            "id": "hold-2",
            "reason": "matter",
            "placed_by": "legal",
            "placed_at": AT,
            "subject": "customer-42",
            "released_at": AT,
            "released_by": "legal",
            "release_reason": "closed",
        },
    ],
}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _tombstone(gov: Path, doc: Any) -> tuple[Path, Callable[[], object]]:
    path = _write(gov / "tombstones" / f"{ID}.json", json.dumps(doc))

    def read() -> object:
        store = TombstoneStore(gov)
        found = store.get(ID)
        if found is not None and found.receipt is not None:
            receipt = ErasureReceipt.from_dict(found.receipt)
            return receipt.state, receipt.per_agent(), receipt.blocking_holds
        return [t.pending for t in store.all()]

    return path, read


def _scheduled(gov: Path, doc: Any) -> tuple[Path, Callable[[], object]]:
    path = _write(gov / "scheduled-erasures" / f"{ID}.json", json.dumps(doc))
    now = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    return path, lambda: [s.due(now) for s in TombstoneStore(gov).scheduled()]


def _progress(gov: Path, doc: Any) -> tuple[Path, Callable[[], object]]:
    path = _write(gov / "tombstones" / f".{ID}.progress.jsonl", json.dumps(doc) + "\n")

    def read() -> object:
        entries = TombstoneStore(gov).progress(ID)
        return aggregate_files(entries, str(path)), aggregate_blocked(entries, str(path))

    return path, read


def _consent(gov: Path, doc: Any) -> tuple[Path, Callable[[], object]]:
    path = _write(gov / "consent.jsonl", json.dumps(doc) + "\n")

    def read() -> object:
        registry = ConsentRegistry(gov)
        return [e.granted for e in registry.history()], registry.subjects()

    return path, read


def _holds(gov: Path, doc: Any) -> tuple[Path, Callable[[], object]]:
    path = _write(gov / "holds.json", json.dumps(doc))

    def read() -> object:
        registry = HoldRegistry(gov)
        active = registry.active()
        return [h.target for h in registry.holds(include_released=True)], active.agents

    return path, read


READERS: dict[
    str, tuple[dict[str, Any], Callable[[Path, Any], tuple[Path, Callable[[], object]]]]
] = {
    "tombstone": (TOMBSTONE, _tombstone),
    "scheduled": (SCHEDULED, _scheduled),
    "progress": (PROGRESS, _progress),
    "consent": (CONSENT, _consent),
    "holds": (HOLDS, _holds),
}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field and list item of ``value``, at any depth (not the format version)."""
    items: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items() if not (prefix == () and k == "v")]
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, item in items:
        yield (*prefix, key)
        yield from _paths(item, (*prefix, key))


_DELETE = object()
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just({}),
    st.just(_DELETE),
)


def _mutated(doc: dict[str, Any], path: tuple[Any, ...], value: object) -> dict[str, Any]:
    copy = json.loads(json.dumps(doc))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copy


@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_valid_record_reads(reader: str) -> None:
    doc, make = READERS[reader]
    with tempfile.TemporaryDirectory() as folder:
        _path, read = make(Path(folder), doc)
        read()


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_wrong_typed_field_is_one_clear_error_naming_the_file(
    reader: str, data: st.DataObject
) -> None:
    doc, make = READERS[reader]
    path_in_doc = data.draw(st.sampled_from(sorted(_paths(doc), key=repr)), label="field")
    value = data.draw(WRONG, label="value")
    with tempfile.TemporaryDirectory() as folder:
        file, read = make(Path(folder), _mutated(doc, path_in_doc, value))
        try:
            read()
        except StorageError as exc:
            message = str(exc)
            assert str(file) in message, message
            assert "restore it from a backup" in message or "damaged" in message, message


def test_the_message_names_file_field_found_and_expected() -> None:
    with tempfile.TemporaryDirectory() as folder:
        bad = _mutated(TOMBSTONE, ("receipt", "files", 0, "records"), "many")
        file, read = _tombstone(Path(folder), bad)
        with pytest.raises(StorageError) as caught:
            read()
    assert str(caught.value) == (
        f"erasure record {file}, receipt: field 'files[0].records' is 'many' (str), expected "
        "a whole number, 0 or more; the file is damaged or was edited; restore it from a backup"
    )
