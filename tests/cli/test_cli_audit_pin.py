"""``audit keygen --from-master-key`` pins a derived audit key: the log continues, rotations pass it by."""

from __future__ import annotations

import base64
from pathlib import Path

from click.testing import CliRunner

from governed_memory import Governance, Settings
from governed_memory._audit import AuditKey, AuditLog
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto import generate_master_key


def _run(env: dict[str, str], *args: str) -> tuple[int, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(main, list(args), env=env, prog_name="governed-memory")
    return result.exit_code, result.stdout + result.stderr


def test_pinning_the_derived_key_keeps_the_log_and_survives_a_master_key_rotation(
    tmp_path: Path, workspace: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[policy]\nid = "bank"\nversion = "1"\n\n[audit]\nenabled = true\n')
    old, new = generate_master_key(), generate_master_key()
    base = {"WORKSPACE_DIR": str(workspace), "GOVERNED_MEMORY_POLICY": str(policy)}
    Governance(workspace=workspace, settings=Settings(policy=policy, master_key=old)).grant(
        "s-1", "persist", actor="dpo"
    )
    code, out = _run({**base, "GOVERNED_MEMORY_MASTER_KEY": old}, "audit", "keygen",
                     "--from-master-key")  # fmt: skip
    assert code == 0, out
    pinned = out.strip()
    derived = AuditKey.derive_from_master(base64.b64decode(old))
    assert AuditKey.from_text(pinned).key_id == derived.key_id  # the same key: the log goes on
    # The rotation, with the pinned key: no rekey, one key id throughout, verify with the new key.
    env = {**base, "GOVERNED_MEMORY_AUDIT_KEY": pinned, "GOVERNED_MEMORY_MASTER_KEY": new}
    code, out = _run(env, "consent", "grant", "--subject", "s-2", "--purpose", "persist")
    assert code == 0, out
    code, out = _run(env, "audit", "verify")
    assert code == 0, out
    log = AuditLog(workspace / GOVERNANCE_DIR / "audit", AuditKey.from_text(pinned))
    entries = list(log.entries())
    log.close()
    assert {e.kid for e in entries} == {AuditKey.from_text(pinned).key_id}
    assert "audit.rekey" not in [e.event for e in entries]


def test_pinning_without_a_master_key_names_the_variable() -> None:
    code, out = _run({}, "audit", "keygen", "--from-master-key")
    assert code == 1 and "GOVERNED_MEMORY_MASTER_KEY" in out
