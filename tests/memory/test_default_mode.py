"""Default mode: no policy configured means the reference's bytes and no extra file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governed_memory import (
    ConfigurationError,
    Conversation,
    FixedClock,
    Governance,
    Settings,
    memory_md_path,
)
from governed_memory._cli import main

_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?")


def replay(
    workspace: Path, fixtures_dir: Path, clock: FixedClock, governance: Governance | None
) -> None:
    """The reference's write_compact scenario, then a restart (preload)."""
    calls: list[list[Any]] = json.loads((fixtures_dir / "write_compact" / "calls.json").read_text())
    path = memory_md_path("QuantAgent", workspace)
    kwargs: dict[str, Any] = {
        "name": "QuantAgent_id_fixture_conversation",
        "system_prompt": "You are a quant.",
        "rules": "Be precise.",
        "time_enabled": True,
        "memory_md_path": path,
        "clock": clock,
        "governance": governance,
    }
    conversation = Conversation(**kwargs)
    for role, content in calls:
        if role == "<compact>":
            conversation.compact(content)
        else:
            conversation.add(role, content)
    Conversation(**kwargs)


def tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def normalise(text: str) -> str:
    return _TS.sub("<ts>", text)


def test_default_governance_writes_exactly_what_no_governance_writes(
    tmp_path: Path, fixtures_dir: Path, clock: FixedClock
) -> None:
    """(A frozen clock: the gate reads the time for its decisions, which a ticking clock would show.)"""
    plain, governed = tmp_path / "plain", tmp_path / "governed"
    start = clock.now()
    replay(plain, fixtures_dir, FixedClock(start), None)
    frozen = FixedClock(start)
    replay(
        governed,
        fixtures_dir,
        frozen,
        Governance(workspace=governed, settings=Settings(), clock=frozen),
    )
    assert tree(plain) == tree(governed)


def test_default_mode_leaves_only_the_reference_files(
    workspace: Path, fixtures_dir: Path, clock: FixedClock
) -> None:
    gov = Governance(workspace=workspace, settings=Settings(), clock=clock)
    replay(workspace, fixtures_dir, clock, gov)
    paths = list(tree(workspace))
    assert paths[:4] == [
        "agents",
        "agents/QuantAgent",
        "agents/QuantAgent/MEMORY.md",
        "agents/QuantAgent/archive",
    ]
    assert len(paths) == 5 and re.fullmatch(
        r"agents/QuantAgent/archive/history_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d\.md", paths[4]
    )


def test_default_mode_bytes_match_the_reference_modulo_timestamps(
    workspace: Path, fixtures_dir: Path, clock: FixedClock
) -> None:
    replay(
        workspace,
        fixtures_dir,
        clock,
        Governance(workspace=workspace, settings=Settings(), clock=clock),
    )
    reference = fixtures_dir / "write_compact" / "workspace" / "agents" / "QuantAgent"
    ours = workspace / "agents" / "QuantAgent"
    assert normalise((ours / "MEMORY.md").read_text()) == normalise(
        (reference / "MEMORY.md").read_text()
    )
    (archive,) = (ours / "archive").iterdir()
    (ref_archive,) = (reference / "archive").iterdir()
    assert normalise(archive.read_text()) == normalise(ref_archive.read_text())


def test_no_subject_means_no_metadata_line(workspace: Path, clock: FixedClock) -> None:
    gov = Governance(workspace=workspace, settings=Settings(), clock=clock)
    conversation = Conversation(memory_md_path=memory_md_path("A", workspace), governance=gov)
    conversation.add("Human", "hi")
    assert "<!-- gm" not in memory_md_path("A", workspace).read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["policy", "show"],
        ["policy", "show", "--json"],
        ["policy", "list"],
        ["policy", "check", "default"],
        ["consent", "status"],
        ["consent", "history", "--json"],
    ],
)
def test_read_only_commands_create_nothing(workspace: Path, args: list[str]) -> None:
    result = CliRunner().invoke(main, ["--workspace", str(workspace), *args])
    assert result.exit_code == 0, result.output
    assert list(workspace.iterdir()) == []


@pytest.mark.parametrize(
    "outside",
    [
        "elsewhere/agents/A/MEMORY.md",
        "ws/agents/A/notes.md",
        "ws/A/MEMORY.md",
        "ws/agents/A/../MEMORY.md",
    ],
    ids=["other-workspace", "other-file-name", "not-under-agents", "dot-dot"],
)
def test_a_governed_memory_outside_the_governed_workspace_is_refused(
    workspace: Path, clock: FixedClock, tmp_path: Path, outside: str
) -> None:
    """Export, erasure and retention look in the Governance's workspace only: memory goes there."""
    gov = Governance(workspace=workspace, settings=Settings(), clock=clock)
    path = tmp_path / outside
    with pytest.raises(ConfigurationError, match="outside the governed workspace") as raised:
        Conversation(memory_md_path=path, governance=gov)
    assert "governed_memory.memory_md_path(agent_name)" in str(raised.value)
    assert not path.exists() and not path.parent.exists()
    conversation = Conversation(memory_md_path=memory_md_path("A", workspace), governance=gov)
    with pytest.raises(ConfigurationError, match="outside the governed workspace"):
        conversation.memory_md_path = path
    conversation.add("Human", "still written where export finds it")
    assert "still written" in (workspace / "agents" / "A" / "MEMORY.md").read_text()
