"""Read-only commands record nothing: the audit log (and the workspace) are byte-identical after them.

Building a Governance writes nothing; ``policy.load`` is recorded before the
first change a Governance governs, so a command that only reads appends no
entry. Run through the real entry point over an audited workspace, plaintext
and encrypted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, Settings, memory_md_path
from governed_memory._audit import AuditKey, AuditLog
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto import generate_master_key

AUDIT_KEY = "ab" * 32
MASTER_KEY = generate_master_key()

READ_ONLY = [
    pytest.param(("agents",), id="agents"),
    pytest.param(("agents", "--json"), id="agents-json"),
    pytest.param(("isolate-subjects", "--dry-run"), id="isolate-subjects-dry-run"),
    pytest.param(("policy", "show"), id="policy-show"),
    pytest.param(("consent", "status"), id="consent-status"),
    pytest.param(("consent", "history"), id="consent-history"),
    pytest.param(("hold", "list"), id="hold-list"),
    pytest.param(("erasures", "list"), id="erasures-list"),
    pytest.param(("purge", "--dry-run"), id="retention-plan"),
    pytest.param(("scheduler", "status"), id="scheduler-status"),
    pytest.param(("keys", "status"), id="keys-status"),
    pytest.param(("keys", "status", "--json"), id="keys-status-json"),
    pytest.param(("audit", "verify"), id="audit-verify"),
    pytest.param(("audit", "verify", "--json"), id="audit-verify-json"),
    pytest.param(("policy", "show", "--json"), id="policy-show-json"),
    pytest.param(("audit", "tail"), id="audit-tail"),
    pytest.param(("audit", "export", "--since", "30d"), id="audit-export"),
    pytest.param(("audit", "lookup", "--subject", "cust-7", "--entries"), id="audit-lookup"),
]


def _policy(tmp_path: Path, encrypted: bool) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        '[policy]\nid = "bank"\nversion = "4"\n\n[audit]\nenabled = true\n\n'
        f"[encryption]\nenabled = {'true' if encrypted else 'false'}\n"
    )
    return path


def _env() -> dict[str, str]:
    return {"GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY, "GOVERNED_MEMORY_MASTER_KEY": MASTER_KEY}


def _settings(policy: Path) -> Settings:
    return Settings(policy=policy, audit_key=AUDIT_KEY, master_key=MASTER_KEY)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else b"<dir>"
        for path in sorted(folder.rglob("*"))
    }


def _run(workspace: Path, policy: Path, *args: str) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "--policy", str(policy), *args],
        env=_env(),
        prog_name="governed-memory",
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(params=[False, True], ids=["plaintext", "encrypted"])
def audited(request: pytest.FixtureRequest, workspace: Path, tmp_path: Path) -> Path:
    """A workspace with memory, an archive, consent and a hold, all audited; returns the policy."""
    policy = _policy(tmp_path, encrypted=request.param)
    gov = Governance(workspace=workspace, settings=_settings(policy))
    gov.grant("cust-7", "persist", actor="dpo")
    conv = Conversation(
        memory_md_path=memory_md_path("Teller", workspace), governance=gov, subject_id="cust-7"
    )
    conv.add("Human", "what is my balance?")
    conv.compact("the balance was asked for")
    conv.add("Teller", "It is 100.")
    from governed_memory import Retention

    Retention(gov).holds.place(subject="cust-7", reason="case 12", actor="legal")
    return policy


@pytest.mark.parametrize("args", READ_ONLY)
def test_a_read_only_command_leaves_the_audit_log_byte_identical(
    workspace: Path, audited: Path, args: tuple[str, ...]
) -> None:
    audit_dir = workspace / GOVERNANCE_DIR / "audit"
    before = _snapshot(audit_dir)
    assert before  # the fixture's changes were audited
    code, _, err = _run(workspace, audited, *args)
    assert code == 0, err
    assert _snapshot(audit_dir) == before


@pytest.mark.parametrize("args", READ_ONLY)
def test_a_read_only_command_leaves_the_workspace_as_it_was(
    workspace: Path, audited: Path, args: tuple[str, ...]
) -> None:
    before = _snapshot(workspace)
    code, _, err = _run(workspace, audited, *args)
    assert code == 0, err
    assert _snapshot(workspace) == before


def test_a_governed_change_after_read_only_commands_records_policy_load_once_before_it(
    workspace: Path, audited: Path
) -> None:
    """Each command is its own Governance: the change records policy.load, then itself."""
    for args in (("consent", "status"), ("audit", "tail"), ("agents",)):
        assert _run(workspace, audited, *args)[0] == 0
    log = AuditLog(workspace / GOVERNANCE_DIR / "audit", AuditKey.from_text(AUDIT_KEY))
    seen = len(list(log.entries()))
    code, _, err = _run(
        workspace, audited, "consent", "grant", "--subject", "cust-9", "--purpose", "persist"
    )
    assert code == 0, err
    new = list(log.entries())[seen:]
    log.close()
    assert [e.event for e in new] == ["policy.load", "consent.grant"]
    assert (new[0].attrs["policy.id"], new[0].attrs["policy.version"]) == ("bank", "4")
