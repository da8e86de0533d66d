"""exports_max_age where retention cannot delete: exports outside the exports folder, and a database."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import (
    Conversation,
    FixedClock,
    Governance,
    Policy,
    PurgeScheduler,
    Retention,
    Settings,
    export_subject,
    memory_md_path,
)
from governed_memory._cli import main

T0 = dt.datetime.now().replace(microsecond=0)  # exports folders age by their mtime: real time
DAY = dt.timedelta(days=1)
POLICY = {"retention": {"exports_max_age": "7d"}, "consent": {"required_for": []}}


def _governance(
    made: list[Governance], workspace: Path, clock: FixedClock, url: str | None = None
) -> Governance:
    gov = Governance(
        workspace=workspace,
        policy=Policy.model_validate(POLICY),
        clock=clock,
        settings=Settings(database_url=url) if url is not None else Settings(),
    )
    made.append(gov)
    return gov


def _export(gov: Governance, out: Path) -> str:
    conversation = Conversation(
        name="A_conv", memory_md_path=memory_md_path("A", gov.workspace), governance=gov
    )
    conversation.add("Human", "alice's message", subject_id="alice")
    conversation.memory_md_path = None
    return export_subject(gov, "alice", out).id


def _retention_row(out: Path) -> dict[str, object]:
    document = json.loads((out / "export.json").read_text())
    [row] = [r for r in document["retention"]["artefacts"] if r["kind"] == "export"]
    return dict(row)


def test_an_export_outside_the_exports_folder_is_named_once_past_exports_max_age(
    workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    """Kept (no purge may delete outside its folder), and named so the operator can."""
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = _governance(governances, workspace, clock)
    export_id = _export(gov, tmp_path / "handed-over")
    assert _retention_row(tmp_path / "handed-over")["status"] == "not_managed"
    clock.advance(7 * DAY - dt.timedelta(minutes=1))  # not older than the rule yet
    assert Retention(gov).purge(dry_run=True).unmanaged_exports == ()
    clock.advance(dt.timedelta(minutes=2))
    report = Retention(gov).purge()
    [late] = report.unmanaged_exports
    assert late.id == export_id and late.out_dir == str((tmp_path / "handed-over").resolve())
    assert "exports_max_age (7d)" in late.note and str(gov.governance_dir / "exports") in late.note
    assert (tmp_path / "handed-over" / "export.json").is_file()  # never deleted from there
    assert report.to_dict()["unmanaged_exports"] == [late.to_dict()]


def test_an_export_in_the_exports_folder_is_purged_and_the_receipt_counts_the_others(
    workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    """The receipt keeps the number of unmanaged exports, never their paths (they may name a person)."""
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = _governance(governances, workspace, clock)
    exports = gov.governance_dir / "exports"
    exports.mkdir(parents=True)
    _export(gov, exports / "alice-1")
    outside = _export(gov, tmp_path / "alice-elsewhere")
    assert _retention_row(exports / "alice-1")["rule"] == "exports_max_age"
    clock.advance(8 * DAY)
    retention = Retention(gov)
    report = retention.purge()
    assert report.deleted == {"exports_max_age": 1}
    assert not (exports / "alice-1").exists()
    assert [e.id for e in report.unmanaged_exports] == [outside]
    receipt = json.loads((retention.purge_dir / "receipts" / f"{report.purge_id}.json").read_text())
    assert receipt["unmanaged_exports"] == 1 and "alice-elsewhere" not in json.dumps(receipt)


def test_a_deleted_export_folder_is_not_named_again(
    workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = _governance(governances, workspace, clock)
    _export(gov, tmp_path / "handed-over")
    clock.advance(8 * DAY)
    assert len(Retention(gov).purge(dry_run=True).unmanaged_exports) == 1
    for file in (tmp_path / "handed-over").iterdir():
        file.unlink()
    (tmp_path / "handed-over").rmdir()
    assert Retention(gov).purge(dry_run=True).unmanaged_exports == ()


def test_forever_names_no_export(
    workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = _governance(governances, workspace, clock)
    _export(gov, tmp_path / "handed-over")
    forever = Governance(workspace=workspace, clock=clock)  # the default: exports_max_age forever
    governances.append(forever)
    clock.advance(400 * DAY)
    assert Retention(forever).purge(dry_run=True).unmanaged_exports == ()


def test_on_a_database_every_export_past_exports_max_age_is_named_and_kept(
    pg_schema_url: str, workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    """A database keeps no export folder: the purge names the bundle on this host's disk."""
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = _governance(governances, workspace, clock, pg_schema_url)
    out = tmp_path / "handed-over"
    export_id = _export(gov, out)
    row = _retention_row(out)
    assert row["status"] == "not_managed" and "PostgreSQL" in str(row["note"])
    clock.advance(8 * DAY)
    report = Retention(gov).purge()
    assert report.failed == 0 and report.total_deleted == 0
    [late] = report.unmanaged_exports
    assert late.id == export_id and "the deployment's storage (PostgreSQL" in late.note
    assert (out / "export.json").is_file()
    assert list(workspace.iterdir()) == []  # nothing was written on this host's workspace


def test_the_purge_command_prints_each_unmanaged_export(
    workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    clock = FixedClock(dt.datetime.now() - 10 * DAY, tick=dt.timedelta(milliseconds=1))
    gov = _governance(governances, workspace, clock)
    export_id = _export(gov, tmp_path / "handed-over")
    policy = tmp_path / "policy.toml"
    policy.write_text('[retention]\nexports_max_age = "7d"\n')
    args = ["--workspace", str(workspace), "--policy", str(policy), "purge"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    assert f"not purged: export {export_id} of " in result.stdout
    assert "delete that folder on the host that wrote it" in result.stdout
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.stderr
    [listed] = json.loads(result.stdout)["unmanaged_exports"]
    assert listed["id"] == export_id


def test_a_scheduled_purge_logs_each_export_it_does_not_delete(
    workspace: Path, tmp_path: Path, governances: list[Governance], caplog: pytest.LogCaptureFixture
) -> None:
    """The scheduler runs unattended: its log is where the operator learns what to delete."""
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = Governance(
        workspace=workspace,
        policy=Policy.model_validate({**POLICY, "schedule": {"purge_interval": "1d"}}),
        clock=clock,
    )
    governances.append(gov)
    export_id = _export(gov, tmp_path / "handed-over")
    clock.advance(8 * DAY)
    with caplog.at_level(logging.WARNING, logger="governed_memory.scheduler"):
        report = PurgeScheduler(gov, tasks=()).run_once()
    assert report is not None
    [note] = report.notes
    [logged] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert note in logged.getMessage() and export_id in logged.getMessage()
    assert str((tmp_path / "handed-over").resolve()) in logged.getMessage()
