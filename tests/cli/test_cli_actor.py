"""One rule names the operator of every command that records an actor.

``--actor``, else GOVERNED_MEMORY_ACTOR, else ``cli:<login>`` from the
password database (never ``$USER``/``$LOGNAME``, which anyone can set). So
the same operator hashes the same in every entry: an erasure they asked for
and the cancel they ran are linked by one ``actor.hash``.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governed_memory._audit import AuditKey, AuditLog
from governed_memory._base._workspace import GOVERNANCE_DIR

AUDIT_KEY = AuditKey.from_text("ab" * 32)
LOGIN = f"cli:{pwd.getpwuid(os.getuid()).pw_name}"


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text('[policy]\nid = "bank"\nversion = "1"\n\n[audit]\nenabled = true\n')
    return path


def _run(workspace: Path, policy: Path, *args: str, **env: str) -> str:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "--policy", str(policy), *args],
        # $USER and $LOGNAME name someone else: the default must not follow them.
        env={"GOVERNED_MEMORY_AUDIT_KEY": "ab" * 32, "USER": "mallory", "LOGNAME": "mallory"} | env,
        prog_name="governed-memory",
    )
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout


def _erase_entries(workspace: Path) -> list[dict[str, Any]]:
    log = AuditLog(workspace / GOVERNANCE_DIR / "audit", AUDIT_KEY)
    try:
        return [dict(e.attrs) for e in log.entries() if e.event == "erase"]
    finally:
        log.close()


def _schedule_and_cancel(workspace: Path, policy: Path, **env: str) -> tuple[dict[str, Any], ...]:
    out = _run(
        workspace, policy, "erase", "--subject", "s-1", "--grace", "30d", "--yes", "--json", **env
    )
    item = json.loads(out)
    _run(workspace, policy, "erasures", "cancel", item["id"], **env)
    scheduled, cancelled = _erase_entries(workspace)[-2:]
    assert (scheduled["outcome"], cancelled["outcome"]) == ("scheduled", "cancelled")
    return item, scheduled, cancelled


def test_erase_and_erasures_cancel_by_the_same_operator_hash_the_same(
    workspace: Path, policy: Path
) -> None:
    item, scheduled, cancelled = _schedule_and_cancel(workspace, policy)
    assert item["requested_by"] == LOGIN
    assert scheduled["actor.hash"] == cancelled["actor.hash"]
    assert scheduled["actor.hash"] == AUDIT_KEY.pseudonym("subject", LOGIN)


def test_the_actor_setting_names_the_operator_of_erase_and_cancel_alike(
    workspace: Path, policy: Path
) -> None:
    item, scheduled, cancelled = _schedule_and_cancel(
        workspace, policy, GOVERNED_MEMORY_ACTOR="dpo@bank.example"
    )
    assert item["requested_by"] == "dpo@bank.example"
    expected = AUDIT_KEY.pseudonym("subject", "dpo@bank.example")
    assert scheduled["actor.hash"] == cancelled["actor.hash"] == expected


def test_an_explicit_actor_wins_over_the_setting(workspace: Path, policy: Path) -> None:
    out = _run(
        workspace,
        policy,
        "consent",
        "grant",
        "--subject",
        "s-1",
        "--purpose",
        "persist",
        "--actor",
        "ops-1",
        GOVERNED_MEMORY_ACTOR="svc",
    )
    assert "by ops-1" in out
    out = _run(
        workspace,
        policy,
        "hold",
        "place",
        "--subject",
        "s-1",
        "--reason",
        "case 7",
        GOVERNED_MEMORY_ACTOR="legal@bank.example",
    )
    assert "by legal@bank.example" in out
