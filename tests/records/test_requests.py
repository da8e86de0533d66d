"""The request register: events folded into requests, its rules, durability, sealing, crashes.

The tests run on the plaintext register and on the sealed one (encryption at rest).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from pathlib import Path

import pytest
from sealing_helpers import RecordMode

from governed_memory import ConfigurationError, FixedClock, NotFoundError, StorageError
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto._sealing import REQUESTS_PURPOSE
from governed_memory._errors import FormatVersionError
from governed_memory._records import RequestRegister
from governed_memory._records._requests import REQUESTS_LOG

T0 = dt.datetime(2027, 1, 31, 10, 0, tzinfo=dt.UTC)


def register(workspace: Path, mode: RecordMode, now: dt.datetime = T0) -> RequestRegister:
    """A register on the workspace (a new object: as another process would open it)."""
    return RequestRegister(
        workspace / GOVERNANCE_DIR, clock=FixedClock(now), sealing=mode.sealing()
    )


def opened(reg: RequestRegister, subject: str = "C-1042", kind: str = "erasure") -> str:
    return reg.open_request(subject=subject, kind=kind, received="2027-01-31", actor="dpo").id


def log_path(workspace: Path) -> Path:
    return workspace / GOVERNANCE_DIR / REQUESTS_LOG


def test_a_request_carries_its_arrival_and_its_legal_due_date(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = register(workspace, record_mode)
    request = reg.open_request(
        subject="C-1042",
        kind="access",
        received="2027-01-31",
        actor="dpo@example.org",
        channel="email",
        reference="DSR-2027-4",
    )
    assert request.id.startswith("req-20270131-")
    assert (request.received, request.channel, request.reference) == (
        "2027-01-31",
        "email",
        "DSR-2027-4",
    )
    assert request.due == dt.date(2027, 2, 28) and request.open
    assert register(workspace, record_mode).get(request.id) == request  # durable, re-read


def test_verification_extension_and_closing_are_kept_with_who_and_when(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = register(workspace, record_mode)
    request_id = opened(reg)
    reg.verify(request_id, by="clerk@example.org", method="passport seen", at="2027-01-31T09:00")
    extended = reg.extend(request_id, months=2, reason="records in 14 agents", actor="dpo")
    assert extended.due == dt.date(2027, 4, 30) and extended.extension is not None
    assert extended.extension.told == "2027-01-31"
    reg.close(request_id, outcome="answered", actor="dpo", receipt="erasure-1")
    again = register(workspace, record_mode).get(request_id)
    assert again.verification is not None and again.verification.by == "clerk@example.org"
    assert again.verification.method == "passport seen"
    assert again.closing is not None
    assert (again.closing.outcome, again.closing.receipt, again.closing.by) == (
        "answered",
        "erasure-1",
        "dpo",
    )


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("kind", "deletion", r"kind 'deletion' is not one of access, rectification, erasure"),
        ("received", "31/01/2027", r"received date '31/01/2027' is not a date; write it as YYYY"),
        ("received", "2027-02-30", r"is not a date"),
        ("received", "2027-02-01", r"2027-02-01 is in the future \(today is 2027-01-31\)"),
        ("subject", "", r"subject_id '' must be a non-empty string"),
        ("actor", " ", r"actor ' ' must be a non-empty text"),
    ],
)
def test_bad_input_is_refused_naming_the_value_the_rule_and_the_fix(
    workspace: Path, record_mode: RecordMode, field: str, value: str, expected: str
) -> None:
    args = {"subject": "C-1", "kind": "access", "received": "2027-01-31", "actor": "dpo"}
    args[field] = value
    with pytest.raises(ConfigurationError, match=expected):
        register(workspace, record_mode).open_request(**args)
    assert not log_path(workspace).exists()  # nothing was written


def test_an_unknown_id_names_the_command_that_lists_them(
    workspace: Path, record_mode: RecordMode
) -> None:
    with pytest.raises(NotFoundError, match=r"no request 'req-x'.*requests list"):
        register(workspace, record_mode).verify("req-x", by="dpo", method="id")


def test_closing_twice_is_refused_naming_when_and_by_whom(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = register(workspace, record_mode)
    request_id = opened(reg)
    reg.close(request_id, outcome="refused", actor="dpo", reason="manifestly unfounded")
    with pytest.raises(
        ConfigurationError, match=r"closed \(refused\) at 2027-01-31T10:00.* by dpo"
    ):
        reg.close(request_id, outcome="refused", actor="dpo", reason="again")
    with pytest.raises(ConfigurationError, match="cannot be extended"):
        reg.extend(request_id, months=1, reason="late", actor="dpo")


def test_a_refusal_needs_reasons_and_an_answer_needs_a_verified_identity(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = register(workspace, record_mode)
    request_id = opened(reg)
    with pytest.raises(ConfigurationError, match=r"needs --reason: Art\. 12\(4\)"):
        reg.close(request_id, outcome="refused", actor="dpo")
    with pytest.raises(ConfigurationError, match=r"identity is not verified.*requests verify"):
        reg.close(request_id, outcome="answered", actor="dpo", receipt="r-1")
    with pytest.raises(ConfigurationError, match="outcome 'done' is not one of"):
        reg.close(request_id, outcome="done", actor="dpo")
    assert reg.get(request_id).open


def test_an_extension_after_the_first_month_is_refused(
    workspace: Path, record_mode: RecordMode
) -> None:
    request_id = opened(register(workspace, record_mode))
    late = register(workspace, record_mode, T0 + dt.timedelta(days=29))  # 1 March: too late
    with pytest.raises(ConfigurationError, match=r"on 2027-03-01 is after the first month, which"):
        late.extend(request_id, months=1, reason="complex", actor="dpo")
    on_time = register(workspace, record_mode, T0 + dt.timedelta(days=28))  # 28 February
    with pytest.raises(ConfigurationError, match="told date 2027-03-01 is in the future"):
        on_time.extend(request_id, months=1, reason="x", actor="dpo", told="2027-03-01")
    assert on_time.extend(request_id, months=1, reason="x", actor="dpo").due == dt.date(2027, 3, 31)
    with pytest.raises(ConfigurationError, match="already extended by 1 months"):
        on_time.extend(request_id, months=1, reason="again", actor="dpo")
    with pytest.raises(ConfigurationError, match=r"outside 1\.\.2"):
        on_time.extend(request_id, months=3, reason="x", actor="dpo")


def test_the_register_is_sealed_on_disk_under_encryption(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = register(workspace, record_mode)
    request_id = reg.open_request(
        subject="C-1042-secret", kind="erasure", received="2027-01-31", actor="dpo@example.org"
    ).id
    reg.block(request_id, reason="blocked by legal hold hold-77", actor="dpo@example.org")
    data = log_path(workspace).read_bytes()
    lines = record_mode.read_lines(log_path(workspace), REQUESTS_PURPOSE, REQUESTS_LOG)
    assert [json.loads(p)["event"] for p in lines] == ["open", "block"]
    for clear in (b"C-1042-secret", b"dpo@example.org", b"hold-77"):
        assert (clear in data) is not record_mode.sealed
    assert oct(log_path(workspace).stat().st_mode & 0o777) == "0o600"


def test_reading_creates_nothing(workspace: Path, record_mode: RecordMode) -> None:
    assert register(workspace, record_mode).requests() == []
    assert not (workspace / GOVERNANCE_DIR).exists()


def test_a_torn_last_line_is_invisible_and_cut_by_the_next_change(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = register(workspace, record_mode)
    first = opened(reg)
    with open(log_path(workspace), "ab") as handle:  # a writer killed mid-line
        handle.write(b'{"v":1,"event":"close","requ')
    assert [r.id for r in register(workspace, record_mode).requests()] == [first]
    second = opened(register(workspace, record_mode), subject="C-2")
    assert [r.id for r in register(workspace, record_mode).requests()] == [first, second]


def test_kill_9_in_the_middle_of_an_append_loses_only_that_change(
    workspace: Path, record_mode: RecordMode
) -> None:
    """The child writes half of its line and dies by SIGKILL; the register reads and goes on."""
    reg = register(workspace, record_mode)
    kept = opened(reg)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            real = os.write

            def dying(fd: int, data: bytes | memoryview) -> int:
                written = real(fd, bytes(data)[: len(data) // 2])
                os.fsync(fd)
                os.kill(os.getpid(), signal.SIGKILL)
                return written

            os.write = dying  # type: ignore[assignment]
            register(workspace, record_mode).verify(kept, by="dpo", method="id")
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert not log_path(workspace).read_bytes().endswith(b"\n")  # the torn half line is there
    after = register(workspace, record_mode)
    assert after.get(kept).verification is None  # the change never acknowledged is not read
    after.verify(kept, by="dpo", method="id")  # the next writer cuts the torn line
    assert register(workspace, record_mode).get(kept).verification is not None
    assert log_path(workspace).read_bytes().endswith(b"\n")


def test_a_line_deleted_from_the_middle_breaks_the_chain_with_the_fix(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = register(workspace, record_mode)
    request_id = opened(reg)
    reg.verify(request_id, by="dpo", method="id")
    reg.close(request_id, outcome="answered", actor="dpo", receipt="r-1")
    lines = log_path(workspace).read_bytes().splitlines(keepends=True)
    log_path(workspace).write_bytes(lines[0] + lines[2])  # the verification removed
    with pytest.raises(StorageError, match=r"breaks the chain.*restore requests\.jsonl"):
        register(workspace, record_mode).requests()


def test_an_event_of_a_request_never_opened_is_a_damaged_register(workspace: Path) -> None:
    folder = workspace / GOVERNANCE_DIR
    folder.mkdir(parents=True)
    line = {"v": 1, "seq": 1, "prev": "0" * 32, "event": "close", "request": "req-1"}
    line.update({"at": T0.isoformat(), "actor": "x", "outcome": "answered"})
    (folder / REQUESTS_LOG).write_text(json.dumps(line) + "\n")
    with pytest.raises(StorageError, match="which was never opened"):
        RequestRegister(folder).requests()


def test_a_newer_format_version_names_both_versions(workspace: Path) -> None:
    folder = workspace / GOVERNANCE_DIR
    folder.mkdir(parents=True)
    (folder / REQUESTS_LOG).write_text(json.dumps({"v": 9, "event": "open"}) + "\n")
    with pytest.raises(FormatVersionError, match="format version 9; this release reads version 1"):
        RequestRegister(folder).requests()


def test_concurrent_writers_lose_no_change_and_close_once(
    workspace: Path, record_mode: RecordMode
) -> None:
    """Four processes close the same request at once: one succeeds, three are refused."""
    reg = register(workspace, record_mode)
    request_id = opened(reg)
    pids = []
    for n in range(4):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 0
            try:
                register(workspace, record_mode).close(
                    request_id, outcome="withdrawn", actor=f"w{n}", reason="asked"
                )
            except ConfigurationError:
                code = 3
            finally:
                os._exit(code)
        pids.append(pid)
    codes = sorted(os.WEXITSTATUS(os.waitpid(pid, 0)[1]) for pid in pids)
    assert codes == [0, 3, 3, 3]
    assert not register(workspace, record_mode).get(request_id).open
