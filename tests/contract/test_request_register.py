"""The request register on every RecordLog backend: it needs only ``read``, ``append`` and a lock.

A database backend that passes the RecordLog suite (test_records.py) runs the
register by passing its log and a lock excluding the register's other writers.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from backends import OpenLog

from governed_memory import ConfigurationError, FixedClock
from governed_memory._base import FileLock
from governed_memory._records import RequestRegister

NOW = dt.datetime(2027, 1, 31, 10, 0, tzinfo=dt.UTC)


def _register(open_log: OpenLog, root: Path) -> RequestRegister:
    lock = FileLock(root / "register.lock")
    return RequestRegister(root / "unused", clock=FixedClock(NOW), log=open_log(), lock=lock.held)


def test_a_request_runs_from_opening_to_closing_on_any_record_log(
    open_log: OpenLog, tmp_path: Path
) -> None:
    register = _register(open_log, tmp_path)
    request = register.open_request(
        subject="C-1", kind="access", received="2027-01-31", actor="dpo"
    )
    register.verify(request.id, by="dpo", method="id document")
    register.extend(request.id, months=1, reason="complex", actor="dpo")
    register.close(request.id, outcome="answered", actor="dpo", receipt="r-1")
    again = _register(open_log, tmp_path).get(request.id)  # another process's register
    assert again.due == dt.date(2027, 3, 31)
    assert again.closing is not None and again.closing.receipt == "r-1"
    assert not (tmp_path / "unused").exists()  # the file backend's folder is never touched
    with pytest.raises(ConfigurationError, match="cannot be closed again"):
        _register(open_log, tmp_path).close(
            request.id, outcome="withdrawn", actor="dpo", reason="x"
        )
