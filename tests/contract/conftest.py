"""Fixtures of the contract suites: one parameter per backend (see backends.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from backends import (
    AGENT_STORE_BACKENDS,
    HEADER,
    MEMORY_BACKENDS,
    RECORD_DOCUMENT_BACKENDS,
    RECORD_LOG_BACKENDS,
    Backend,
    OpenLog,
)
from pg_open import close_opened

from governed_memory import FixedClock


@pytest.fixture(autouse=True)
def _close_databases() -> Iterator[None]:
    """Close the PostgreSQL databases the test's params opened (pg_open.py), when it ends."""
    yield
    close_opened()


@pytest.fixture(params=AGENT_STORE_BACKENDS)
def backend(request: pytest.FixtureRequest, workspace: Path) -> Backend:
    clock = FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0))
    make: Callable[[Path, FixedClock, Callable[[], str]], Backend] = request.param
    return make(workspace, clock, lambda: HEADER)


@pytest.fixture(params=RECORD_LOG_BACKENDS)
def open_log(request: pytest.FixtureRequest, tmp_path: Path) -> OpenLog:
    make: Callable[[Path], OpenLog] = request.param
    return make(tmp_path)


@pytest.fixture(params=RECORD_DOCUMENT_BACKENDS)
def open_document(request: pytest.FixtureRequest, tmp_path: Path) -> OpenLog:
    make: Callable[[Path], OpenLog] = request.param
    return make(tmp_path)


@pytest.fixture(params=MEMORY_BACKENDS)
def memory_backend(request: pytest.FixtureRequest, workspace: Path) -> Any:
    make: Callable[[Path], Any] = request.param
    return make(workspace)
