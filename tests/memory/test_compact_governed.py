"""Governed compaction: erasures under the agent's lock, consent along the lineage, no drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from subjects_helpers import STORE_KINDS, conversation, governance, memory_text, readable_text

import governed_memory._memory._conversation as conversation_module
from governed_memory import ErasedDuringCompactionError, FixedClock, erase


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- Why #7: the erasure check happens under the agent's lock ---------------------


def test_an_erasure_completing_between_check_and_write_refuses_the_summary(
    workspace: Path, clock: FixedClock, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure that completes after compact() first looked, before it writes, is seen under the lock."""
    gov = governance(workspace, clock, kind=kind)
    live = conversation(gov, "A")
    live.add("Human", "alice secret live", subject_id="alice")
    live.add("Human", "bob live", subject_id="bob")
    real_lineage = conversation_module.history_lineage
    ran: list[bool] = []

    def erase_in_the_window(*args: Any, **kwargs: Any) -> list[str]:
        if not ran:  # the first look has been taken; the write has not happened
            ran.append(True)
            erase(gov, subject="alice")
        return real_lineage(*args, **kwargs)

    monkeypatch.setattr(conversation_module, "history_lineage", erase_in_the_window)
    with pytest.raises(ErasedDuringCompactionError):
        live.compact("[Compressed Memory Summary] alice secret live, bob live")
    assert ran
    assert "alice secret" not in readable_text(gov)
    assert "alice secret" not in live.return_history_as_string()
    live.compact("[Compressed Memory Summary] bob live")  # summarised again: accepted
    assert "bob live" in memory_text(gov, "A")
    assert "alice secret" not in readable_text(gov)


def test_an_erasure_of_someone_else_in_the_window_lets_the_compaction_through(
    workspace: Path, clock: FixedClock, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new tombstone seen under the lock is looked at again without the lock, then written."""
    gov = governance(workspace, clock, kind=kind)
    other = conversation(gov, "B")
    other.add("Human", "carol note", subject_id="carol")
    live = conversation(gov, "A")
    live.add("Human", "bob live", subject_id="bob")
    real_lineage = conversation_module.history_lineage
    ran: list[bool] = []

    def erase_in_the_window(*args: Any, **kwargs: Any) -> list[str]:
        if not ran:
            ran.append(True)
            erase(gov, subject="carol")
        return real_lineage(*args, **kwargs)

    monkeypatch.setattr(conversation_module, "history_lineage", erase_in_the_window)
    live.compact("[Compressed Memory Summary] bob live")
    assert "[Compressed Memory Summary] bob live" in memory_text(gov, "A")
    assert "carol note" not in readable_text(gov)
