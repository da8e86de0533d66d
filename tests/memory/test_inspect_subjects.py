"""Inspection of subject memories (``agents/<agent>/subjects/<p>/``), over both file stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from governed_memory import (
    AgentStore,
    Clock,
    FixedClock,
    agent_records,
    list_agents,
    memory_md_path,
)
from governed_memory._format import render_block, render_header

StoreMaker = Callable[[Path, Callable[[], str], Clock], AgentStore]
"""The ``store_factory`` fixture's type (tests/conftest.py): plaintext, then encrypted."""


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject else None
    return render_block("Human", "2026-11-30T10:00:01", text, meta)


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _setup(
    workspace: Path, store_factory: StoreMaker, clock: FixedClock
) -> Callable[[Path, Callable[[], str]], AgentStore]:
    """Agent A: one shared record (and one naming alice), alice's memory with an archive, bob's."""
    agent = store_factory(memory_md_path("A", workspace), _header, clock)
    agent.append(_block("shared"))
    agent.append(_block("alice before isolation", "alice"))
    alice = agent.subject_store("alice")
    alice.append(_block("alice one", "alice"))
    alice.compact(_block("alice summary", "alice"))
    alice.append(_block("alice two", "alice"))
    bob = agent.subject_store("bob")
    bob.append(_block("bob one", "bob"))
    for store in (alice, bob, agent):
        store.close()
    return lambda path, header: store_factory(path, header, clock)


def test_list_agents_counts_subject_memories_in_the_agents_totals(
    workspace: Path, store_factory: StoreMaker, clock: FixedClock
) -> None:
    factory = _setup(workspace, store_factory, clock)
    [info] = list_agents(workspace, store_factory=factory)
    assert info.name == "A"
    assert info.subject_memories == 2
    assert info.messages == 2 + 2 + 1  # the agent's own two, alice's two, bob's one
    assert info.archives == 1  # alice's
    files = [p for p in (workspace / "agents" / "A").rglob("*") if p.is_file()]
    assert info.size_bytes == sum(p.stat().st_size for p in files)
    assert info.to_dict()["subject_memories"] == 2


def test_agent_records_lists_subject_memories_after_the_agents_own_with_their_source(
    workspace: Path, store_factory: StoreMaker, clock: FixedClock
) -> None:
    factory = _setup(workspace, store_factory, clock)
    records = agent_records(workspace, "A", include_archives=True, store_factory=factory)
    contents = [r.content for r in records]
    assert contents[:2] == ["shared", "alice before isolation"]
    assert sorted(contents[2:]) == sorted(["alice one", "alice summary", "alice two", "bob one"])
    by_content = {r.content: r for r in records}
    assert by_content["shared"].source.startswith("MEMORY.md")
    for content in ("alice summary", "alice two", "bob one"):
        assert by_content[content].source.startswith("subjects/")
        assert by_content[content].source.split("/")[2].startswith("MEMORY.md")
    archived = by_content["alice one"]
    assert archived.archived and archived.source.split("/")[2] == "archive"
    assert by_content["alice summary"].source.split("/")[1] == archived.source.split("/")[1]


def test_agent_records_of_one_subject_finds_its_memory_and_its_records_in_the_agents(
    workspace: Path, store_factory: StoreMaker, clock: FixedClock
) -> None:
    factory = _setup(workspace, store_factory, clock)
    alice = agent_records(
        workspace, "A", include_archives=True, store_factory=factory, subject_id="alice"
    )
    assert [r.content for r in alice] == [
        "alice before isolation",
        "alice one",
        "alice summary",
        "alice two",
    ]
    bob = agent_records(workspace, "A", store_factory=factory, subject_id="bob")
    assert [r.content for r in bob] == ["bob one"]
    assert agent_records(workspace, "A", store_factory=factory, subject_id="carol") == []


def test_an_agent_without_subject_memories_reads_as_before(
    workspace: Path, store_factory: StoreMaker, clock: FixedClock
) -> None:
    agent = store_factory(memory_md_path("A", workspace), _header, clock)
    agent.append(_block("shared"))
    agent.close()
    factory = lambda path, header: store_factory(path, header, clock)  # noqa: E731
    [info] = list_agents(workspace, store_factory=factory)
    assert (info.messages, info.subject_memories) == (1, 0)
    assert not (workspace / "agents" / "A" / "subjects").exists()
