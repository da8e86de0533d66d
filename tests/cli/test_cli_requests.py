"""``governed-memory requests open|verify|extend|close|list|show`` through the real entry point.

The commands read the system clock, so days are given relative to today.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governed_memory._cli import main
from governed_memory._records import RequestRegister

TODAY = dt.date.today()


def run(workspace: Path, *args: str, policy: Path | None = None) -> tuple[int, str, str]:
    head = ["--workspace", str(workspace)] + (["--policy", str(policy)] if policy else [])
    result = CliRunner().invoke(main, [*head, "requests", *args])
    return result.exit_code, result.stdout, result.stderr


def opened(workspace: Path, days_ago: int, subject: str = "C-1042", kind: str = "erasure") -> str:
    received = (TODAY - dt.timedelta(days=days_ago)).isoformat()
    code, out, err = run(
        workspace, "open", "--subject", subject, "--kind", kind, "--received", received, "--json"
    )
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    return str(found["id"])


def test_a_request_from_arrival_to_closing(workspace: Path) -> None:
    from governed_memory._subjects import erase

    code, out, err = run(
        workspace,
        "open",
        "--subject",
        "C-1042",
        "--kind",
        "erasure",
        "--received",
        TODAY.isoformat(),
        "--channel",
        "email",
        "--reference",
        "DSR-311",
        "--actor",
        "dpo@example.org",
    )
    assert code == 0, err
    assert "opened req-" in out and "erasure request of subject 'C-1042', due " in out
    (request,) = RequestRegister(workspace / ".governed_memory").requests()
    assert (request.opened_by, request.channel, request.reference) == (
        "dpo@example.org",
        "email",
        "DSR-311",
    )
    code, out, _ = run(workspace, "verify", request.id, "--by", "clerk", "--method", "passport")
    assert code == 0 and "verified" in out
    code, out, _ = run(workspace, "extend", request.id, "--months", "1", "--reason", "complex")
    assert code == 0 and "extended" in out
    receipt = erase(workspace, subject="C-1042", reason="DSR-311", actor="dpo")
    code, out, _ = run(workspace, "close", request.id, "--receipt", receipt.id, "--json")
    assert code == 0
    closed = json.loads(out)
    assert closed["state"] == "closed" and closed["closing"]["receipt"] == receipt.id
    assert closed["closing"]["by"].startswith("cli:")
    assert closed["verification"]["method"] == "passport" and closed["extension"]["months"] == 1
    code, out, _ = run(workspace, "show", request.id)
    assert code == 0 and f"answered with receipt {receipt.id}" in out and "passport" in out
    code, _, err = run(workspace, "close", request.id, "--outcome", "withdrawn")
    assert code == 1 and "was closed (answered)" in err and "Traceback" not in err


def test_open_creates_the_workspace_of_a_new_office(tmp_path: Path) -> None:
    fresh = tmp_path / "new-office"
    opened(fresh, 0)
    assert (fresh / ".governed_memory" / "requests.jsonl").is_file()


def test_overdue_and_due_within_for_cron(workspace: Path) -> None:
    late = opened(workspace, 40)  # received 40 days ago: past its month
    soon = opened(workspace, 27, subject="C-2")  # a few days left
    later = opened(workspace, 1, subject="C-3", kind="access")
    code, out, _ = run(workspace, "list", "--overdue", "--json")
    assert code == 0 and [r["id"] for r in json.loads(out)] == [late]
    assert json.loads(out)[0]["state"] == "overdue" and json.loads(out)[0]["days_left"] < 0
    code, out, _ = run(workspace, "list", "--overdue", "--fail-if-any")
    assert code == 1 and late in out
    code, out, _ = run(workspace, "list", "--due-within", "7d", "--json")
    assert [r["id"] for r in json.loads(out)] == [late, soon]
    code, out, _ = run(workspace, "list", "--json")
    assert [r["id"] for r in json.loads(out)] == [late, soon, later]  # soonest deadline first
    code, _, _ = run(workspace, "list", "--due-within", "0d", "--overdue")
    assert code == 2


def test_nothing_overdue_exits_zero_with_fail_if_any(workspace: Path) -> None:
    opened(workspace, 1)
    code, out, _ = run(workspace, "list", "--overdue", "--fail-if-any", "--json")
    assert code == 0 and json.loads(out) == []


def test_the_internal_deadline_of_the_policy_makes_a_request_late_first(
    workspace: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "office.toml"
    policy.write_text('[policy]\nid = "office"\n\n[requests]\ninternal_deadline = "14d"\n')
    request_id = opened(workspace, 20)
    code, out, _ = run(workspace, "list", "--overdue", "--json", policy=policy)
    assert code == 0
    (found,) = json.loads(out)
    assert (found["id"], found["state"]) == (request_id, "late")
    code, out, _ = run(workspace, "list", "--overdue", "--json")  # no internal deadline
    assert code == 0 and json.loads(out) == []


def test_bad_input_is_one_line_naming_value_rule_and_fix(workspace: Path) -> None:
    request_id = opened(workspace, 0)
    cases = [
        (["open", "--subject", "s", "--kind", "delete", "--received", "2026-01-01"], 2, "'delete'"),
        (["open", "--subject", "s", "--kind", "access", "--received", "1.1.2026"], 1, "YYYY-MM-DD"),
        (["show", "req-nope"], 1, "no request 'req-nope' in the register"),
        (["close", request_id, "--outcome", "refused"], 1, "needs --reason: Art. 12(4)"),
        (["close", request_id, "--receipt", "r-none"], 1, "no receipt 'r-none'"),
        (["extend", request_id, "--months", "3", "--reason", "x"], 2, "--months"),
        (["list", "--due-within", "soon"], 2, "'soon' is not a duration"),
        (["list", "--due-within", "12h"], 2, "not a whole number of days"),
        (["verify", request_id, "--by", "x", "--method", "y", "--at", "tomorrow"], 1, "YYYY-MM"),
    ]
    for args, status, needle in cases:
        code, _, err = run(workspace, *args)
        assert (code, needle in err, "Traceback" in err) == (status, True, False), (args, err)


def test_every_requests_command_has_help_and_is_in_the_runbook() -> None:
    from governed_memory._cli._requests import requests_group

    runbook = (Path(__file__).parents[2] / "docs" / "subject-requests.md").read_text()
    assert requests_group.help
    for name, command in requests_group.commands.items():
        assert command.help, name
        assert f"governed-memory requests {name}" in runbook, name
        result = CliRunner().invoke(main, ["requests", name, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.stdout


def test_under_the_regulated_policy_nothing_names_the_subject_in_clear(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The register is sealed, and the audit log holds only keyed hashes of the subject."""
    from crypto_helpers import TEST_MASTER_KEY

    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", base64.b64encode(TEST_MASTER_KEY).decode())
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", "regulated")
    request_id = opened(workspace, 3, subject="patient-4711")
    code, _, err = run(workspace, "verify", request_id, "--by", "clerk", "--method", "passport")
    assert code == 0, err
    code, out, _ = run(workspace, "show", request_id, "--json")
    shown = json.loads(out)
    assert shown["subject"] == "patient-4711"  # the office reads its own record
    assert shown["internal_due"] is not None  # regulated sets internal_deadline = "21d"
    governance = workspace / ".governed_memory"
    register = (governance / "requests.jsonl").read_bytes()
    assert b"patient-4711" not in register and b"passport" not in register
    assert register.startswith(b'{"v":2,"sealed":"gm1:')
    audit = b"".join(p.read_bytes() for p in (governance / "audit").glob("*.jsonl"))
    assert b"request.open" in audit and b"request.verify" in audit
    assert b"patient-4711" not in audit and b"clerk" not in audit
