"""Purges on a database deployment: the seam's scan, holds from any host, the lock, resume."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from governed_memory import Conversation, FixedClock, Governance, Policy, Settings
from governed_memory._format import render_block, render_header
from governed_memory._postgres import Database, PgLeadership
from governed_memory._retention import PurgeInProgressError, Retention

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)
NOW = T0 + 31 * DAY + DAY / 2  # T0 and T0+1d are over 30 days old, T0+2d is not
POLICY = {"retention": {"archives_max_age": "30d"}}


@pytest.fixture
def url(pg_schema_url: str) -> str:
    """A fresh database with the schema upgraded (what `governed-memory db upgrade` does)."""
    return pg_schema_url


def governance(
    made: list[Governance], url: str, workspace: Path, when: dt.datetime, **rules: object
) -> Governance:
    policy = Policy.model_validate({"retention": rules or POLICY["retention"]})
    gov = Governance(
        workspace=workspace,
        policy=policy,
        clock=FixedClock(when, tick=dt.timedelta(milliseconds=1)),
        settings=Settings(database_url=url),
    )
    made.append(gov)
    return gov


def populate(gov: Governance, workspace: Path, agents: int = 2, compactions: int = 3) -> None:
    """Agents compacting once a day from T0 (archives named T0, T0+1d, ...), in the database."""
    clock = gov.clock
    assert isinstance(clock, FixedClock)
    for a in range(agents):
        clock.set(T0)
        conv = Conversation(
            name=f"c{a}",
            memory_md_path=workspace / "agents" / f"agent{a}" / "MEMORY.md",
            governance=gov,
            clock=clock,
        )
        for day in range(compactions):
            conv.add("User", f"day {day} for agent {a}")
            conv.compact(f"summary {day}")
            clock.advance(DAY)


def archives(gov: Governance) -> dict[str, list[str]]:
    backend = gov.memory_backend
    return {a: backend.open(a, str).list_archives() for a in backend.agents()}


def test_expired_archives_are_purged_from_the_database(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    populate(governance(governances, url, workspace, T0), workspace)
    gov = governance(governances, url, workspace, NOW)
    before = archives(gov)
    assert [len(ids) for ids in before.values()] == [3, 3]
    retention = Retention(gov)
    preview = retention.purge(dry_run=True)
    assert preview.deleted == {"archives_max_age": 4}  # T0 and T0+1d of each agent
    assert archives(gov) == before  # a dry run deletes nothing
    report = retention.purge()
    assert report.deleted == {"archives_max_age": 4} and report.bytes_freed > 0
    assert archives(gov) == {a: ids[2:] for a, ids in before.items()}
    assert all(gov.memory_backend.open(a, str).read_memory() for a in before)  # memory stays
    assert retention.pending() is None  # the journal's rows are gone once applied
    place = gov.records
    assert not isinstance(place, Path)
    _mark, raw = place.read_document(f"purge/receipts/{report.purge_id}.json", None)
    assert raw is not None
    receipt = json.loads(raw)
    assert receipt["deleted"] == {"archives_max_age": 4} and "history_" not in raw.decode()
    assert retention.purge().total_deleted == 0  # nothing more is due
    assert list(workspace.iterdir()) == []  # nothing was written on this host's disk


def _place_hold(url: str, tmp_path: Path, agent: str) -> str:
    """Place a hold on ``agent`` from another "host": its own process, workspace and TMPDIR."""
    host = tmp_path / "other-host"
    (host / "tmp").mkdir(parents=True)
    code = textwrap.dedent(
        f"""
        from governed_memory import Governance
        from governed_memory._retention import Retention
        hold = Retention(Governance()).holds.place(
            agent={agent!r}, reason="litigation", actor="legal@example.com"
        )
        print(hold.id)
        """
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(host),
        "WORKSPACE_DIR": str(host / "ws"),
        "TMPDIR": str(host / "tmp"),
        "GOVERNED_MEMORY_DATABASE_URL": url,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert not (host / "ws").exists()  # the hold is in the database, not on that host's disk
    return done.stdout.strip()


def test_a_hold_placed_from_another_host_blocks_the_purge(
    url: str, workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    populate(governance(governances, url, workspace, T0), workspace)
    hold_id = _place_hold(url, tmp_path, "agent0")
    gov = governance(governances, url, workspace, NOW)
    before = archives(gov)
    report = Retention(gov).purge()
    assert report.deleted == {"archives_max_age": 2} and report.held == {"archives_max_age": 2}
    after = archives(gov)
    assert after["agent0"] == before["agent0"]  # held: every archive kept
    assert after["agent1"] == before["agent1"][2:]
    preview = Retention(gov).purge(dry_run=True)
    assert preview.plan is not None
    assert {i.held_by for i in preview.plan.held} == {(hold_id,)}


def test_a_purge_on_another_host_holds_the_lock(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    populate(governance(governances, url, workspace, T0), workspace, agents=1)
    gov = governance(governances, url, workspace, NOW)
    other = Database(url)  # another host's connection: its own session
    lock = PgLeadership(other, "purge")
    try:
        assert lock.try_acquire()
        with pytest.raises(PurgeInProgressError, match="another purge is running"):
            Retention(gov).purge()
        assert len(archives(gov)["agent0"]) == 3  # nothing deleted while refused
    finally:
        lock.release()
        other.close()
    assert Retention(gov).purge().total_deleted == 2


KILLER = textwrap.dedent(
    """
    import datetime as dt, os, sys
    from governed_memory import FixedClock, Governance, Policy, Settings
    from governed_memory._retention import Retention

    url, now = sys.argv[1], dt.datetime.fromisoformat(sys.argv[2])
    policy = Policy.model_validate({"retention": {"archives_max_age": "30d"}})
    gov = Governance(policy=policy, clock=FixedClock(now), settings=Settings(database_url=url))

    def die(done, total):
        if done >= 1:
            print(done, total, flush=True)
            os._exit(9)  # killed mid-run: after the first agent's batch was recorded

    Retention(gov).purge(on_progress=die)
    """
)


def test_a_purge_killed_mid_run_resumes_from_the_journal(
    url: str, workspace: Path, tmp_path: Path, governances: list[Governance]
) -> None:
    populate(governance(governances, url, workspace, T0), workspace, agents=3)
    now = NOW
    env = {**os.environ, "WORKSPACE_DIR": str(tmp_path / "killed")}
    env = {k: v for k, v in env.items() if not k.startswith("GOVERNED_MEMORY_")}
    done = subprocess.run(
        [sys.executable, "-c", KILLER, url, now.isoformat()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 9, done.stderr
    assert done.stdout.split() == ["2", "6"]  # one agent's two archives of six
    gov = governance(governances, url, workspace, now)
    retention = Retention(gov)
    pending = retention.pending()
    assert pending is not None and pending.total == 6 and pending.outcomes() == b"dd"
    left = archives(gov)
    assert [len(left[a]) for a in sorted(left)] == [1, 3, 3]
    interrupted = str(pending.header["id"])
    assert retention.purge(dry_run=True).pending_journal == 4
    report = retention.purge()
    assert report.resumed == interrupted
    # The resumed journal's tally: the two deleted before the kill, the four after.
    assert report.deleted == {"archives_max_age": 6} and report.failed == 0
    assert [len(ids) for ids in archives(gov).values()] == [1, 1, 1]
    assert retention.pending() is None


def test_consent_tombstones_and_audit_segments_are_purged_through_their_storage(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    """Consent records and tombstones on the record place, segments by the audit storage."""
    from governed_memory._audit import AuditKey, AuditTrail, verify_storage
    from governed_memory._postgres import PgAuditStorage

    key = AuditKey(b"k" * 32)
    clock = FixedClock(dt.datetime(2026, 1, 15, 12, 0))
    db = Database(url)
    storage = PgAuditStorage(db, key, clock=clock)
    trail = AuditTrail(key=key, log=storage, spans=False)
    policy = Policy.model_validate(
        {
            "retention": {
                "audit_min_age": "30d",
                "audit_max_age": "60d",
                "consent_records_max_age": "30d",
                "tombstones_max_age": "30d",
            },
            "audit": {"enabled": True},
        }
    )
    gov = Governance(
        workspace=workspace,
        policy=policy,
        clock=clock,
        audit=trail,
        settings=Settings(database_url=url),
    )
    governances.append(gov)
    gov.grant("alice", "persist", actor="app")
    gov.withdraw("alice", "persist", actor="app")  # both records out of force once old
    gov.grant("bob", "persist", actor="app")  # bob's grant stays: in force
    place = gov.records
    assert not isinstance(place, Path)
    done = {"v": 1, "state": "complete", "completed_at": "2026-01-15T12:00:00+00:00"}
    place.write_document("tombstones/t-done.json", json.dumps(done).encode())
    place.write_document("tombstones/t-pending.json", b'{"v": 1, "state": "pending"}')
    for month in (2, 3, 4):  # one segment per month: audit-2026-01 .. audit-2026-04
        clock.set(dt.datetime(2026, month, 15, 12, 0))
        gov.audit.record("policy.load", agent=None, subject_id=None, outcome="ok")
    clock.set(dt.datetime(2026, 4, 20, 12, 0))
    report = Retention(gov).purge()
    assert report.failed == 0, report.errors
    assert report.deleted == {
        "consent_records_max_age": 2,
        "tombstones_max_age": 1,
        "audit_max_age": 2,  # January (95 days) and February (64); March, April stay
    }
    assert [e.subject for e in gov.consent.history()] == ["bob"]
    assert place.names("tombstones", ".json") == ["t-pending.json"]
    assert storage.segment_ids() == ["audit-2026-03.jsonl", "audit-2026-04.jsonl"]
    assert verify_storage(storage, [key]).ok  # the removal is recorded in the chain
    assert any(e.event == "audit.purge" for e in storage.entries())
    storage.close()
    db.close()


def test_the_purge_command_runs_on_the_database(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    """``governed-memory purge --json`` through the real entry point, the database configured."""
    from click.testing import CliRunner

    from governed_memory._cli import main

    populate(governance(governances, url, workspace, T0), workspace, agents=1)
    policy = workspace.parent / "policy.toml"
    policy.write_text('[retention]\narchives_max_age = "30d"\n')
    env = {"GOVERNED_MEMORY_DATABASE_URL": url}
    args = ["--workspace", str(workspace), "--policy", str(policy), "purge", "--json"]
    result = CliRunner().invoke(main, [*args, "--dry-run"], env=env)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["deleted"] == {"archives_max_age": 3}  # really now: all old
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["total_deleted"] == 3
    assert archives(governance(governances, url, workspace, NOW)) == {"agent0": []}


def test_idle_memory_is_aged_by_its_last_write_and_deleted_without_its_archives(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    populate(governance(governances, url, workspace, T0), workspace)
    # The memory's time is the server's time of its last write (now), not the clock's.
    later = dt.datetime.now() + 40 * DAY
    gov = governance(governances, url, workspace, later, idle_memory_max_age="30d")
    recent = governance(governances, url, workspace, dt.datetime.now(), idle_memory_max_age="30d")
    assert Retention(recent).purge(dry_run=True).total_deleted == 0  # written just now
    before = archives(gov)
    report = Retention(gov).purge()
    assert report.deleted == {"idle_memory_max_age": 2}
    assert all(gov.memory_backend.open(a, str).read_memory() is None for a in before)
    assert archives(gov) == before  # archives are not idle memory


def _block(text: str, subject: str | None = None) -> str:
    return render_block(
        "Human", "2026-01-01T12:00:00", text, {"subject": subject} if subject else None
    )


def test_subject_memories_are_purged_and_a_subject_hold_keeps_the_subjects_archives(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    gov = governance(governances, url, workspace, T0)
    agent = gov.store_factory(
        workspace / "agents" / "A" / "MEMORY.md", lambda: render_header("c", "x")
    )
    agent.append(_block("shared"))
    agent.compact(_block("shared summary"))
    for subject in ("alice", "bob"):
        mine = agent.subject_store(subject)
        mine.append(_block(f"{subject} says hi", subject))
        mine.compact(_block(f"{subject} summary", subject))
    hold = Retention(gov).holds.place(subject="alice", reason="litigation", actor="legal")
    later = governance(governances, url, workspace, NOW)
    report = Retention(later).purge()
    # Agent A's own archive (no subject) and bob's go; alice's is held.
    assert report.deleted == {"archives_max_age": 2} and report.held == {"archives_max_age": 1}
    assert agent.list_archives() == []
    assert agent.subject_store("bob").list_archives() == []
    assert len(agent.subject_store("alice").list_archives()) == 1
    Retention(later).holds.release(hold_id=hold.id, reason="settled", actor="legal")
    assert Retention(later).purge().deleted == {"archives_max_age": 1}
    assert agent.subject_store("alice").list_archives() == []
