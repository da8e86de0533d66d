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


# -- Why #5: no drift between memory and disk -----------------------------------


def _consenting_policy() -> Any:
    from governed_memory._policy._model import Policy

    return Policy.model_validate(
        {
            "policy": {"id": "regulated-like", "version": "7"},
            "consent": {"required_for": ["persist", "summarize"], "on_missing": "memory_only"},
        }
    )


@pytest.mark.parametrize("how", ["manual", "compressor"])
def test_a_shared_conversation_without_subject_refuses_to_compact_and_changes_nothing(
    workspace: Path, clock: FixedClock, kind: str, how: str
) -> None:
    """Compacting in memory only would leave the raw records on disk beside the summary."""
    from types import SimpleNamespace

    from subjects_helpers import all_bytes

    from governed_memory import ConsentRequiredError, ContextCompressor, parse_memory

    gov = governance(workspace, clock, _consenting_policy(), kind=kind)
    for subject in ("alice", "bob"):
        gov.grant(subject, "persist", actor="dpo")
    shared = conversation(gov, "Teller")
    shared.add("Human", "alice asks about her IBAN", subject_id="alice")
    shared.add("Human", "bob asks about his loan", subject_id="bob")
    history = list(shared.conversation_history)
    before = all_bytes(workspace / "agents")
    with pytest.raises(ConsentRequiredError) as raised:
        if how == "manual":
            shared.compact("[Compressed Memory Summary] alice and bob asked things")
        else:
            agent = SimpleNamespace(short_memory=shared, context_length=50, model_name="x")
            ContextCompressor(summarizer_model="local/extractive").compress(agent)
    message = str(raised.value)
    assert "regulated-like v7" in message and "subject_id=" in message
    assert shared.conversation_history == history
    assert all_bytes(workspace / "agents") == before
    records = parse_memory(memory_text(gov, "Teller")).records
    assert [r.content for r in records] == ["alice asks about her IBAN", "bob asks about his loan"]


def test_a_conversation_with_a_consenting_subject_compacts_memory_and_disk_alike(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    from governed_memory import parse_memory

    gov = governance(workspace, clock, _consenting_policy(), kind=kind)
    gov.grant("alice", "persist", actor="dpo")
    conv = conversation(gov, "Teller", subject_id="alice")
    conv.add("Human", "alice asks about her IBAN")
    conv.compact("[Compressed Memory Summary] alice asked about her IBAN")
    records = parse_memory(memory_text(gov, "Teller")).records
    assert [r.content for r in records] == [conv.conversation_history[-1]["content"]]
