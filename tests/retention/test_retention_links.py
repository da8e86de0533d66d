"""Retention never ages a link's target and never deletes through a link (issue 13, finding 1).

A symbolic link in an agent's folder tree (the agent folder, ``subjects/``, a
subject folder, ``archive/``) is not listed by the scan, and the executor
opens every folder below ``agents/`` without following a link, also when one
was planted after the plan was written.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS, governance

from governed_memory import FixedClock, Governance, Policy
from governed_memory._format import render_block, render_header
from governed_memory._retention import Journal, Retention, Tally, iter_plan
from governed_memory._retention._journal import write_journal

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject else None
    return render_block("Human", "2026-01-01T12:00:00", text, meta)


def _header() -> str:
    return render_header("conv", "2026-01-01T12:00:00")


def _populate(gov: Governance, agent_name: str = "A") -> Path:
    """An agent with an archive of its own and one of alice's; returns alice's folder."""
    agent = gov.store_factory(gov.workspace / "agents" / agent_name / "MEMORY.md", _header)
    agent.append(_block("shared"))
    agent.compact(_block("shared summary"))
    alice = agent.subject_store("alice")
    alice.append(_block("alice's IBAN", "alice"))
    alice.compact(_block("alice summary", "alice"))
    folder: Path = alice.folder  # type: ignore[attr-defined]
    alice.close()
    agent.close()
    return folder


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _gov(workspace: Path, kind: str) -> tuple[Governance, FixedClock]:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    policy = Policy.model_validate({"retention": {"archives_max_age": "30d"}})
    return governance(workspace, clock, policy, kind=kind), clock


def _move_out(path: Path, outside: Path) -> Path:
    """Move ``path`` outside the workspace and leave a link to it in its place."""
    outside.mkdir(exist_ok=True)
    moved = outside / path.name
    path.rename(moved)
    path.symlink_to(moved)
    return moved


@pytest.mark.parametrize("link", ["agent folder", "subjects", "subject folder", "archive"])
def test_a_link_in_an_agents_tree_is_never_aged_nor_deleted_through(
    workspace: Path, tmp_path: Path, kind: str, link: str
) -> None:
    gov, clock = _gov(workspace, kind)
    alice = _populate(gov)
    agent = workspace / "agents" / "A"
    target = {
        "agent folder": agent,
        "subjects": alice.parent,
        "subject folder": alice,
        "archive": agent / "archive",
    }[link]
    outside = tmp_path / "outside"
    _move_out(target, outside)
    before = _files(outside)
    assert any("history_" in name for name in before)
    clock.set(T0 + 40 * DAY)
    dry = Retention(gov).purge(dry_run=True)
    planned = [] if dry.plan is None else [i.artefact.path for i in dry.plan.deletions]
    assert not any(p.startswith(target.relative_to(workspace).as_posix()) for p in planned)
    Retention(gov).purge()
    assert _files(outside) == before
    assert target.is_symlink()


def test_a_subject_hold_scan_skips_an_agent_whose_subject_folder_is_a_link(
    workspace: Path, tmp_path: Path, kind: str
) -> None:
    """The scan reads files for subjects through the store, which refuses the link."""
    gov, clock = _gov(workspace, kind)
    alice = _populate(gov)
    _move_out(alice, tmp_path / "outside")
    clock.set(T0 + 40 * DAY)
    r = Retention(gov)
    r.holds.place(subject="bob", reason="case", actor="legal")
    report = r.purge()
    assert _files(tmp_path / "outside")  # alice's files, untouched
    assert report.deleted == {"archives_max_age": 1}  # the agent's own archive only


@pytest.mark.parametrize("link", ["subjects", "subject folder", "archive"])
def test_a_folder_swapped_for_a_link_after_planning_is_not_deleted_through(
    workspace: Path, tmp_path: Path, kind: str, link: str
) -> None:
    gov, clock = _gov(workspace, kind)
    alice = _populate(gov)
    clock.set(T0 + 40 * DAY)
    r = Retention(gov)
    footer = write_journal(
        r.purge_dir, {"id": "test"}, iter_plan(r.scan(), gov.policy.retention, clock.now())
    )
    assert footer["end"] == 2  # the agent's archive and alice's
    target = {
        "subjects": alice.parent,
        "subject folder": alice,
        "archive": alice / "archive",
    }[link]
    outside = tmp_path / "outside"
    _move_out(target, outside)  # the same files and inodes: only the link is new
    before = _files(outside)
    tally = Tally()
    r._executor().run(Journal(r.purge_dir), tally)
    assert _files(outside) == before
    assert sum(tally.deleted.values()) == 1 and tally.gone == 1  # the agent's own one goes
