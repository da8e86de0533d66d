"""``AgentStore.remove_temps()``: what a crashed writer left goes, what is stored stays (every backend).

An erasure calls it so a temporary copy of an erased subject's text does not
survive (issue 13, finding 7). The file backends' temporary files themselves
are tested in tests/stores/test_store_links.py; here, the contract every
backend keeps.
"""

from __future__ import annotations

from backends import Backend

from governed_memory import parse_memory
from governed_memory._format import render_block


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject is not None else None
    return render_block("Human", "2026-11-30T10:00:00", text, meta)


def _contents(text: str | None) -> list[str]:
    assert text is not None
    return [r.content for r in parse_memory(text).records]


def test_nothing_left_behind_is_zero_and_what_is_stored_stays(backend: Backend) -> None:
    agent = backend.open("A")
    agent.append(_block("archived"))
    archive = agent.compact(_block("summary"))
    agent.append(_block("active"))
    alice = agent.subject_store("alice")
    alice.append(_block("alice's", "alice"))
    assert agent.remove_temps() == 0
    assert _contents(agent.read_memory()) == ["summary", "active"]
    assert archive is not None and _contents(agent.read_archive(archive)) == ["archived"]
    assert _contents(alice.read_memory()) == ["alice's"]
    assert alice.remove_temps() == 0
    agent.append(_block("still works"))
    assert _contents(agent.read_memory())[-1] == "still works"


def test_an_agent_without_memory_has_nothing_to_remove_and_gets_none(backend: Backend) -> None:
    agent = backend.open("Nobody")
    assert agent.remove_temps() == 0
    assert agent.read_memory() is None
    assert backend.open("Nobody").list_archives() == []
