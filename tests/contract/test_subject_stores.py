"""The subject-memory part of the AgentStore contract (``isolation = "subject"``), on every backend.

An agent's own store opens one memory per data subject; those are stores of the
same kind, belong to the same agent, are named without the subject id, are listed
by ``subject_stores()`` once they exist, and go when the agent is deleted.
"""

from __future__ import annotations

import pytest
from backends import HEADER, Backend
from memory_blocks import block, contents

from governed_memory import StorageError, parse_memory
from governed_memory._stores import isolate_subjects


def test_a_subject_memory_is_a_store_of_the_same_agent_named_without_the_id(
    backend: Backend,
) -> None:
    agent = backend.open("A")
    assert agent.partition is None
    alice = agent.subject_store("alice@example.com")
    assert alice.agent == "A"
    assert alice.partition is not None
    assert "alice" not in alice.partition
    assert alice.source().endswith("/MEMORY.md") or alice.source().endswith("/MEMORY.md.gmenc")
    assert alice.partition in alice.source()
    assert alice.read_memory() is None  # opening created nothing
    assert agent.subject_stores() == []


def test_each_subject_has_its_own_memory_beside_the_agents(backend: Backend) -> None:
    agent = backend.open("A")
    agent.append(block("shared"))
    alice, bob = agent.subject_store("alice"), agent.subject_store("bob")
    alice.append(block("alice's IBAN", "alice"))
    bob.append(block("bob's IBAN", "bob"))
    assert contents(agent.read_memory()) == ["shared"]
    assert contents(backend.open("A").subject_store("alice").read_memory()) == ["alice's IBAN"]
    assert contents(backend.open("A").subject_store("bob").read_memory()) == ["bob's IBAN"]
    assert alice.partition != bob.partition
    listed = backend.open("A").subject_stores()
    assert sorted(s.partition or "" for s in listed) == sorted([alice.partition, bob.partition])
    assert all(s.agent == "A" for s in listed)


def test_a_subject_memory_compacts_and_archives_on_its_own(backend: Backend) -> None:
    agent = backend.open("A")
    agent.append(block("shared"))
    alice = agent.subject_store("alice")
    alice.append(block("one", "alice"))
    archive = alice.compact(block("summary", "alice"))
    assert archive is not None
    assert alice.list_archives() == [archive]
    assert contents(alice.read_archive(archive)) == ["one"]
    assert contents(alice.read_memory()) == ["summary"]
    assert agent.list_archives() == []  # the agent's own memory was not touched
    assert contents(agent.read_memory()) == ["shared"]


def test_only_the_agents_own_store_has_subject_stores(backend: Backend) -> None:
    alice = backend.open("A").subject_store("alice")
    with pytest.raises(StorageError, match="agent's own store"):
        alice.subject_store("bob")
    assert alice.subject_stores() == []
    with pytest.raises(StorageError, match="non-empty"):
        backend.open("A").subject_store("")


def test_deleting_the_agent_deletes_its_subject_memories(backend: Backend) -> None:
    agent = backend.open("A")
    agent.append(block("shared"))
    agent.subject_store("alice").append(block("secret", "alice"))
    with agent.lock():
        agent.delete()
    again = backend.open("A")
    assert again.read_memory() is None
    assert again.subject_store("alice").read_memory() is None
    assert again.subject_stores() == []


def test_deleting_a_subject_memory_leaves_the_others(backend: Backend) -> None:
    agent = backend.open("A")
    agent.append(block("shared"))
    alice, bob = agent.subject_store("alice"), agent.subject_store("bob")
    alice.append(block("a", "alice"))
    bob.append(block("b", "bob"))
    with alice.lock():
        alice.delete()
    assert alice.read_memory() is None
    assert contents(bob.read_memory()) == ["b"]
    assert contents(agent.read_memory()) == ["shared"]


def test_isolate_subjects_moves_each_subjects_records_and_keeps_the_shared_ones(
    backend: Backend,
) -> None:
    agent = backend.open("A")
    agent.append(block("shared one"))
    agent.append(block("alice one", "alice"))
    agent.append(block("bob one", "bob"))
    agent.append(block("alice two", "alice"))
    assert isolate_subjects(agent) == 3
    assert agent.read_memory() == HEADER + block("shared one")
    alice = agent.subject_store("alice")
    assert contents(alice.read_memory()) == ["alice one", "alice two"]
    assert [r.subject_id for r in parse_memory(alice.read_memory() or "").records] == [
        "alice",
        "alice",
    ]
    assert contents(agent.subject_store("bob").read_memory()) == ["bob one"]
    assert isolate_subjects(agent) == 0  # done: a second run changes nothing


def test_isolate_subjects_after_a_crash_between_the_copies_does_not_duplicate(
    backend: Backend,
) -> None:
    agent = backend.open("A")
    agent.append(block("alice one", "alice"))
    agent.append(block("shared"))
    # What a run killed after copying alice's records, before rewriting the agent's memory, left.
    alice = agent.subject_store("alice")
    alice.ensure()
    alice.rewrite_memory((alice.read_memory() or "") + block("alice one", "alice"))
    assert isolate_subjects(agent) == 1
    assert contents(alice.read_memory()) == ["alice one"]
    assert contents(agent.read_memory()) == ["shared"]


def test_isolate_subjects_appends_after_what_a_subject_already_has(backend: Backend) -> None:
    agent = backend.open("A")
    alice = agent.subject_store("alice")
    alice.append(block("kept", "alice"))
    agent.append(block("moved", "alice"))
    assert isolate_subjects(agent) == 1
    assert contents(alice.read_memory()) == ["kept", "moved"]


def test_isolate_subjects_of_an_agent_without_subjects_writes_nothing(backend: Backend) -> None:
    agent = backend.open("A")
    assert isolate_subjects(agent) == 0
    assert agent.read_memory() is None
    agent.append(block("shared"))
    before = agent.stat()
    assert isolate_subjects(agent) == 0
    assert agent.stat() == before


def test_isolate_subjects_after_a_crash_and_a_later_write_still_does_not_duplicate(
    backend: Backend,
) -> None:
    agent = backend.open("A")
    agent.append(block("alice one", "alice"))
    alice = agent.subject_store("alice")
    alice.ensure()
    alice.rewrite_memory((alice.read_memory() or "") + block("alice one", "alice"))
    alice.append(block("alice later", "alice"))  # written after the crashed run
    assert isolate_subjects(agent) == 1
    assert contents(alice.read_memory()) == ["alice one", "alice later"]
    assert contents(agent.read_memory()) == []
