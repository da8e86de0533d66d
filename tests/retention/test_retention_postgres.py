"""Purges on a database deployment: the seam's scan, holds from any host, the lock, resume."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from governed_memory import Conversation, FixedClock, Governance, Policy, Settings
from governed_memory._postgres import Database, PgLeadership, upgrade_schema
from governed_memory._retention import PurgeInProgressError, Retention

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)
NOW = T0 + 31 * DAY + DAY / 2  # T0 and T0+1d are over 30 days old, T0+2d is not
POLICY = {"retention": {"archives_max_age": "30d"}}


@pytest.fixture
def url(pg_url: str) -> str:
    """A fresh database with the schema upgraded (what `governed-memory db upgrade` does)."""
    db = Database(pg_url)
    try:
        upgrade_schema(db)
    finally:
        db.close()
    return pg_url


@pytest.fixture
def governances() -> Iterator[list[Governance]]:
    made: list[Governance] = []
    yield made
    for gov in made:
        gov.storage.close()


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
