"""An export never leaves data out: what it cannot read fails it, named (issue 13, findings 1-2).

Choice: rather than a result that reports the missing items beside an
export that lacks them (an access request answered incompletely, which the
person could not tell), the export fails and writes nothing; the error
names every unreadable or refused item with its agent, file and fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS
from unreadable_helpers import damage, gov_of, link_agent, populate, source

from governed_memory import FixedClock, StorageError
from governed_memory._subjects import export_subject
from governed_memory.testing import RecordingAuditSink


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_export_fails_naming_a_linked_agent_and_writes_nothing(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "Evil"))
    link_agent(gov, tmp_path)
    out = tmp_path / "export"
    with pytest.raises(StorageError, match="agent 'Evil', agents/Evil: a symbolic link"):
        export_subject(gov, "alice", out)
    assert not out.exists()
    with pytest.raises(StorageError, match=r"agents/Evil is a symbolic link.*nothing was exported"):
        export_subject(gov, "alice", out, agent="Evil")


def test_export_fails_naming_every_unreadable_file_and_writes_nothing(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    sink = RecordingAuditSink()
    gov = gov_of(workspace, clock, kind, audit=sink)
    populate(gov)
    damage(gov, "A")
    damage(gov, "C")
    out = tmp_path / "export"
    with pytest.raises(StorageError, match="2 item\\(s\\) in 2 agent\\(s\\)") as info:
        export_subject(gov, "alice", out)
    assert source(gov, "A") in str(info.value) and source(gov, "C") in str(info.value)
    assert not out.exists()
    [entry] = [e for e in sink.records if e["operation"] == "export"]
    assert entry["outcome"] == "error" and entry["agents"] == ["A", "C"]


def test_export_fails_naming_a_link_inside_an_agent(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "B"))
    memory = (
        workspace / "agents" / "B" / ("MEMORY.md.gmenc" if kind == "encrypted" else "MEMORY.md")
    )
    outside = tmp_path / "outside-memory"
    memory.rename(outside)
    memory.symlink_to(outside)
    out = tmp_path / "export"
    with pytest.raises(StorageError, match=f"agent 'B', {source(gov, 'B')}: a symbolic link"):
        export_subject(gov, "alice", out)
    assert not out.exists()
