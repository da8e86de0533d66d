"""``keys signing-keygen|signing-public``, ``verify receipt``, ``audit checkpoint`` and
``audit verify --public-key`` through the real entry point."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, Settings, memory_md_path
from governed_memory._base._workspace import GOVERNANCE_DIR

AUDIT_KEY = "cd" * 32


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(main, list(args), env=env or {}, prog_name="governed-memory")
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def key_file(tmp_path: Path) -> tuple[Path, str]:
    """A signing key made by the command; returns its file and the printed public key."""
    path = tmp_path / "keys" / "signing.key"
    path.parent.mkdir()
    code, out, err = run("keys", "signing-keygen", "--out", str(path))
    assert code == 0, err
    return path, out.strip()


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "audited.toml"
    path.write_text('[policy]\nid = "audited"\n\n[audit]\nenabled = true\n')
    return path


def _populate(workspace: Path, policy: Path | None = None) -> None:
    settings = Settings(policy=policy, audit_key=AUDIT_KEY) if policy else Settings()
    gov = Governance(workspace=workspace, settings=settings)
    conv = Conversation(
        memory_md_path=memory_md_path("Teller", workspace), governance=gov, subject_id="cust-7"
    )
    conv.add("Human", "what is my balance?")


def test_keygen_writes_a_0600_file_and_prints_the_public_key(
    key_file: tuple[Path, str],
) -> None:
    path, public = key_file
    assert path.stat().st_mode & 0o777 == 0o600
    env = {"GOVERNED_MEMORY_SIGNING_KEY_FILE": str(path)}
    code, out, err = run("keys", "signing-public", env=env)
    assert code == 0 and out.strip() == public
    assert err.startswith("key id: ")
    code, out, _ = run("keys", "signing-public", "--pem", env=env)
    assert out.startswith("-----BEGIN PUBLIC KEY-----")
    code, _, err = run("keys", "signing-keygen", "--out", str(path))
    assert code == 1 and str(path) in err  # never overwritten


def test_exposed_key_file_is_refused(key_file: tuple[Path, str]) -> None:
    path, _ = key_file
    os.chmod(path, 0o644)
    code, _, err = run(
        "keys", "signing-public", env={"GOVERNED_MEMORY_SIGNING_KEY_FILE": str(path)}
    )
    assert code == 1 and "chmod 600" in err and "Traceback" not in err


def test_erasure_receipt_verifies_with_the_public_key_and_tampering_fails(
    workspace: Path, tmp_path: Path, key_file: tuple[Path, str]
) -> None:
    path, public = key_file
    _populate(workspace)
    env = {"GOVERNED_MEMORY_SIGNING_KEY_FILE": str(path)}
    ws = ["--workspace", str(workspace)]
    code, out, err = run(*ws, "erase", "--subject", "cust-7", "--yes", "--json", env=env)
    assert code == 0, err
    receipt = tmp_path / "receipt.json"
    receipt.write_text(out)
    code, out, err = run("verify", "receipt", str(receipt), "--public-key", public)
    assert code == 0, err
    assert out.startswith(f"OK: {receipt} is signed by key ")
    data = json.loads(receipt.read_text())
    data["totals"]["records"] += 1
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    code, out, err = run("verify", "receipt", str(tampered), "--public-key", public)
    assert code == 1 and out.startswith("FAILED") and "changed after it was signed" in err
    other = tmp_path / "other.key"
    _, other_public, _ = run("keys", "signing-keygen", "--out", str(other))
    code, _, err = run("verify", "receipt", str(receipt), "--public-key", other_public.strip())
    assert code == 1 and "unknown_key" in err


def test_unsigned_receipt_says_unsigned(workspace: Path, tmp_path: Path) -> None:
    _populate(workspace)
    code, out, _ = run(
        "--workspace", str(workspace), "erase", "--subject", "cust-7", "--yes", "--json"
    )
    receipt = tmp_path / "receipt.json"
    receipt.write_text(out)
    pub = tmp_path / "pub"
    _, public, _ = run("keys", "signing-keygen", "--out", str(tmp_path / "k"))
    pub.write_text(public)
    code, out, _ = run("verify", "receipt", str(receipt), "--public-key", str(pub))
    assert code == 1 and out.startswith("UNSIGNED:")


def test_export_manifest_and_its_files_verify(
    workspace: Path, tmp_path: Path, key_file: tuple[Path, str]
) -> None:
    path, public = key_file
    _populate(workspace)
    out_dir = tmp_path / "export"
    env = {"GOVERNED_MEMORY_SIGNING_KEY_FILE": str(path)}
    code, _, err = run(
        "--workspace",
        str(workspace),
        "export",
        "--subject",
        "cust-7",
        "--out",
        str(out_dir),
        env=env,
    )
    assert code == 0, err
    manifest = out_dir / "manifest.json"
    code, out, err = run("verify", "receipt", str(manifest), "--public-key", public)
    assert code == 0, err
    assert "export.json: ok" in out
    (out_dir / "export.md").write_text("edited")
    code, _, err = run("verify", "receipt", str(manifest), "--public-key", public)
    assert code == 1 and "export.md: changed" in err


def test_rollback_is_detected_with_only_the_public_key(
    workspace: Path, tmp_path: Path, key_file: tuple[Path, str], policy_file: Path
) -> None:
    path, public = key_file
    _populate(workspace, policy_file)
    audit = workspace / GOVERNANCE_DIR / "audit"
    env = {"GOVERNED_MEMORY_SIGNING_KEY_FILE": str(path), "GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY}
    base = ["--workspace", str(workspace), "--policy", str(policy_file)]
    code, _, err = run(*base, "audit", "checkpoint", "--out", str(tmp_path / "cp1.json"), env=env)
    assert code == 0, err
    snapshot = tmp_path / "snapshot"
    shutil.copytree(audit, snapshot)  # what an attacker restores later
    Governance(
        workspace=workspace, settings=Settings(policy=policy_file, audit_key=AUDIT_KEY)
    ).grant("cust-9", "persist", actor="dpo")
    cp2 = tmp_path / "cp2.json"
    code, _, err = run(*base, "audit", "checkpoint", "--out", str(cp2), env=env)
    assert code == 0, err
    # The auditor: a read-only copy of the folder, the public key, the kept files; no secret.
    copy = tmp_path / "auditor-copy"
    shutil.copytree(audit, copy)
    for item in [copy, *copy.iterdir()]:
        os.chmod(item, 0o500 if item.is_dir() else 0o400)
    pub = ["--public-key", public]
    args = ["audit", "verify", "--dir", str(copy), *pub, "--checkpoint", str(cp2)]
    code, out, err = run(*args)
    assert code == 0, err
    assert "MACs were not checked" in out and "vouch for entries up to seq" in out
    shutil.rmtree(audit)
    shutil.copytree(snapshot, audit)  # rolled back to the older copy
    code, out, err = run("audit", "verify", "--dir", str(audit), *pub, "--checkpoint", str(cp2))
    assert code == 1 and "rollback" in err
    assert "Traceback" not in err
    code, out, _ = run("audit", "checkpoint", "--latest", "--dir", str(audit))
    assert (
        code == 0
        and json.loads(out)["seq"] == json.loads((tmp_path / "cp1.json").read_text())["seq"]
    )


def test_checkpoint_needs_public_key_flag(tmp_path: Path) -> None:
    cp = tmp_path / "cp.json"
    cp.write_text("{}")
    code, _, err = run("audit", "verify", "--dir", str(tmp_path), "--checkpoint", str(cp))
    assert code == 2 and "--public-key" in err
