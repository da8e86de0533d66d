"""The audit log is bound to its workspace: another workspace's log under the same key is detected.

Every segment anchor names the workspace's random id (kept in
``.governed_memory/audit-workspace-id``, outside the audit folder); verify
with the workspace checks it. A log written before the binding still
verifies, with the notice ``unbound``, and is bound by the next entry written to it
(an ``audit.bind`` entry naming the id).
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from click.testing import CliRunner

from governed_memory import FixedClock, Governance, Settings
from governed_memory._audit import AuditKey, AuditLog, FindingKind, verify_log
from governed_memory._base._workspace import GOVERNANCE_DIR

KEY_TEXT = "5a" * 32
KEY = AuditKey.from_text(KEY_TEXT)
ID_FILE = "audit-workspace-id"


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text('[policy]\nid = "bank"\nversion = "1"\n\n[audit]\nenabled = true\n')
    return path


def _audited(workspace: Path, policy: Path, subject: str = "s-1") -> Path:
    workspace.mkdir(parents=True, exist_ok=True)
    gov = Governance(workspace=workspace, settings=Settings(policy=policy, audit_key=KEY_TEXT))
    gov.grant(subject, "persist", actor="dpo")
    gov.audit.close()  # type: ignore[attr-defined]
    return workspace / GOVERNANCE_DIR / "audit"


def _verify_cli(workspace: Path, policy: Path) -> tuple[int, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "--policy", str(policy), "audit", "verify"],
        env={"GOVERNED_MEMORY_AUDIT_KEY": KEY_TEXT},
        prog_name="governed-memory",
    )
    return result.exit_code, result.stdout + result.stderr


def test_the_anchor_names_the_workspace_id_kept_outside_the_audit_folder(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "a"
    folder = _audited(workspace, _policy(tmp_path))
    stored = (workspace / GOVERNANCE_DIR / ID_FILE).read_text().strip()
    assert len(stored) == 32
    assert (workspace / GOVERNANCE_DIR / ID_FILE).stat().st_mode & 0o077 == 0
    anchor = next(iter(AuditLog(folder, KEY).entries()))
    assert anchor.event == "audit.segment" and anchor.attrs["workspace_id"] == stored
    report = verify_log(folder, KEY, workspace=workspace)
    assert report.ok and report.findings == ()


def test_another_workspaces_log_under_the_same_key_is_detected(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    mine = _audited(tmp_path / "a", policy)
    theirs = _audited(tmp_path / "b", policy, subject="s-2")
    assert verify_log(theirs, KEY).ok  # authentic on its own
    shutil.rmtree(mine)
    shutil.copytree(theirs, mine)
    code, out = _verify_cli(tmp_path / "a", policy)
    assert code == 1
    assert "foreign_log" in out and "another workspace" in out
    kinds = [f.kind for f in verify_log(mine, KEY, workspace=tmp_path / "a").findings]
    assert kinds == [FindingKind.FOREIGN_LOG]


def test_a_bound_log_without_the_workspace_id_file_is_reported(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    _audited(tmp_path / "a", policy)
    (tmp_path / "a" / GOVERNANCE_DIR / ID_FILE).unlink()
    code, out = _verify_cli(tmp_path / "a", policy)
    assert code == 1 and "foreign_log" in out and "no id file" in out


def _old_log(folder: Path, clock: FixedClock) -> None:
    log = AuditLog(folder, KEY, clock=clock, period="day")  # as written before the binding
    log.append("persist", {"outcome": "ok"})
    log.close()


def test_a_log_from_before_the_binding_verifies_with_the_notice_unbound(tmp_path: Path) -> None:
    workspace = tmp_path / "a"
    folder = workspace / GOVERNANCE_DIR / "audit"
    _old_log(folder, FixedClock(dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC)))
    report = verify_log(folder, KEY, workspace=workspace)
    assert report.ok and [f.kind for f in report.findings] == [FindingKind.UNBOUND]
    assert report.first is None
    code, out = _verify_cli(workspace, _policy(tmp_path))
    assert code == 0 and out.startswith("OK") and "unbound" in out


def test_an_unbound_log_in_place_of_a_bound_one_is_reported(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    folder = _audited(tmp_path / "a", policy)
    shutil.rmtree(folder)
    _old_log(folder, FixedClock(dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC)))
    code, out = _verify_cli(tmp_path / "a", policy)
    assert code == 1 and "foreign_log" in out


def test_an_old_log_is_bound_by_its_next_segment(tmp_path: Path) -> None:
    workspace = tmp_path / "a"
    folder = workspace / GOVERNANCE_DIR / "audit"
    _old_log(folder, FixedClock(dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC)))
    later = FixedClock(dt.datetime(2026, 12, 1, 10, tzinfo=dt.UTC))
    log = AuditLog(folder, KEY, clock=later, period="day", workspace=workspace)
    log.append("persist", {"outcome": "ok"})
    log.close()
    report = verify_log(folder, KEY, workspace=workspace)
    assert report.ok and report.findings == ()
    other = tmp_path / "b"
    other.mkdir()
    assert [f.kind for f in verify_log(folder, KEY, workspace=other).findings] == [
        FindingKind.FOREIGN_LOG
    ]


def test_an_old_log_is_bound_by_the_next_entry_written_to_it(tmp_path: Path) -> None:
    workspace = tmp_path / "a"
    folder = workspace / GOVERNANCE_DIR / "audit"
    clock = FixedClock(dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC))
    _old_log(folder, clock)
    log = AuditLog(folder, KEY, clock=clock, period="day", workspace=workspace)
    log.append("persist", {"outcome": "ok"})
    log.append("persist", {"outcome": "ok"})
    log.close()
    events = [e.event for e in AuditLog(folder, KEY).entries()]
    assert events == ["audit.segment", "persist", "audit.bind", "persist", "persist"]
    stored = (workspace / GOVERNANCE_DIR / ID_FILE).read_text().strip()
    bind = list(AuditLog(folder, KEY).entries())[2]
    assert bind.attrs["workspace_id"] == stored
    assert verify_log(folder, KEY, workspace=workspace).findings == ()
    other = tmp_path / "b"
    other.mkdir()
    assert [f.kind for f in verify_log(folder, KEY, workspace=other).findings] == [
        FindingKind.FOREIGN_LOG
    ]
