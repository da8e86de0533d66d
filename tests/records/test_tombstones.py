"""Erasure records: progress logs repair a torn line like the consent log, and never drop one.

The erasure tests run on a plaintext and on an encrypted workspace (sealed records).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS, conversation, governance, readable_text

from governed_memory import FixedClock, StorageError
from governed_memory._governance._root import Governance
from governed_memory._subjects import (
    ErasureScope,
    Tombstone,
    TombstoneStore,
    erase,
    resume_erasures,
)

ERASURE = "20261130T100000000000Z-0a0b0c0d"


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def pending_store(tmp_path: Path) -> TombstoneStore:
    store = TombstoneStore(tmp_path / "gov")
    store.write(
        Tombstone(ERASURE, ErasureScope(subject="alice"), "2026-11-30", "dpo", "r", "p", "1")
    )
    return store


def progress_path(store: TombstoneStore) -> Path:
    return store.tombstone_dir / f".{ERASURE}.progress.jsonl"


def test_a_torn_progress_line_is_cut_before_the_next_append(tmp_path: Path) -> None:
    store = pending_store(tmp_path)
    store.log_progress(ERASURE, {"agent": "A"})
    with open(progress_path(store), "ab") as handle:
        handle.write(b'{"agent":"B","fi')  # a writer killed mid-line
    assert store.progress(ERASURE) == [{"agent": "A"}]
    store.log_progress(ERASURE, {"agent": "B"})
    assert progress_path(store).read_bytes() == b'{"agent":"A"}\n{"agent":"B"}\n'
    assert store.progress(ERASURE) == [{"agent": "A"}, {"agent": "B"}]


def test_a_damaged_complete_progress_line_is_reported_not_skipped(tmp_path: Path) -> None:
    store = pending_store(tmp_path)
    store.log_progress(ERASURE, {"agent": "A"})
    with open(progress_path(store), "ab") as handle:
        handle.write(b"garbage\n")
    with pytest.raises(StorageError, match=r"erasure progress .*line \+2.*damaged"):
        store.progress(ERASURE)


def test_the_erasure_lock_file_goes_once_the_erasure_is_complete(tmp_path: Path) -> None:
    store = pending_store(tmp_path)
    lock = store.tombstone_dir / f".{ERASURE}.lock"
    with store.locked(ERASURE):
        assert lock.exists()
    assert lock.exists()  # still pending: kept for the next worker
    tombstone = store.get(ERASURE)
    assert tombstone is not None
    from dataclasses import replace

    with store.locked(ERASURE):
        store.write(replace(tombstone, state="complete", completed_at="2026-11-30"))
    assert not lock.exists()


def _populate(gov: Governance) -> None:
    """Agents A and B: alice and bob, a compaction, then alice and bob again."""
    for agent in ("A", "B"):
        conv = conversation(gov, agent)
        conv.add("Human", f"alice secret {agent}-1", subject_id="alice")
        conv.add("Human", f"bob note {agent}-1", subject_id="bob")
        conv.compact(f"[Compressed Memory Summary] mixed summary {agent}")
        conv.add("Human", f"alice secret {agent}-2", subject_id="alice")
        conv.store.close()  # type: ignore[union-attr]


def _fail_rewrite(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    from governed_memory._stores import AgentFolderStore  # both file stores' rewrites

    calls = {"n": 0}
    for method in ("rewrite_memory", "rewrite_archive"):
        real = getattr(AgentFolderStore, method)

        def flaky(self: object, *args: str, real: object = real) -> None:
            calls["n"] += 1
            if calls["n"] == nth:
                raise StorageError("disk full (injected)")
            real(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(AgentFolderStore, method, flaky)


def test_a_resumed_erasure_counts_the_agent_whose_progress_line_was_torn(
    workspace: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    gov = governance(workspace, clock, kind=kind)
    _populate(gov)
    _fail_rewrite(monkeypatch, 3)  # A's two files rewritten; B's plan logged, no file touched
    with pytest.raises(StorageError, match="injected"):
        erase(gov, subject="alice")
    monkeypatch.undo()
    store = TombstoneStore(gov.governance_dir, sealing=gov.sealing)
    [pending] = store.pending()
    path = store.tombstone_dir / f".{pending.id}.progress.jsonl"
    data = path.read_bytes()
    assert data.count(b"\n") == 2
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last + (len(data) - last) // 2])  # B's line torn: no newline
    assert [e["agent"] for e in store.progress(pending.id)] == ["A"]

    [receipt] = resume_erasures(gov)

    assert receipt.resumed
    assert receipt.agents == ["A", "B"]
    by_agent = {a: sum(f.records for f in receipt.files if f.agent == a) for a in ("A", "B")}
    assert by_agent == {"A": 2, "B": 2}
    assert receipt.records == 4 and receipt.summaries == 2
    assert "alice secret" not in readable_text(gov)
