"""``governed-memory consent grant|withdraw|status|history`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sealing_helpers import TEST_MASTER_KEY_B64, sealing_for

from governed_memory import ConsentRegistry
from governed_memory._base._workspace import GOVERNANCE_DIR


def run(workspace: Path, *args: str) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "--policy", "regulated", *args],
        env={  # the regulated policy audits and encrypts
            "GOVERNED_MEMORY_AUDIT_KEY": "ab" * 32,
            "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
            "GOVERNED_MEMORY_KEYRING_DIR": str(workspace.parent / "keyring"),
        },
    )
    return result.exit_code, result.stdout, result.stderr


def test_grant_records_actor_time_and_policy_version(workspace: Path) -> None:
    code, out, _ = run(
        workspace,
        "consent",
        "grant",
        "--subject",
        "c-42",
        "--purpose",
        "persist",
        "--actor",
        "dpo@bank.example",
        "--json",
    )
    assert code == 0
    event = json.loads(out)
    assert event["state"] == "granted" and event["actor"] == "dpo@bank.example"
    assert (event["policy_id"], event["policy_version"]) == ("regulated", "1")
    sealing = sealing_for(workspace.parent / "keyring")
    assert ConsentRegistry(workspace / GOVERNANCE_DIR, sealing=sealing).is_granted(
        "c-42", "persist"
    )
    assert b"c-42" not in (workspace / GOVERNANCE_DIR / "consent.jsonl").read_bytes()


def test_default_actor_is_the_login_name(workspace: Path) -> None:
    code, out, _ = run(workspace, "consent", "grant", "--subject", "c-42", "--purpose", "persist")
    assert code == 0 and "by cli:" in out


def test_withdraw_then_status(workspace: Path) -> None:
    run(workspace, "consent", "grant", "--subject", "c-42", "--purpose", "persist")
    code, out, _ = run(
        workspace, "consent", "withdraw", "--subject", "c-42", "--purpose", "persist"
    )
    assert code == 0 and out.startswith("withdrawn:")
    code, out, _ = run(workspace, "consent", "status", "--subject", "c-42", "--json")
    rows = {r["purpose"]: r for r in json.loads(out)}
    assert rows["persist"]["state"] == "withdrawn" and rows["persist"]["required"] is True
    assert rows["summarize"]["state"] == "never given"


def test_status_table_lists_every_subject(workspace: Path) -> None:
    run(workspace, "consent", "grant", "--subject", "alice", "--purpose", "persist")
    run(workspace, "consent", "grant", "--subject", "bob", "--purpose", "summarize")
    code, out, _ = run(workspace, "consent", "status")
    assert code == 0 and "alice" in out and "bob" in out and "never given" in out


def test_history_keeps_every_event_in_order(workspace: Path) -> None:
    for verb in ("grant", "withdraw", "grant"):
        run(workspace, "consent", verb, "--subject", "alice", "--purpose", "persist")
    code, out, _ = run(workspace, "consent", "history", "--subject", "alice", "--json")
    assert code == 0
    assert [e["action"] for e in json.loads(out)] == ["grant", "withdraw", "grant"]


def test_unknown_purpose_fails_with_exit_1_and_records_nothing(workspace: Path) -> None:
    code, _, err = run(workspace, "consent", "grant", "--subject", "a", "--purpose", "marketing")
    assert code == 1 and "'marketing' is not defined" in err
    assert not (workspace / GOVERNANCE_DIR / "consent.jsonl").exists()  # (the audit log exists)


def test_status_with_unknown_purpose_is_a_usage_error(workspace: Path) -> None:
    code, _, err = run(workspace, "consent", "status", "--purpose", "marketing")
    assert code == 2 and "marketing" in err


def test_missing_subject_is_a_usage_error(workspace: Path) -> None:
    code, _, _ = run(workspace, "consent", "grant", "--purpose", "persist")
    assert code == 2


def test_invalid_subject_fails_with_exit_1(workspace: Path) -> None:
    code, _, err = run(workspace, "consent", "grant", "--subject", " ", "--purpose", "persist")
    assert code == 1 and "subject_id" in err


def test_every_consent_command_has_help(workspace: Path) -> None:
    for command in ("grant", "withdraw", "status", "history"):
        code, out, _ = run(workspace, "consent", command, "--help")
        assert code == 0 and "Usage" in out
