"""Inspection (``show``, ``show --archives``) never reads or prints through a link (issue 13, finding 1).

A symbolic link in the place of the agent folder, its memory file,
``archive/``, an archive file, ``subjects/`` or a subject folder is refused
with UnsafePathError naming it, plaintext and encrypted alike; nothing behind
the link is printed.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner
from subjects_helpers import STORE_KINDS, governance

from governed_memory import FixedClock, Governance, agent_records
from governed_memory._cli import main
from governed_memory._errors import UnsafePathError
from governed_memory._format import render_block, render_header

CLOCK = FixedClock(dt.datetime(2026, 11, 30, 10))
SECRET = "the text behind the link"
LINKS = ["agent folder", "memory", "archive", "archive file", "subjects", "subject folder"]


@pytest.fixture(params=STORE_KINDS)
def gov(request: pytest.FixtureRequest, workspace: Path) -> Governance:
    return governance(workspace, CLOCK, kind=str(request.param))


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject else None
    return render_block("Human", "2026-11-30T10:00:01", text, meta)


def _populate(gov: Governance) -> None:
    """Agent A: memory and archive holding SECRET, and alice's memory and archive."""
    store = gov.store_factory(gov.workspace / "agents" / "A" / "MEMORY.md", _header)
    store.append(_block(f"{SECRET} (archived)"))
    store.compact(_block(f"{SECRET} (summary)"))
    alice = store.subject_store("alice")
    alice.append(_block(f"{SECRET} (alice)", "alice"))
    alice.compact(_block(f"{SECRET} (alice summary)", "alice"))
    alice.close()
    store.close()


def _link(gov: Governance, link: str, outside: Path) -> Path:
    """Move the ``link`` item of agent A outside the workspace and link to it in its place."""
    agent = gov.workspace / "agents" / "A"
    subjects = agent / "subjects"
    target = {
        "agent folder": agent,
        "memory": next(p for p in agent.iterdir() if p.name.startswith("MEMORY.md")),
        "archive": agent / "archive",
        "archive file": next((agent / "archive").iterdir()),
        "subjects": subjects,
        "subject folder": next(subjects.iterdir()),
    }[link]
    outside.mkdir()
    target.rename(outside / target.name)
    target.symlink_to(outside / target.name)
    return target


@pytest.mark.parametrize("link", LINKS)
def test_agent_records_with_archives_refuses_a_link(
    gov: Governance, tmp_path: Path, link: str
) -> None:
    _populate(gov)
    target = _link(gov, link, tmp_path / "outside")
    with pytest.raises(UnsafePathError) as caught:
        agent_records(gov.workspace, "A", include_archives=True, store_factory=gov.store_factory)
    assert caught.value.path == target


@pytest.mark.parametrize("link", LINKS)
def test_show_archives_prints_nothing_from_behind_a_link(
    workspace: Path, tmp_path: Path, link: str
) -> None:
    """Plaintext through the real CLI: exit 1, the link and the fix named, no text printed."""
    gov = governance(workspace, CLOCK)
    _populate(gov)
    target = _link(gov, link, tmp_path / "outside")
    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "show", "A", "--archives"],
        env={"COLUMNS": "250"},
    )
    assert result.exit_code == 1
    assert SECRET not in result.output
    assert str(target) in result.output
    assert "symbolic link" in result.output
