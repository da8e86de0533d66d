"""The PostgreSQL record place in the record contract suites (test_records.py, test_request_register.py).

Each param opens the log or document on a :class:`PgPlace` over a fresh database
of the test server (schema upgraded), plaintext and sealed; every object a test
opens shares that database, as the processes of one workspace would; its pool is
closed when the test ends (pg_open.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pg_open import open_database
from pg_server import server

from governed_memory._postgres import PgPlace
from governed_memory._records import JsonDocument, JsonlLog


def _place() -> PgPlace:
    pg = server()
    return PgPlace(open_database(pg.url(pg.schema_database()), max_size=12))


def _sealing(root: Path, sealed: bool) -> Any:
    if not sealed:
        return None
    from governed_memory import Keyring, LocalKeyProvider
    from governed_memory._crypto import RecordSealing

    return RecordSealing(Keyring(root / "keyring", LocalKeyProvider(bytes(range(32)))))


def _log(root: Path, sealed: bool) -> Any:
    place = _place()

    def open_log() -> Any:
        return JsonlLog(
            "log.jsonl",
            place=place,
            load=lambda data, where: data,
            what="contract log",
            lock=place.lock("log.lock"),
            version=1,
            sealing=_sealing(root, sealed),
            purpose="consent",
            context="log.jsonl",
        )

    return open_log


class _Row:
    """A document's row, damaged the way the file suite damages a file (``path.write_bytes``)."""

    def __init__(self, place: PgPlace, name: str) -> None:
        self.place, self.name = place, name

    def write_bytes(self, data: bytes) -> None:
        with self.place.db.transaction() as conn:
            conn.execute(
                "UPDATE governed_memory.record_documents SET body = %s, "
                "generation = nextval('governed_memory.record_generation') WHERE name = %s",
                (data, self.name),
            )


class _Document(JsonDocument):
    @property
    def path(self) -> Any:  # the row, where the file backend has the file
        assert isinstance(self.place, PgPlace)
        return _Row(self.place, self.name)


def _document(root: Path, sealed: bool) -> Any:
    place = _place()

    def open_document() -> Any:
        return _Document(
            "doc.json",
            place=place,
            what="contract document",
            version=1,
            lock=place.lock("doc.lock"),
            sealing=_sealing(root, sealed),
            purpose="holds",
            context="doc.json",
        )

    return open_document


RECORD_LOG: list[Any] = [
    pytest.param(lambda root: _log(root, sealed=False), id="postgres-plaintext"),
    pytest.param(lambda root: _log(root, sealed=True), id="postgres-sealed"),
]
RECORD_DOCUMENT: list[Any] = [
    pytest.param(lambda root: _document(root, sealed=False), id="postgres-plaintext"),
    pytest.param(lambda root: _document(root, sealed=True), id="postgres-sealed"),
]
