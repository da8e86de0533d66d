"""Retention over subject memories (``agents/<agent>/subjects/<p>/``), plaintext and encrypted.

Their archives age by ``archives_max_age`` and count by ``archives_max_count``
per memory, an idle subject memory goes by ``idle_memory_max_age``, holds and
lineage apply as to the agent's own files, and plans name them by their
workspace-relative paths. A subject folder is never taken for an agent.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS, governance

from governed_memory import FixedClock, Governance, Policy
from governed_memory._format import render_block, render_header
from governed_memory._retention import JournalError, Retention, Tally, scan_workspace
from governed_memory._retention._execute import Executor
from governed_memory._retention._journal import Journal, write_journal
from governed_memory._retention._purge import audit_dir_of

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _policy(**retention: object) -> Policy:
    return Policy.model_validate({"retention": retention})


def _block(text: str, subject: str | None = None, lineage: list[str] | None = None) -> str:
    meta: dict[str, object] = {}
    if subject:
        meta["subject"] = subject
    if lineage:
        meta["lineage"] = lineage
    return render_block("Human", "2026-01-01T12:00:00", text, meta or None)


def _header() -> str:
    return render_header("conv", "2026-01-01T12:00:00")


def _populate(gov: Governance, clock: FixedClock, days: int = 2) -> dict[str, str]:
    """Agent A: its own memory (one archive), and alice's and bob's (one archive a day)."""
    agent = gov.store_factory(gov.workspace / "agents" / "A" / "MEMORY.md", _header)
    agent.append(_block("shared"))
    agent.compact(_block("shared summary"))
    folders: dict[str, str] = {}
    for day in range(days):
        for subject in ("alice", "bob"):
            mine = agent.subject_store(subject)
            mine.append(_block(f"{subject} day {day}", subject))
            mine.compact(_block(f"{subject} summary {day}", subject))
            folders[subject] = f"agents/A/{mine.source().rsplit('/', 1)[0]}"
            mine.close()
        clock.advance(DAY)
    agent.close()
    return folders


def _paths(gov: Governance, pattern: str) -> list[str]:
    return sorted(p.relative_to(gov.workspace).as_posix() for p in gov.workspace.glob(pattern))


def test_subject_archives_are_aged_by_archives_max_age_and_named_by_their_path(
    workspace: Path, kind: str
) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_age="30d"), kind=kind)
    folders = _populate(gov, clock)
    subject_archives = _paths(gov, "agents/A/subjects/*/archive/history_*")
    assert len(subject_archives) == 4
    clock.set(T0 + 30 * DAY + dt.timedelta(hours=12))  # day 0's are over 30 days, day 1's not
    dry = Retention(gov).purge(dry_run=True)
    assert dry.plan is not None
    planned = sorted(i.artefact.path for i in dry.plan.deletions)
    day0 = "/archive/history_2026-01-01_"
    expected = sorted(p for p in _paths(gov, "agents/A/**/history_*") if day0 in p)
    assert len(expected) == 3 and sum(folders["alice"] in p for p in expected) == 1
    assert planned == expected  # agents/A/subjects/<p>/archive/history_... for the oldest ones
    assert all(i.artefact.agent == "A" for i in dry.plan.deletions)
    report = Retention(gov).purge()
    assert report.deleted == {"archives_max_age": 3}
    assert _paths(gov, "agents/A/subjects/*/archive/history_*") == sorted(
        set(subject_archives) - set(planned)
    )
    assert len(_paths(gov, "agents/A/subjects/*/MEMORY.md*")) == 2  # active memories stay


def test_archives_max_count_counts_each_subject_memory_on_its_own(
    workspace: Path, kind: str
) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_count=1), kind=kind)
    _populate(gov, clock, days=3)
    report = Retention(gov).purge()
    assert report.deleted == {"archives_max_count": 4}  # 2 of 3 for alice, for bob
    assert len(_paths(gov, "agents/A/subjects/*/archive/history_*")) == 2
    assert len(_paths(gov, "agents/A/archive/history_*")) == 1  # the agent's one is its newest


def test_an_idle_subject_memory_goes_by_idle_memory_max_age(workspace: Path, kind: str) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(idle_memory_max_age="30d"), kind=kind)
    folders = _populate(gov, clock)
    suffix = ".gmenc" if kind == "encrypted" else ""
    memory = workspace / folders["alice"] / f"MEMORY.md{suffix}"
    old = (T0 - 40 * DAY).timestamp()

    os.utime(memory, (old, old))
    clock.set(T0 + 2 * DAY)
    dry = Retention(gov).purge(dry_run=True)
    assert dry.plan is not None
    assert [i.artefact.path for i in dry.plan.deletions] == [
        f"{folders['alice']}/MEMORY.md{suffix}"
    ]
    assert Retention(gov).purge().deleted == {"idle_memory_max_age": 1}
    assert not memory.exists()
    assert (workspace / folders["bob"] / f"MEMORY.md{suffix}").exists()


def test_a_subject_hold_keeps_that_subjects_memory_files_only(workspace: Path, kind: str) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_age="30d"), kind=kind)
    folders = _populate(gov, clock)
    hold = Retention(gov).holds.place(subject="alice", reason="case", actor="legal")
    clock.set(T0 + 40 * DAY)
    report = Retention(gov).purge()
    assert report.held == {"archives_max_age": 2}
    assert report.deleted == {"archives_max_age": 3}  # bob's two and the agent's own
    assert len(list((workspace / folders["alice"] / "archive").iterdir())) == 2
    assert list((workspace / folders["bob"] / "archive").iterdir()) == []
    assert hold.id


def test_lineage_in_a_subject_memory_is_held_for_the_subject_it_names(
    workspace: Path, kind: str
) -> None:
    """bob's archive holds a summary whose lineage names alice: alice's hold keeps it."""
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_age="30d"), kind=kind)
    agent = gov.store_factory(workspace / "agents" / "A" / "MEMORY.md", _header)
    bob = agent.subject_store("bob")
    bob.append(_block("summary of both", "bob", lineage=["alice", "bob"]))
    bob.compact(None)
    bob.close()
    agent.close()
    Retention(gov).holds.place(subject="alice", reason="case", actor="legal")
    clock.set(T0 + 40 * DAY)
    report = Retention(gov).purge()
    assert report.held == {"archives_max_age": 1} and report.total_deleted == 0


def test_an_agent_hold_keeps_its_subject_memories_too(workspace: Path, kind: str) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_age="30d"), kind=kind)
    _populate(gov, clock)
    Retention(gov).holds.place(agent="A", reason="case", actor="legal")
    clock.set(T0 + 40 * DAY)
    report = Retention(gov).purge()
    assert report.held == {"archives_max_age": 5} and report.total_deleted == 0


def test_a_subject_folder_is_never_an_agent_and_other_folders_there_are_not_artefacts(
    workspace: Path,
) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_age="30d"))
    folders = _populate(gov, clock)
    junk = workspace / "agents" / "A" / "subjects" / "not-a-subject" / "archive"
    junk.mkdir(parents=True)
    (junk / "history_2020-01-01_00-00-00.md").write_text("kept: not a subject memory")
    state = scan_workspace(workspace, governance_dir=gov.governance_dir)
    agents = list(state.agents)
    assert [(a.name, a.partition) for a in agents] == [
        ("A", None),
        *sorted(("A", folders[s].rsplit("/", 1)[1]) for s in ("alice", "bob")),
    ]
    clock.set(T0 + 40 * DAY)
    Retention(gov).purge()
    assert (junk / "history_2020-01-01_00-00-00.md").exists()


def test_a_journal_naming_a_folder_under_subjects_that_is_no_subject_memory_is_refused(
    workspace: Path,
) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_age="30d"))
    _populate(gov, clock)
    retention = Retention(gov)
    clock.set(T0 + 40 * DAY)
    header = {"id": "x", "as_of": clock.now().isoformat(), "policy_id": "p", "policy_version": "1"}
    write_journal(retention.purge_dir, header, retention.plan().items)
    path = Journal(retention.purge_dir).path
    lines = path.read_text().splitlines()
    number = next(n for n, line in enumerate(lines) if "/subjects/" in line)
    entry = json.loads(lines[number])
    parts = entry[2].split("/")  # agents/A/subjects/<p>/archive/history_...
    parts[3] = "not-a-subject"
    entry[2] = "/".join(parts)
    lines[number] = json.dumps(entry)
    path.write_text("\n".join(lines) + "\n")
    executor = Executor(
        workspace,
        gov.governance_dir,
        audit_dir_of(gov),
        retention.holds,
        gov.store_factory,
    )
    with pytest.raises(JournalError, match="not a purgeable artefact"):
        executor.run(Journal(retention.purge_dir), Tally())


def test_a_subject_archive_is_deleted_under_its_subject_folders_lock(workspace: Path) -> None:
    """The lock its writers take: a purge waits for a compaction of that memory to finish."""
    import threading

    from governed_memory._base import FolderLock

    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    gov = governance(workspace, clock, _policy(archives_max_age="30d"))
    folders = _populate(gov, clock, days=1)
    clock.set(T0 + 40 * DAY)
    writer = FolderLock(workspace / folders["alice"])
    results: list[int] = []
    with writer.held():
        purge = threading.Thread(
            target=lambda: results.append(Retention(gov).purge().total_deleted)
        )
        purge.start()
        purge.join(0.5)
        assert purge.is_alive()  # waiting for alice's folder
        assert len(list((workspace / folders["alice"] / "archive").iterdir())) == 1
    purge.join(10)
    writer.drop()
    assert results == [3]
