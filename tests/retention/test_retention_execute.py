"""Applying purges: idempotence, crash and resume, re-checks before deleting, every kind."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from governed_memory import Conversation, FixedClock, Governance, NullAuditSink, Policy
from governed_memory._errors import FormatVersionError
from governed_memory._retention import (
    Executor,
    Journal,
    JournalError,
    PurgeInProgressError,
    Retention,
    Tally,
    iter_plan,
)
from governed_memory._retention._journal import write_journal
from governed_memory._retention._purge import _PurgeLock
from governed_memory.testing import RecordingAuditSink

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)


def make_policy(**retention: object) -> Policy:
    audit = any(key.startswith("audit_") for key in retention)
    return Policy.model_validate({"retention": retention, "audit": {"enabled": audit}})


def populate(workspace: Path, agents: int = 3, compactions: int = 4) -> None:
    """Agents compacting once a day from T0: archives named T0, T0+1d, ..."""
    for a in range(agents):
        clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
        conv = Conversation(
            name=f"c{a}",
            memory_md_path=workspace / "agents" / f"agent{a}" / "MEMORY.md",
            clock=clock,
        )
        for day in range(compactions):
            conv.add("User", f"day {day} for agent {a}", subject_id=f"subject{a}")
            conv.compact(f"summary {day}")
            clock.advance(DAY)


def archives(workspace: Path) -> list[str]:
    return sorted(p.name for p in workspace.glob("agents/*/archive/history_*"))


def retention(workspace: Path, when: dt.datetime, **rules: object) -> Retention:
    gov = Governance(workspace=workspace, policy=make_policy(**rules), clock=FixedClock(when))
    return Retention(gov)


def test_day_29_keeps_day_31_deletes(workspace: Path) -> None:
    populate(workspace, agents=1, compactions=1)
    assert len(archives(workspace)) == 1
    assert retention(workspace, T0 + 29 * DAY, archives_max_age="30d").purge().total_deleted == 0
    assert len(archives(workspace)) == 1
    report = retention(workspace, T0 + 31 * DAY, archives_max_age="30d").purge()
    assert report.deleted == {"archives_max_age": 1}
    assert archives(workspace) == []
    assert (workspace / "agents" / "agent0" / "MEMORY.md").exists()


def test_second_run_deletes_nothing_more(workspace: Path) -> None:
    populate(workspace)
    r = retention(workspace, T0 + 40 * DAY, archives_max_count=1)
    first = r.purge()
    assert first.deleted == {"archives_max_count": 9}
    assert first.bytes_freed > 0
    assert len(archives(workspace)) == 3
    second = r.purge()
    assert second.total_deleted == 0 and second.bytes_freed == 0
    assert len(archives(workspace)) == 3
    assert r.pending() is None  # journal removed once applied


def test_a_purge_that_finds_nothing_writes_nothing(workspace: Path) -> None:
    populate(workspace)
    before = sorted(str(p) for p in workspace.rglob("*"))
    report = retention(workspace, T0 + 1000 * DAY).purge()  # default rules: keep forever
    assert report.total_deleted == 0
    assert sorted(str(p) for p in workspace.rglob("*")) == before
    assert not (workspace / ".governed_memory").exists()


def test_dry_run_deletes_and_writes_nothing(workspace: Path) -> None:
    populate(workspace)
    before = sorted(str(p) for p in workspace.rglob("*"))
    report = retention(workspace, T0 + 40 * DAY, archives_max_age="30d").purge(dry_run=True)
    assert report.dry_run and report.deleted == {"archives_max_age": 12}
    assert report.plan is not None and len(report.plan.deletions) == 12
    assert sorted(str(p) for p in workspace.rglob("*")) == before


def test_as_of_applies_the_policy_at_another_moment(workspace: Path) -> None:
    populate(workspace, agents=1, compactions=4)  # archives T0 .. T0+3d
    r = retention(workspace, T0, archives_max_age="30d")
    assert r.purge(as_of=T0 + 32 * DAY, dry_run=True).total_deleted == 2
    # A purge that deletes cannot run ahead of the clock (see the tests below):
    # it runs as of T0 + 32d once the clock is there.
    r = retention(workspace, T0 + 40 * DAY, archives_max_age="30d")
    report = r.purge(as_of=T0 + 32 * DAY)
    assert report.as_of == T0 + 32 * DAY and report.total_deleted == 2
    assert len(archives(workspace)) == 2


def test_receipt_records_counts_without_paths(workspace: Path) -> None:
    populate(workspace, agents=1)
    report = retention(workspace, T0 + 40 * DAY, archives_max_age="30d").purge()
    receipt = workspace / ".governed_memory" / "purge" / "receipts" / f"{report.purge_id}.json"
    data = json.loads(receipt.read_text())
    assert data["deleted"] == {"archives_max_age": 4} and data["v"] == 1
    assert "history_" not in receipt.read_text()


def test_purge_lock_refuses_a_second_purge(workspace: Path) -> None:
    populate(workspace, agents=1)
    r = retention(workspace, T0 + 40 * DAY, archives_max_age="30d")
    other = _PurgeLock(r.purge_dir, workspace)
    other.acquire()
    try:
        with pytest.raises(PurgeInProgressError, match="another purge is running"):
            r.purge()
    finally:
        other.release()
    assert len(archives(workspace)) == 4  # nothing deleted while refused
    assert r.purge().total_deleted == 4


KILLER = textwrap.dedent(
    """
    import datetime as dt, os, signal, sys, threading
    from pathlib import Path
    from governed_memory import FixedClock, Policy
    from governed_memory import Governance
    from governed_memory._retention import Retention

    workspace, after = Path(sys.argv[1]), int(sys.argv[2])
    policy = Policy.model_validate({"retention": {"archives_max_age": "30d"}})
    gov = Governance(workspace=workspace, policy=policy,
                     clock=FixedClock(dt.datetime(2026, 3, 1)))
    real_unlink, calls, lock = os.unlink, [0], threading.Lock()

    def unlink(path, *args, **kwargs):
        with lock:
            calls[0] += 1
            if calls[0] > after:  # kill -9 in the middle of the deletions
                os.kill(os.getpid(), signal.SIGKILL)
        return real_unlink(path, *args, **kwargs)

    os.unlink = unlink
    Retention(gov).purge()
    """
)


def test_kill_9_mid_purge_then_resume(workspace: Path, tmp_path: Path) -> None:
    populate(workspace, agents=30, compactions=2)
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    proc = subprocess.run(
        [sys.executable, str(script), str(workspace), "25"], check=False, timeout=120
    )
    assert proc.returncode == -9
    left = archives(workspace)
    # Killed at the 26th deletion (deletions in flight on other threads may not have run).
    assert 60 - 25 <= len(left) < 60
    r = retention(workspace, dt.datetime(2026, 3, 1), archives_max_age="30d")
    journal = r.pending()
    assert journal is not None and journal.total == 60
    recorded = journal.outcomes()
    assert set(recorded) <= {ord("d")} and len(recorded) <= 25  # a prefix of the journal

    report = r.purge()
    assert report.resumed == journal.header["id"]
    # Every planned archive is accounted for: recorded deleted before the kill,
    # deleted now, or found gone (deleted before the kill, not yet recorded).
    deleted = report.deleted["archives_max_age"]
    assert deleted + report.gone == 60 and deleted >= len(recorded) + len(left)
    assert archives(workspace) == []
    assert r.pending() is None
    again = r.purge()
    assert again.total_deleted == 0 and again.resumed is None


def test_interrupted_purge_of_another_policy_version_is_dropped(
    workspace: Path, tmp_path: Path
) -> None:
    """An admin who changed the policy after a crash gets the new policy, not the old plan."""
    populate(workspace, agents=30, compactions=2)
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    killed = subprocess.run([sys.executable, str(script), str(workspace), "25"], timeout=120)
    assert killed.returncode == -9
    left = archives(workspace)
    relaxed = Policy.model_validate(
        {"policy": {"version": "2"}, "retention": {"archives_max_age": "forever"}}
    )
    gov = Governance(workspace=workspace, policy=relaxed, clock=FixedClock(dt.datetime(2026, 3, 1)))
    report = Retention(gov).purge()
    assert report.discarded is not None and report.resumed is None
    assert report.total_deleted == 0 and archives(workspace) == left
    assert Retention(gov).pending() is None


def _journal(r: Retention, now: dt.datetime) -> Journal:
    policy = r.governance.policy
    footer = write_journal(r.purge_dir, {"id": "test"}, iter_plan(r.scan(), policy.retention, now))
    assert footer["end"] > 0
    return Journal(r.purge_dir)


def _executor(r: Retention) -> Executor:
    return r._executor()


def test_executor_is_idempotent_on_the_same_journal(workspace: Path) -> None:
    populate(workspace, agents=2)
    r = retention(workspace, T0, archives_max_age="30d")
    journal = _journal(r, T0 + 40 * DAY)
    first, second = Tally(), Tally()
    _executor(r).run(journal, first)
    (r.purge_dir / "progress").unlink()  # forget the progress: everything is re-checked
    _executor(r).run(journal, second)
    assert sum(first.deleted.values()) == 8
    assert sum(second.deleted.values()) == 0 and second.gone == 8


def test_file_written_after_planning_is_kept(workspace: Path) -> None:
    """An idle agent that wakes up between plan and delete keeps its memory."""
    populate(workspace, agents=1, compactions=1)
    r = retention(workspace, T0, idle_memory_max_age="30d")
    journal = _journal(r, T0 + 400 * DAY)
    memory = workspace / "agents" / "agent0" / "MEMORY.md"
    conv = Conversation(name="c", memory_md_path=memory, clock=FixedClock(T0 + 400 * DAY))
    conv.add("User", "I am back")
    tally = Tally()
    _executor(r).run(journal, tally)
    assert tally.changed == 1 and not tally.deleted
    assert "I am back" in memory.read_text()


def test_hold_placed_after_planning_still_wins(workspace: Path) -> None:
    populate(workspace, agents=2)
    r = retention(workspace, T0, archives_max_age="30d")
    journal = _journal(r, T0 + 40 * DAY)
    r.holds.place(agent="agent1", reason="late hold", actor="legal")
    tally = Tally()
    _executor(r).run(journal, tally)
    assert tally.deleted == {"archives_max_age": 4} and tally.held == {"archives_max_age": 4}
    assert all("agent1" in str(p) for p in workspace.glob("agents/*/archive/*"))


def test_subject_hold_protects_only_files_with_that_subjects_records(workspace: Path) -> None:
    populate(workspace, agents=3)
    agent1 = workspace / "agents" / "agent1"
    Conversation(name="c1", memory_md_path=agent1 / "MEMORY.md").add(
        "User", "still talking", subject_id="subject1"
    )
    old = T0.timestamp()
    for memory in workspace.glob("agents/*/MEMORY.md"):
        os.utime(memory, (old, old))  # every agent idle since T0
    r = retention(workspace, T0 + 40 * DAY, archives_max_age="30d", idle_memory_max_age="30d")
    r.holds.place(subject="subject1", reason="case", actor="legal")
    report = r.purge()
    # agent1's archives and memory hold subject1's records; the others' do not.
    assert report.held == {"archives_max_age": 4, "idle_memory_max_age": 1}
    assert report.deleted == {"archives_max_age": 8, "idle_memory_max_age": 2}
    assert archives(workspace) == sorted(p.name for p in (agent1 / "archive").iterdir())
    assert [p.parent.name for p in workspace.glob("agents/*/MEMORY.md")] == ["agent1"]


def test_edited_journal_cannot_delete_outside_the_layout(workspace: Path) -> None:
    populate(workspace, agents=1)
    r = retention(workspace, T0, archives_max_age="30d")
    journal = _journal(r, T0 + 40 * DAY)
    lines = journal.path.read_text().splitlines()
    entry = json.loads(lines[1])
    victim = workspace / "agents" / "agent0" / "notes.txt"
    victim.write_text("keep me")
    entry[2] = "agents/agent0/notes.txt"
    lines[1] = json.dumps(entry)
    journal.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match="not a purgeable artefact"):
        _executor(r).run(Journal(r.purge_dir), Tally())
    assert victim.read_text() == "keep me"


def test_encrypted_archives_are_recognised_and_held_when_unreadable(workspace: Path) -> None:
    archive_dir = workspace / "agents" / "vault" / "archive"
    archive_dir.mkdir(parents=True)
    (archive_dir / "history_2026-01-01_12-00-00.gmenc").write_bytes(b"\x00ciphertext")
    (archive_dir / "history_2026-01-01_12-00-00_000001.gmenc").write_bytes(b"\x00ciphertext")
    r = retention(workspace, T0 + 40 * DAY, archives_max_age="30d")
    assert r.purge(dry_run=True).deleted == {"archives_max_age": 2}
    r.holds.place(subject="someone", reason="case", actor="legal")
    report = r.purge()
    assert report.total_deleted == 0 and report.total_held == 2  # whose records? unknown: kept


def test_governance_artefacts_are_purged_by_their_rules(workspace: Path) -> None:
    gov_dir = workspace / ".governed_memory"
    old = (T0 - 100 * DAY).timestamp()
    exports = gov_dir / "exports"
    (exports / "export-old").mkdir(parents=True)
    (exports / "export-old" / "data.json").write_text("{}")
    (exports / "export-new").mkdir()
    os.utime(exports / "export-old", (old, old))
    tomb = gov_dir / "tombstones"
    tomb.mkdir()
    done = {"v": 1, "state": "complete", "completed_at": (T0 - 100 * DAY).astimezone().isoformat()}
    (tomb / "t-done.json").write_text(json.dumps(done))
    (tomb / "t-pending.json").write_text(json.dumps({"v": 1, "state": "pending"}))
    os.utime(tomb / "t-pending.json", (old, old))
    r = retention(workspace, T0, exports_max_age="30d", tombstones_max_age="30d")
    report = r.purge()
    assert report.deleted == {"exports_max_age": 1, "tombstones_max_age": 1}
    assert sorted(p.name for p in exports.iterdir()) == ["export-new"]
    assert sorted(p.name for p in tomb.iterdir()) == ["t-pending.json"]


def test_audit_segments_are_purged_through_the_audit_log(workspace: Path) -> None:
    """Old segments go, oldest first, recorded in the chain; `audit verify` still passes."""
    from governed_memory._audit import AuditKey, AuditLog, AuditTrail, verify_log

    key = AuditKey(b"k" * 32)
    clock = FixedClock(dt.datetime(2026, 1, 15, 12, 0))
    folder = workspace / ".governed_memory" / "audit"
    trail = AuditTrail(key=key, log=AuditLog(folder, key, clock=clock), spans=False)
    policy = make_policy(audit_min_age="30d", audit_max_age="60d")
    gov = Governance(workspace=workspace, policy=policy, clock=clock, audit=trail)
    for month in (1, 2, 3, 4):  # one segment per month: audit-2026-01 .. audit-2026-04
        clock.set(dt.datetime(2026, month, 15, 12, 0))
        gov.audit.record("policy.load", agent=None, subject_id=None, outcome="ok")
    clock.set(dt.datetime(2026, 4, 20, 12, 0))
    r = Retention(gov)
    assert [i.artefact.path.rsplit("/", 1)[1] for i in r.plan().deletions] == [
        "audit-2026-01.jsonl",  # last entry 95 days old
        "audit-2026-02.jsonl",  # 64 days; March (36 days) and April (live) stay
    ]
    report = r.purge()
    assert report.deleted == {"audit_max_age": 2} and report.failed == 0
    assert sorted(p.name for p in folder.glob("audit-*")) == [
        "audit-2026-03.jsonl",
        "audit-2026-04.jsonl",
    ]
    assert verify_log(folder, [key]).ok
    assert any(e.event == "audit.purge" for e in trail.log.entries())  # type: ignore[union-attr]
    trail.close()


def test_audit_segments_are_not_deleted_without_the_audit_log(workspace: Path) -> None:
    """Deleting segments behind the log's back would break its chain: refused, reported."""
    from governed_memory._audit import AuditKey, AuditLog

    folder = workspace / ".governed_memory" / "audit"
    clock = FixedClock(T0 - 400 * DAY)
    log = AuditLog(folder, AuditKey(b"k" * 32), clock=clock)
    for month in (0, 40, 80):
        clock.set(T0 - (400 - month) * DAY)
        log.append("policy.load", {"outcome": "ok"})
    log.close()
    gov = Governance(
        workspace=workspace,
        policy=make_policy(audit_max_age="30d"),
        clock=FixedClock(T0),
        audit=NullAuditSink(),  # no audit key configured here
    )
    report = Retention(gov).purge()
    assert report.total_deleted == 0 and report.failed == 2  # the newest segment is never planned
    assert "audit key" in report.errors[0]
    assert len(list(folder.glob("audit-*.jsonl"))) == 3


def test_consent_records_keep_the_grant_in_force(workspace: Path) -> None:
    clock = FixedClock(T0)
    gov = Governance(
        workspace=workspace, policy=make_policy(consent_records_max_age="30d"), clock=clock
    )
    gov.grant("alice", "persist", actor="app")
    clock.advance(DAY)
    gov.withdraw("alice", "persist", actor="app")
    clock.advance(DAY)
    gov.grant("alice", "persist", actor="app")  # in force: kept however old
    gov.grant("bob", "persist", actor="app")
    clock.advance(DAY)
    gov.withdraw("bob", "persist", actor="app")  # latest, a withdrawal: may go when old
    clock.set(T0 + 100 * DAY)
    report = Retention(gov).purge()
    assert report.deleted == {"consent_records_max_age": 4}
    assert gov.consent.is_granted("alice", "persist")
    assert not gov.consent.is_granted("bob", "persist")
    assert len(gov.consent.history()) == 1


def test_purges_and_hold_changes_are_audited(workspace: Path) -> None:
    populate(workspace, agents=2)
    sink = RecordingAuditSink()
    policy = Policy.model_validate(
        {"policy": {"id": "bank", "version": "2"}, "retention": {"archives_max_age": "30d"}}
    )
    gov = Governance(
        workspace=workspace, policy=policy, clock=FixedClock(T0 + 40 * DAY), audit=sink
    )
    r = Retention(gov)
    hold = r.holds.place(agent="agent1", reason="case", actor="legal")
    report = r.purge()
    r.holds.release(hold_id=hold.id, actor="legal")
    events = [event for event in sink.events() if event[0] != "policy.load"]
    assert events == [("hold.place", "ok"), ("purge", "ok"), ("hold.release", "ok")]
    place, purge, _release = (a for a in sink.records if a["operation"] != "policy.load")
    assert place["hold_id"] == hold.id and place["agent"] == "agent1"
    assert purge["purge_id"] == report.purge_id and purge["deleted"] == 4 and purge["held"] == 4
    assert (purge["policy_id"], purge["policy_version"]) == ("bank", "2")
    assert purge["rules"] == ["archives_max_age"]


def test_a_refused_purge_is_audited_as_an_error(workspace: Path) -> None:
    populate(workspace, agents=1)
    sink = RecordingAuditSink()
    gov = Governance(
        workspace=workspace,
        policy=make_policy(archives_max_age="30d"),
        clock=FixedClock(T0 + 40 * DAY),
        audit=sink,
    )
    r = Retention(gov)
    other = _PurgeLock(r.purge_dir, workspace)
    other.acquire()
    try:
        with pytest.raises(PurgeInProgressError):
            r.purge()
    finally:
        other.release()
    assert sink.events()[-1] == ("purge", "error")
    assert sink.records[-1]["error"] == "PurgeInProgressError"


def test_a_folder_swapped_for_a_symlink_after_planning_is_not_followed(
    workspace: Path, tmp_path: Path
) -> None:
    """Deleting goes through the folder planned, never through a link planted since."""
    populate(workspace, agents=1)
    r = retention(workspace, T0, archives_max_age="30d")
    journal = _journal(r, T0 + 40 * DAY)
    archive = workspace / "agents" / "agent0" / "archive"
    elsewhere = tmp_path / "elsewhere"
    archive.rename(elsewhere)  # same files, same inodes: only the link is new
    archive.symlink_to(elsewhere)
    tally = Tally()
    _executor(r).run(journal, tally)
    assert not tally.deleted and tally.gone == 4
    assert len(list(elsewhere.iterdir())) == 4


@pytest.mark.parametrize("kind", ["plaintext", "encrypted"])
def test_subject_hold_reads_subjects_through_the_store(workspace: Path, kind: str) -> None:
    """Encrypted archives are decrypted (with the key) to find whose records they hold."""
    from subjects_helpers import conversation, governance

    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, make_policy(archives_max_age="30d"), kind=kind)
    for a in range(3):
        conv = conversation(gov, f"agent{a}", subject_id=f"subject{a}")
        for day in range(2):
            conv.add("User", f"day {day}")
            conv.compact("summary")
            clock.advance(DAY)
    suffix = ".gmenc" if kind == "encrypted" else ".md"
    assert len(list(workspace.glob(f"agents/*/archive/history_*{suffix}"))) == 6
    clock.set(T0 + 40 * DAY)
    r = Retention(gov)
    r.holds.place(subject="subject1", reason="case", actor="legal")
    report = r.purge()
    assert report.held == {"archives_max_age": 2} and report.deleted == {"archives_max_age": 4}
    assert [p.parent.parent.name for p in workspace.glob("agents/*/archive/history_*")] == [
        "agent1",
        "agent1",
    ]


def test_a_journal_of_a_newer_format_version_names_both_versions_and_the_fix(
    workspace: Path,
) -> None:
    populate(workspace, agents=1)
    r = retention(workspace, T0, archives_max_age="30d")
    path = _journal(r, T0 + 40 * DAY).path
    lines = path.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    path.write_bytes(json.dumps({**header, "v": 2}).encode() + b"\n" + b"".join(lines[1:]))
    with pytest.raises(FormatVersionError, match=r"version 2; this release reads version 1") as e:
        Journal(r.purge_dir)
    assert "remove it to discard that purge" in str(e.value)


def test_the_receipt_is_indented_json_with_its_format_version_first(workspace: Path) -> None:
    populate(workspace, agents=1)
    report = retention(workspace, T0 + 40 * DAY, archives_max_age="30d").purge()
    receipt = workspace / ".governed_memory" / "purge" / "receipts" / f"{report.purge_id}.json"
    data = json.loads(receipt.read_text())
    assert next(iter(data)) == "v" and data["v"] == 1
    assert receipt.read_text() == json.dumps(data, indent=1) + "\n"
    assert (receipt.stat().st_mode & 0o777) == 0o600


# -- floors and a moved clock (issue 12) ---------------------------------------


def _audited(workspace: Path, *months: tuple[int, int]) -> tuple[Governance, FixedClock, Path]:
    """A governance whose audit log has one segment per (year, month) given."""
    from governed_memory._audit import AuditKey, AuditLog, AuditTrail

    key = AuditKey(b"k" * 32)
    clock = FixedClock(dt.datetime(*months[0], 15, 12, 0))
    folder = workspace / ".governed_memory" / "audit"
    trail = AuditTrail(key=key, log=AuditLog(folder, key, clock=clock), spans=False)
    policy = make_policy(audit_min_age="6y", audit_max_age="6y")
    gov = Governance(workspace=workspace, policy=policy, clock=clock, audit=trail)
    for year, month in months:
        clock.set(dt.datetime(year, month, 15, 12, 0))
        gov.audit.record("policy.load", agent=None, subject_id=None, outcome="ok")
    return gov, clock, folder


def test_a_future_as_of_cannot_delete_an_audit_segment_under_its_floor(workspace: Path) -> None:
    """The issue's case: 6y floor, a 2.7-year-old segment, `purge --as-of 2040-01-01`."""
    from governed_memory._errors import ConfigurationError, GovernedMemoryError
    from governed_memory._retention import PurgeInFutureError

    gov, clock, folder = _audited(workspace, (2024, 3), (2026, 11))
    clock.set(dt.datetime(2026, 11, 20, 12, 0))
    before = sorted(p.name for p in folder.glob("audit-*"))
    r = Retention(gov)
    preview = r.purge(as_of=dt.datetime(2040, 1, 1), dry_run=True)
    assert preview.total_deleted == 0  # the floor counts from the clock's now
    with pytest.raises(PurgeInFutureError) as caught:
        r.purge(as_of=dt.datetime(2040, 1, 1))
    assert isinstance(caught.value, ConfigurationError | GovernedMemoryError)
    message = str(caught.value)
    assert "2040-01-01 00:00:00" in message and "2026-11-20 12:00:00" in message
    assert "--dry-run" in message and "Nothing was deleted" in message
    assert sorted(p.name for p in folder.glob("audit-*")) == before
    assert not (workspace / ".governed_memory" / "purge").exists()


def test_an_as_of_within_a_second_of_now_runs_and_two_seconds_is_refused(
    workspace: Path,
) -> None:
    from governed_memory._retention import PurgeInFutureError

    populate(workspace, agents=1, compactions=1)
    r = retention(workspace, T0 + 40 * DAY, archives_max_age="30d")
    with pytest.raises(PurgeInFutureError):
        r.purge(as_of=T0 + 40 * DAY + dt.timedelta(seconds=2))
    assert len(archives(workspace)) == 1
    assert r.purge(as_of=T0 + 40 * DAY + dt.timedelta(seconds=1)).total_deleted == 1


def test_a_past_as_of_deletes_only_what_was_due_then_and_keeps_the_floor(
    workspace: Path,
) -> None:
    """Past as_of: max ages count to that moment; audit_min_age still counts from now."""
    gov, clock, folder = _audited(workspace, (2019, 1), (2020, 6), (2026, 11))
    clock.set(dt.datetime(2026, 11, 20, 12, 0))
    r = Retention(gov)
    # As of 2025-06: only the 2019 segment was over six years old then.
    report = r.purge(as_of=dt.datetime(2025, 6, 1))
    assert report.deleted == {"audit_max_age": 1}
    assert [p.name for p in sorted(folder.glob("audit-*"))] == [
        "audit-2020-06.jsonl",
        "audit-2026-11.jsonl",
    ]
    assert r.purge().deleted == {"audit_max_age": 1}  # now, 2020-06 is over six years old too


def test_a_refused_purge_is_audited(workspace: Path) -> None:
    from governed_memory._retention import PurgeInFutureError

    sink = RecordingAuditSink()
    gov = Governance(
        workspace=workspace,
        policy=make_policy(archives_max_age="30d"),
        clock=FixedClock(T0),
        audit=sink,
    )
    with pytest.raises(PurgeInFutureError):
        Retention(gov).purge(as_of=T0 + DAY)
    [entry] = sink.of("purge")
    assert entry["outcome"] == "refused" and entry["error"] == "PurgeInFutureError"
