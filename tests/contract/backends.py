"""The implementations the contract suites in this folder run over.

Each fixture is parametrised by a list of ``pytest.param``s: a new backend (a
PostgreSQL one) joins a suite by appending its param to the list, and must
then pass every test of the suite unchanged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from governed_memory import AgentStore, FixedClock, PlaintextAgentStore
from governed_memory._format import render_header
from governed_memory.testing import InMemoryStores

OpenStore = Callable[[str], AgentStore]
"""Opens a store on one agent of the backend under test (a new store object each call)."""


@dataclass
class Backend:
    """One backend's agent stores, opened on a workspace with a frozen clock."""

    open: OpenStore
    clock: FixedClock
    persistent: bool  # survives a new process (the file backends), not only a new store


def _plaintext(workspace: Path, clock: FixedClock, header: Callable[[], str]) -> Backend:
    def open_store(agent: str) -> AgentStore:
        return PlaintextAgentStore(workspace / "agents" / agent / "MEMORY.md", header, clock=clock)

    return Backend(open_store, clock, persistent=True)


def _encrypted(workspace: Path, clock: FixedClock, header: Callable[[], str]) -> Backend:
    from governed_memory import EncryptedAgentStore, Keyring, LocalKeyProvider

    keyring = Keyring(workspace.parent / "keyring", LocalKeyProvider(bytes(range(32))))

    def open_store(agent: str) -> AgentStore:
        return EncryptedAgentStore(
            workspace / "agents" / agent / "MEMORY.md", header, keyring=keyring, clock=clock
        )

    return Backend(open_store, clock, persistent=True)


def _in_memory(workspace: Path, clock: FixedClock, header: Callable[[], str]) -> Backend:
    stores = InMemoryStores(clock=clock)

    def open_store(agent: str) -> AgentStore:
        return stores(workspace / "agents" / agent / "MEMORY.md", header)

    return Backend(open_store, clock, persistent=False)


# Every AgentStore implementation. Append a pytest.param for a new backend.
AGENT_STORE_BACKENDS: list[Any] = [
    pytest.param(_plaintext, id="plaintext"),
    pytest.param(_encrypted, id="encrypted"),
    pytest.param(_in_memory, id="in-memory"),
]

HEADER = render_header("A_conversation", "2026-11-30T10:00:00")


# -- records: append-only logs and documents --------------------------------------------

OpenLog = Callable[[], Any]
"""Opens the record log under test (a new object each call, as another process would)."""


def _sealing(root: Path, sealed: bool) -> Any:
    if not sealed:
        return None
    from governed_memory import Keyring, LocalKeyProvider
    from governed_memory._crypto import RecordSealing

    return RecordSealing(Keyring(root / "keyring", LocalKeyProvider(bytes(range(32)))))


def _jsonl_log(root: Path, sealed: bool) -> OpenLog:
    from governed_memory._base import FileLock
    from governed_memory._records import JsonlLog

    def open_log() -> Any:
        return JsonlLog(
            root / "governance" / "log.jsonl",
            load=lambda data, where: data,
            what="contract log",
            lock=FileLock(root / "governance" / "log.lock"),
            version=1,
            sealing=_sealing(root, sealed),
            purpose="consent",
            context="log.jsonl",
        )

    return open_log


def _json_document(root: Path, sealed: bool) -> OpenLog:
    from governed_memory._base import FileLock
    from governed_memory._records import JsonDocument

    def open_document() -> Any:
        return JsonDocument(
            root / "governance" / "doc.json",
            what="contract document",
            version=1,
            lock=FileLock(root / "governance" / "doc.lock"),
            sealing=_sealing(root, sealed),
            purpose="holds",
            context="doc.json",
        )

    return open_document


# Every RecordLog / RecordDocument implementation. Append a pytest.param for a new backend.
RECORD_LOG_BACKENDS: list[Any] = [
    pytest.param(lambda root: _jsonl_log(root, sealed=False), id="jsonl-plaintext"),
    pytest.param(lambda root: _jsonl_log(root, sealed=True), id="jsonl-sealed"),
]
RECORD_DOCUMENT_BACKENDS: list[Any] = [
    pytest.param(lambda root: _json_document(root, sealed=False), id="json-plaintext"),
    pytest.param(lambda root: _json_document(root, sealed=True), id="json-sealed"),
]


# -- memory backends: listing and opening agents -------------------------------------------


def _file_backend(workspace: Path, encrypted: bool) -> Any:
    from governed_memory._stores import FileMemoryBackend

    clock = FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0))
    make = _encrypted if encrypted else _plaintext
    stores = make(workspace, clock, lambda: HEADER)
    return FileMemoryBackend(workspace, lambda path, header: stores.open(path.parent.name))


# Every MemoryBackend implementation. Append a pytest.param for a new backend.
MEMORY_BACKENDS: list[Any] = [
    pytest.param(lambda ws: _file_backend(ws, encrypted=False), id="files-plaintext"),
    pytest.param(lambda ws: _file_backend(ws, encrypted=True), id="files-encrypted"),
]

import pg_memory  # noqa: E402  (the PostgreSQL backend's params, kept in its own file)

AGENT_STORE_BACKENDS += pg_memory.AGENT_STORE
MEMORY_BACKENDS += pg_memory.MEMORY_BACKEND
import pg_records  # noqa: E402 (the PostgreSQL record place's params)

RECORD_LOG_BACKENDS += pg_records.RECORD_LOG
RECORD_DOCUMENT_BACKENDS += pg_records.RECORD_DOCUMENT

# -- audit storage: the hash-chained audit log (test_audit_storage.py adds the file log) ------

# Every further AuditStorage implementation. Append a pytest.param for a new backend.
AUDIT_STORAGE_BACKENDS: list[Any] = []

import pg_audit  # noqa: E402  (each backend's params join at the end, one line each)

AUDIT_STORAGE_BACKENDS += pg_audit.AUDIT_STORAGE
