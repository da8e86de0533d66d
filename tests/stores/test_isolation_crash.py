"""kill -9 while an agent's shared memory is split into subject memories: nothing lost, nothing doubled.

A forked child runs ``isolate_subjects`` over a memory of many subjects and is
SIGKILLed at a random moment, many times over; after each kill a fresh run
finishes the job. Every record must then be in exactly one place: subject-free
records in the agent's memory, each subject's records once in their own.
Plaintext and encrypted.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from crypto_helpers import make_keyring

from governed_memory import PlaintextAgentStore, memory_md_path, parse_memory
from governed_memory._format._records import render_block, render_header
from governed_memory._protocols import AgentStore
from governed_memory._stores import isolate_subjects
from governed_memory._stores._encrypted import EncryptedAgentStore

HEADER = render_header("crash", "2026-11-30T10:00:00")
SUBJECTS = [f"s{n}" for n in range(12)]


def _open(kind: str, workspace: Path) -> AgentStore:
    path = memory_md_path("A", workspace)
    if kind == "encrypted":
        keyring = make_keyring(workspace / ".governed_memory" / "keyring")
        return EncryptedAgentStore(path, lambda: HEADER, keyring=keyring)
    return PlaintextAgentStore(path, lambda: HEADER)


def _contents(store: AgentStore) -> list[str]:
    return [r.content for r in parse_memory(store.read_memory() or "").records]


@pytest.mark.parametrize("kind", ["plaintext", "encrypted"])
def test_kill9_during_isolation_loses_and_doubles_nothing(kind: str, workspace: Path) -> None:
    rng = random.Random(4321)
    interrupted = copied = 0
    for round_ in range(5):
        agent = _open(kind, workspace)
        expected: Counter[tuple[str | None, str]] = Counter()
        for i in range(120):
            subject = None if i % 5 == 0 else rng.choice(SUBJECTS)
            text = f"r{round_}-m{i}"
            meta = {"subject": subject} if subject else None
            agent.append(
                render_block("Human", f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}", text, meta)
            )
            expected[(subject, text)] += 1
        agent.close()
        for _ in range(3):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child never returns
                try:
                    isolate_subjects(_open(kind, workspace))
                finally:
                    os._exit(0)
            time.sleep(rng.uniform(0.0, 0.05))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        agent = _open(kind, workspace)
        left = [r for r in parse_memory(agent.read_memory() or "").records if r.subject_id]
        moved = sum(len(_contents(s)) for s in agent.subject_stores())
        if left and moved > copied:
            interrupted += 1  # a kill landed between the first copy and the last rewrite
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
        copied = sum(len(_contents(s)) for s in agent.subject_stores())
        agent.close()
    assert interrupted, "no kill landed inside a run: the test proved nothing"
