"""The MemoryBackend contract: listing and opening agents, over every backend in backends.py."""

from __future__ import annotations

import pytest
from backends import HEADER

from governed_memory import InvalidAgentNameError
from governed_memory._protocols import MemoryBackend


def _header() -> str:
    return HEADER


def test_an_empty_backend_has_no_agents(memory_backend: MemoryBackend) -> None:
    assert memory_backend.agents() == []
    assert memory_backend.has_agent("A") is False


def test_opening_an_agent_creates_nothing_until_it_is_written(
    memory_backend: MemoryBackend,
) -> None:
    store = memory_backend.open("A", _header)
    assert store.read_memory() is None
    assert memory_backend.agents() == []
    store.append("### Human — 2026-11-30T10:00:00\n\nhello\n\n")
    assert memory_backend.agents() == ["A"]
    assert memory_backend.has_agent("A") is True
    store.close()


def test_agents_are_listed_sorted_and_opened_by_name(memory_backend: MemoryBackend) -> None:
    names = ["Zed", "alpha", "Mid_1", ".hidden", "..."]  # valid names, listed like any
    for name in names:
        store = memory_backend.open(name, _header)
        store.ensure()
        store.close()
    assert memory_backend.agents() == sorted(names)
    again = memory_backend.open("Mid_1", _header)
    assert again.agent == "Mid_1" and again.read_memory() == HEADER
    again.close()


def test_a_deleted_agent_is_no_longer_listed(memory_backend: MemoryBackend) -> None:
    store = memory_backend.open("Gone", _header)
    store.ensure()
    with store.lock():
        store.delete()
    assert memory_backend.agents() == []
    assert memory_backend.has_agent("Gone") is False


@pytest.mark.parametrize("name", ["", ".", "..", "../etc", "a/b", "x" * 300])
def test_an_invalid_agent_name_is_refused(memory_backend: MemoryBackend, name: str) -> None:
    with pytest.raises(InvalidAgentNameError):
        memory_backend.open(name, _header)
    with pytest.raises(InvalidAgentNameError):
        memory_backend.has_agent(name)
