"""kill -9 while an agent's shared memory is split into subject memories: nothing lost, nothing doubled.

A forked child runs ``isolate_subjects`` over a memory of many subjects and
SIGKILLs itself after its k-th write (k drawn at random, from the first
subject's copy to the agent's own rewrite), many times over; then a fresh run
finishes the job. Every record must be in exactly one place: subject-free
records in the agent's memory, each subject's records once in their own.
Plaintext and encrypted. The kill point is chosen by write count, not by a
timer, so a loaded machine cannot make the test miss the window.
"""

from __future__ import annotations

import os
import random
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from crypto_helpers import make_keyring

from governed_memory import PlaintextAgentStore, memory_md_path, parse_memory
from governed_memory._format._records import render_block, render_header
from governed_memory._protocols import AgentStore
from governed_memory._stores import isolate_subjects
from governed_memory._stores._encrypted import EncryptedAgentStore
from governed_memory._stores._files import AgentFolderStore

HEADER = render_header("crash", "2026-11-30T10:00:00")
SUBJECTS = [f"s{n}" for n in range(12)]


def _open(kind: str, workspace: Path) -> AgentStore:
    path = memory_md_path("A", workspace)
    if kind == "encrypted":
        keyring = make_keyring(workspace / ".governed_memory" / "keyring")
        return EncryptedAgentStore(path, lambda: HEADER, keyring=keyring)
    return PlaintextAgentStore(path, lambda: HEADER)


def _killed_after(writes: int, kind: str, workspace: Path) -> bool:
    """Run isolate_subjects in a child that SIGKILLs itself after ``writes`` memory rewrites.

    Returns whether it was killed (a run with fewer writes left finishes).
    """
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            done = 0
            real = AgentFolderStore.rewrite_memory

            def rewrite(self: Any, text: str) -> None:
                nonlocal done
                real(self, text)
                done += 1
                if done == writes:
                    os.kill(os.getpid(), signal.SIGKILL)

            AgentFolderStore.rewrite_memory = rewrite  # type: ignore[method-assign]
            isolate_subjects(_open(kind, workspace))
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0
    return False


@pytest.mark.parametrize("kind", ["plaintext", "encrypted"])
def test_kill9_during_isolation_loses_and_doubles_nothing(kind: str, workspace: Path) -> None:
    rng = random.Random(4321)
    for round_ in range(5):
        agent = _open(kind, workspace)
        expected: Counter[tuple[str | None, str]] = Counter()
        for i in range(120):
            subject = None if i % 5 == 0 else rng.choice(SUBJECTS)
            text = f"r{round_}-m{i}"
            meta = {"subject": subject} if subject else None
            stamp = f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}"
            agent.append(render_block("Human", stamp, text, meta))
            expected[(subject, text)] += 1
        agent.close()
        subjects = len({s for s, _ in expected if s is not None})
        # Killed after the k-th write: a subject's copy (k <= subjects) or the agent's
        # own rewrite (k = subjects + 1, after which the run is complete); twice over,
        # the second run killed while finishing the first.
        assert _killed_after(rng.randint(1, subjects), kind, workspace)
        _killed_after(rng.randint(1, subjects), kind, workspace)
        agent = _open(kind, workspace)
        isolate_subjects(agent)  # finish what the killed runs left
        found: Counter[tuple[str | None, str]] = Counter()
        for record in parse_memory(agent.read_memory() or "").records:
            assert record.subject_id is None
            found[(None, record.content)] += 1
        for store in agent.subject_stores():
            for record in parse_memory(store.read_memory() or "").records:
                assert store.partition == agent.subject_store(record.subject_id or "").partition
                found[(record.subject_id, record.content)] += 1
        this_round = Counter({k: v for k, v in found.items() if k[1].startswith(f"r{round_}-")})
        assert this_round == expected
        assert isolate_subjects(agent) == 0
        agent.close()
