"""``governed-memory audit verify|tail|export|lookup|repair|keygen`` through the real entry point."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, Settings, memory_md_path
from governed_memory._audit import AuditKey, AuditLog, verify_log
from governed_memory._base._workspace import GOVERNANCE_DIR

KEY_TEXT = "cd" * 32
KEY = AuditKey.from_text(KEY_TEXT)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "audited.toml"
    path.write_text('[policy]\nid = "audited"\nversion = "3"\n\n[audit]\nenabled = true\n')
    return path


@pytest.fixture
def audited(workspace: Path, policy_file: Path) -> Path:
    """A workspace with a few audited operations; returns its audit folder."""
    gov = Governance(
        workspace=workspace,
        settings=Settings(policy=policy_file, audit_key=KEY_TEXT),
    )
    conv = Conversation(
        memory_md_path=memory_md_path("Teller", workspace), governance=gov, subject_id="cust-7"
    )
    conv.add("Human", "what is my balance?")
    conv.add("Teller", "It is 100.")
    gov.grant("cust-9", "persist", actor="dpo")
    return workspace / GOVERNANCE_DIR / "audit"


def run(
    workspace: Path, policy_file: Path | None, *args: str, key: str | None = KEY_TEXT
) -> tuple[int, str, str]:
    from governed_memory._cli import main

    options = ["--workspace", str(workspace)]
    if policy_file is not None:
        options += ["--policy", str(policy_file)]
    env = {"GOVERNED_MEMORY_AUDIT_KEY": key} if key else {}
    result = CliRunner().invoke(main, [*options, *args], env=env, prog_name="governed-memory")
    return result.exit_code, result.stdout, result.stderr


def test_verify_an_intact_log(workspace: Path, policy_file: Path, audited: Path) -> None:
    code, out, err = run(workspace, policy_file, "audit", "verify")
    assert code == 0, err
    assert out.startswith(f"OK: {audited}: 1 segment(s), 5 entries (seq 1..5)")


def test_verify_names_the_first_altered_entry_and_exits_1(
    workspace: Path, policy_file: Path, audited: Path
) -> None:
    (segment,) = audited.glob("audit-*.jsonl")
    lines = segment.read_bytes().splitlines()
    lines[3] = lines[3].replace(b'"outcome":"ok"', b'"outcome":"memory_only"')
    segment.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out, err = run(workspace, policy_file, "audit", "verify")
    assert code == 1
    assert out.startswith("FAILED")
    assert f"{segment.name}:4 seq 4: altered:" in out
    assert err.startswith(f"error: audit log verification failed at {segment.name}:4 seq 4")


def test_verify_json_is_the_report(workspace: Path, policy_file: Path, audited: Path) -> None:
    (segment,) = audited.glob("audit-*.jsonl")
    segment.write_bytes(b"".join(line + b"\n" for line in segment.read_bytes().splitlines()[:-1]))
    code, out, _ = run(workspace, policy_file, "audit", "verify", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and report["findings"][0]["kind"] == "truncated"
    assert report["findings"][0]["seq"] == 5


def test_verify_with_the_wrong_key_says_so(
    workspace: Path, policy_file: Path, audited: Path
) -> None:
    code, out, _ = run(workspace, policy_file, "audit", "verify", key="ef" * 32)
    assert code == 1 and "wrong_key" in out and KEY.key_id in out


def test_verify_without_a_key_names_the_setting(
    workspace: Path, policy_file: Path, audited: Path
) -> None:
    code, _, err = run(workspace, policy_file, "audit", "verify", key=None)
    assert code == 1 and "GOVERNED_MEMORY_AUDIT_KEY" in err


def test_verify_where_there_is_no_log_fails(workspace: Path, policy_file: Path) -> None:
    code, _, err = run(workspace, policy_file, "audit", "verify")
    assert code == 1 and "there is no audit log in" in err


def test_tail_shows_the_newest_entries(workspace: Path, policy_file: Path, audited: Path) -> None:
    code, out, _ = run(workspace, policy_file, "audit", "tail", "-n", "2", "--json")
    assert code == 0
    entries = json.loads(out)
    assert [e["event"] for e in entries] == ["persist", "consent.grant"]
    assert [e["seq"] for e in entries] == [4, 5]
    code, out, _ = run(workspace, policy_file, "audit", "tail")
    assert code == 0 and "consent.grant" in out and "policy.load" in out
    assert "cust-7" not in out and "Teller" not in out


def test_export_since_writes_json_lines(
    workspace: Path, policy_file: Path, audited: Path, tmp_path: Path
) -> None:
    out_file = tmp_path / "review" / "audit.jsonl"
    code, _, err = run(
        workspace, policy_file, "audit", "export", "--since", "2000-01-01", "--out", str(out_file)
    )
    assert code == 0 and "exported 5 entries" in err
    assert (out_file.stat().st_mode & 0o777) == 0o600
    exported = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [e["seq"] for e in exported] == [1, 2, 3, 4, 5]
    assert exported == [e.to_dict() for e in AuditLog(audited, KEY).entries()]


def test_export_to_an_unusable_folder_is_one_line_naming_the_path(
    workspace: Path, policy_file: Path, audited: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "review"
    blocker.write_text("")
    out_file = blocker / "audit.jsonl"
    code, out, err = run(
        workspace, policy_file, "audit", "export", "--since", "2000-01-01", "--out", str(out_file)
    )
    assert code == 1 and out == ""
    assert err.startswith(f"error: could not write the audit export {out_file}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert blocker.read_text() == ""


def test_export_since_an_age_and_the_future(
    workspace: Path, policy_file: Path, audited: Path
) -> None:
    code, out, _ = run(workspace, policy_file, "audit", "export", "--since", "1h")
    assert code == 0 and len(out.splitlines()) == 5
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat()
    code, out, _ = run(workspace, policy_file, "audit", "export", "--since", future)
    assert code == 0 and out == ""


def test_export_with_a_bad_since_is_a_usage_error(
    workspace: Path, policy_file: Path, audited: Path
) -> None:
    code, _, err = run(workspace, policy_file, "audit", "export", "--since", "last tuesday")
    assert code == 2 and "'last tuesday'" in err and "7d" in err


def test_lookup_prints_the_subject_hash_and_finds_its_entries(
    workspace: Path, policy_file: Path, audited: Path
) -> None:
    code, out, _ = run(workspace, policy_file, "audit", "lookup", "--subject", "cust-7")
    digest = KEY.pseudonym("subject", "cust-7")
    assert code == 0 and out.strip() == f"subject.hash = {digest}"
    code, out, _ = run(
        workspace, policy_file, "audit", "lookup", "--subject", "cust-7", "--entries", "--json"
    )
    found = json.loads(out)
    assert found["hash"] == digest
    assert [e["event"] for e in found["entries"]] == ["persist", "persist"]
    code, out, _ = run(workspace, policy_file, "audit", "lookup", "--agent", "Teller")
    assert out.strip() == f"agent.hash = {KEY.pseudonym('agent', 'Teller')}"


def test_lookup_needs_exactly_one_target(workspace: Path, policy_file: Path) -> None:
    code, _, err = run(workspace, policy_file, "audit", "lookup", "--subject", "a", "--agent", "b")
    assert code == 2 and "exactly one" in err


def test_repair_closes_off_a_torn_line(workspace: Path, policy_file: Path, audited: Path) -> None:
    (segment,) = audited.glob("audit-*.jsonl")
    with open(segment, "ab") as file:
        file.write(b'{"attrs":{"out')
    code, _, _ = run(workspace, policy_file, "audit", "verify")
    assert code == 1
    code, out, _ = run(workspace, policy_file, "audit", "repair")
    assert code == 0 and re.search(r"wrote seq 6: audit\.repair .*line=6", out)
    code, out, _ = run(workspace, policy_file, "audit", "verify")
    assert code == 0 and "torn lines closed off after a crash" in out
    code, out, _ = run(workspace, policy_file, "audit", "repair")
    assert code == 0 and "nothing to repair" in out


def test_dir_reads_a_copied_log(workspace: Path, audited: Path, tmp_path: Path) -> None:
    code, out, _ = run(workspace, None, "audit", "verify", "--dir", str(audited))
    assert code == 0 and out.startswith("OK")


def test_keygen_prints_a_usable_key(workspace: Path) -> None:
    code, out, _ = run(workspace, None, "audit", "keygen")
    assert code == 0 and re.fullmatch(r"[0-9a-f]{64}\n", out)
    AuditKey.from_text(out)


def test_policy_log_dir_is_honoured(workspace: Path, tmp_path: Path) -> None:
    policy = tmp_path / "elsewhere.toml"
    policy.write_text(f'[audit]\nenabled = true\nlog_dir = "{tmp_path / "central"}"\n')
    gov = Governance(workspace=workspace, settings=Settings(policy=policy, audit_key=KEY_TEXT))
    gov.audit.record("policy.load", agent=None, subject_id=None, outcome="ok")
    assert verify_log(tmp_path / "central", KEY).entries == 2
    code, out, _ = run(workspace, policy, "audit", "verify")
    assert code == 0 and str(tmp_path / "central") in out
