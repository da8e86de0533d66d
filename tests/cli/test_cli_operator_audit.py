"""What an operator does through the CLI is audited, with the operator named.

Key rotation, workspace encryption and decryption, cancelling a scheduled
erasure, printing an agent's records (``show``) and exporting a subject each
leave an entry that names the operation, its outcome, the actor (``--actor``,
else ``GOVERNED_MEMORY_ACTOR``, else ``cli:<login>``) and keyed hashes of agent
and subject, never content. Run through the real entry point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, Settings, memory_md_path
from governed_memory._audit import AuditKey, AuditLog
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto import generate_master_key

AUDIT_KEY = AuditKey.from_text("cd" * 32)
MASTER_KEY = generate_master_key()
SECRET = "my account number is 12345678"


def _policy(tmp_path: Path, encrypted: bool) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        '[policy]\nid = "bank"\nversion = "4"\n\n[audit]\nenabled = true\n\n'
        f"[encryption]\nenabled = {'true' if encrypted else 'false'}\n"
    )
    return path


def _env(**extra: str) -> dict[str, str]:
    return {
        "GOVERNED_MEMORY_AUDIT_KEY": "cd" * 32,
        "GOVERNED_MEMORY_MASTER_KEY": MASTER_KEY,
        **extra,
    }


def _run(workspace: Path, policy: Path, *args: str, env: dict[str, str] | None = None) -> str:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "--policy", str(policy), *args],
        env=env or _env(),
        prog_name="governed-memory",
    )
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout


def _entries(workspace: Path) -> list[Any]:
    log = AuditLog(workspace / GOVERNANCE_DIR / "audit", AUDIT_KEY)
    try:
        return list(log.entries())
    finally:
        log.close()


def _new(workspace: Path, before: int) -> list[Any]:
    return [e for e in _entries(workspace)[before:] if e.event != "policy.load"]


def _actor(name: str) -> str:
    return AUDIT_KEY.pseudonym("subject", name)


@pytest.fixture
def teller(workspace: Path, tmp_path: Path) -> Path:
    """An audited plaintext workspace where agent Teller holds cust-7's records."""
    policy = _policy(tmp_path, encrypted=False)
    gov = Governance(
        workspace=workspace,
        settings=Settings(policy=policy, audit_key="cd" * 32, master_key=MASTER_KEY),
    )
    gov.grant("cust-7", "persist", actor="dpo")
    conv = Conversation(
        memory_md_path=memory_md_path("Teller", workspace), governance=gov, subject_id="cust-7"
    )
    conv.add("Human", SECRET)
    conv.add("Teller", "noted")
    gov.audit.close()  # type: ignore[attr-defined]
    return policy


def test_show_records_which_agent_and_subject_how_many_records_and_who_never_content(
    workspace: Path, teller: Path
) -> None:
    before = len(_entries(workspace))
    out = _run(workspace, teller, "show", "Teller", "--subject", "cust-7", "--actor", "ops-ann")
    assert SECRET in out
    [entry] = _new(workspace, before)
    assert entry.event == "memory.show"
    assert entry.attrs["outcome"] == "ok"
    assert entry.attrs["agent.hash"] == AUDIT_KEY.pseudonym("agent", "Teller")
    assert entry.attrs["subject.hash"] == AUDIT_KEY.pseudonym("subject", "cust-7")
    assert entry.attrs["records"] == 2
    assert entry.attrs["actor.hash"] == _actor("ops-ann")
    assert SECRET not in entry.line.decode()
    assert "cust-7" not in entry.line.decode() and "ops-ann" not in entry.line.decode()


def test_show_without_actor_names_the_configured_actor_else_the_os_user(
    workspace: Path, teller: Path
) -> None:
    import os
    import pwd

    before = len(_entries(workspace))
    _run(workspace, teller, "show", "Teller", "--json", env=_env(GOVERNED_MEMORY_ACTOR="svc-b"))
    _run(workspace, teller, "show", "Teller", "--archives")
    first, second = _new(workspace, before)
    assert first.attrs["actor.hash"] == _actor("svc-b")
    assert "subject.hash" not in first.attrs and first.attrs["records"] == 2
    assert second.attrs["actor.hash"] == _actor(f"cli:{pwd.getpwuid(os.getuid()).pw_name}")
    assert second.attrs["archives"] is True


def test_export_names_the_actor(workspace: Path, teller: Path, tmp_path: Path) -> None:
    before = len(_entries(workspace))
    out = tmp_path / "export"
    _run(workspace, teller, "export", "--subject", "cust-7", "--out", str(out), "--actor", "dpo-2")
    [entry] = _new(workspace, before)
    assert entry.event == "export"
    assert entry.attrs["actor.hash"] == _actor("dpo-2")
    assert entry.attrs["subject.hash"] == AUDIT_KEY.pseudonym("subject", "cust-7")


def test_erasures_cancel_records_the_erasure_the_subject_and_the_actor(
    workspace: Path, teller: Path
) -> None:
    _run(workspace, teller, "erase", "--subject", "cust-7", "--grace", "30d", "--yes")
    scheduled = [e for e in _entries(workspace) if e.event == "erase"][-1]
    assert scheduled.attrs["outcome"] == "scheduled"
    erasure_id = scheduled.attrs["erasure_id"]
    before = len(_entries(workspace))
    _run(workspace, teller, "erasures", "cancel", erasure_id, "--actor", "dpo-3")
    [entry] = _new(workspace, before)
    assert (entry.event, entry.attrs["outcome"]) == ("erase", "cancelled")
    assert entry.attrs["erasure_id"] == erasure_id
    assert entry.attrs["subject.hash"] == AUDIT_KEY.pseudonym("subject", "cust-7")
    assert entry.attrs["actor.hash"] == _actor("dpo-3")


def test_encrypt_and_decrypt_workspace_are_audited_with_the_actor(
    workspace: Path, teller: Path, tmp_path: Path
) -> None:
    (tmp_path / "enc").mkdir()
    encrypted = _policy(tmp_path / "enc", encrypted=True)
    before = len(_entries(workspace))
    _run(workspace, encrypted, "encrypt-workspace", "--actor", "ops-c")
    new = _new(workspace, before)
    assert [e.event for e in new][-1] == "encrypt-workspace"
    assert new[-1].attrs["outcome"] == "ok" and new[-1].attrs["actor.hash"] == _actor("ops-c")
    assert {e.attrs.get("actor.hash") for e in new} == {_actor("ops-c")}  # keys.create too
    before = len(_entries(workspace))
    _run(workspace, teller, "decrypt-workspace", "--actor", "ops-d")
    [entry] = _new(workspace, before)
    assert entry.event == "decrypt-workspace" and entry.attrs["actor.hash"] == _actor("ops-d")


@pytest.mark.parametrize("reencrypt", [False, True], ids=["rotate", "rotate-reencrypt"])
def test_keys_rotate_is_audited_with_the_actor(
    workspace: Path, tmp_path: Path, reencrypt: bool
) -> None:
    policy = _policy(tmp_path, encrypted=True)
    gov = Governance(
        workspace=workspace,
        settings=Settings(policy=policy, audit_key="cd" * 32, master_key=MASTER_KEY),
    )
    Conversation(memory_md_path=memory_md_path("Teller", workspace), governance=gov).add(
        "Human", "hello"
    )
    new_key = generate_master_key()
    env = _env(GOVERNED_MEMORY_MASTER_KEY=new_key, GOVERNED_MEMORY_MASTER_KEY_OLD=MASTER_KEY)
    before = len(_entries(workspace))
    _run(workspace, policy, "keys", "rotate", *(["--reencrypt"] if reencrypt else []),
         "--actor", "ops-e", env=env)  # fmt: skip
    new = _new(workspace, before)
    events = [e.event for e in new]
    assert "keys.rotate" in events
    assert ("keys.reencrypt" in events) is reencrypt
    assert {e.attrs.get("actor.hash") for e in new} == {_actor("ops-e")}


def _snapshot(folder: Path, skip: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(folder.rglob("*"))
        if skip not in p.parents and p != skip
    }


def test_show_writes_only_its_audit_entry_and_the_chain_still_verifies(
    workspace: Path, teller: Path
) -> None:
    audit_dir = workspace / GOVERNANCE_DIR / "audit"
    before = _snapshot(workspace, audit_dir)
    _run(workspace, teller, "show", "Teller")
    assert _snapshot(workspace, audit_dir) == before
    assert "OK" in _run(workspace, teller, "audit", "verify")


def test_keys_rotate_with_an_old_key_file_continues_a_derived_audit_key(
    workspace: Path, tmp_path: Path
) -> None:
    """--old-key-file also gives the audit key's previous version (docs/audit.md, versioned keys)."""
    policy = _policy(tmp_path, encrypted=True)
    gov = Governance(workspace=workspace, settings=Settings(policy=policy, master_key=MASTER_KEY))
    Conversation(memory_md_path=memory_md_path("Teller", workspace), governance=gov).add(
        "Human", "hello"
    )
    old_file = tmp_path / "old.key"
    old_file.write_text(MASTER_KEY)
    old_file.chmod(0o600)
    new_key = generate_master_key()
    _run(workspace, policy, "keys", "rotate", "--old-key-file", str(old_file),
         env={"GOVERNED_MEMORY_MASTER_KEY": new_key})  # fmt: skip
    code_env = {"GOVERNED_MEMORY_MASTER_KEY": new_key, "GOVERNED_MEMORY_MASTER_KEY_OLD": MASTER_KEY}
    assert "OK" in _run(workspace, policy, "audit", "verify", env=code_env)
