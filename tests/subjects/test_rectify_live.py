"""A live governed Conversation applies rectifications made since it loaded (Art. 16).

The rectification runs from another Governance on the same workspace, as
another process would: the live conversation learns of it from the
rectification records on disk, before it summarises or compacts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rectify_helpers import NEW, OLD, OLD_NEEDLE, policy
from subjects_helpers import STORE_KINDS, conversation, killed_at_call, memory_text

from governed_memory import (
    Conversation,
    FixedClock,
    Governance,
    parse_memory,
    rectify,
    resume_rectifications,
    subject_records,
)
from governed_memory._memory import ExtractiveSummarizer
from governed_memory._protocols import Transcript
from governed_memory._records import RectificationStore

LATER = "alice asks a later question about cards."


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _pair(
    workspace: Path, clock: FixedClock, kind: str, **sections: object
) -> tuple[Governance, Governance]:
    """Two Governance objects on one workspace (one key when encrypted): the agent's and the officer's."""
    chosen = policy(**sections)  # type: ignore[arg-type]
    if kind != "encrypted":
        return tuple(Governance(workspace=workspace, policy=chosen, clock=clock) for _ in "ab")  # type: ignore[return-value]
    from governed_memory._crypto._providers import InMemoryKeyProvider

    chosen = policy(encryption={"enabled": True}, **sections)  # type: ignore[arg-type]
    keys = InMemoryKeyProvider()
    return tuple(  # type: ignore[return-value]
        Governance(workspace=workspace, policy=chosen, clock=clock, key_provider=keys) for _ in "ab"
    )


def _rectify_old(officer: Governance, agent: str = "A") -> str:
    [record] = [r for r in subject_records(officer, "alice", agent=agent) if r.content == OLD]
    rectify(officer, subject="alice", record=record.id, text=NEW, reason="ticket 9")
    return record.id


def _summary_of(conv: Conversation) -> str:
    text, turns = conv.compaction_transcript()
    summary = ExtractiveSummarizer().summarize(
        Transcript(text=text, messages=turns), max_tokens=400
    )
    return "[Compressed Memory Summary]\n" + summary


def _stored_summary(gov: Governance, agent: str = "A") -> str:
    [summary] = parse_memory(memory_text(gov, agent)).records
    return summary.content


@pytest.mark.parametrize("time_enabled", [False, True], ids=["no-stamps", "stamps"])
def test_a_live_conversation_summarises_its_own_rectified_turn_with_the_new_text(
    workspace: Path, clock: FixedClock, kind: str, time_enabled: bool
) -> None:
    gov, officer = _pair(workspace, clock, kind)
    live = conversation(gov, "A", time_enabled=time_enabled)
    live.add("Human", OLD, subject_id="alice")
    live.add("AI", "Noted, thank you for the banking details.", subject_id="alice")
    _rectify_old(officer)
    text, _turns = live.compaction_transcript()
    assert NEW in text and OLD_NEEDLE not in text
    assert NEW in live.return_history_as_string()  # the model sees the corrected turn
    summary = _summary_of(live)
    assert NEW in summary and OLD_NEEDLE not in summary
    live.compact(summary)
    stored = _stored_summary(gov)
    assert NEW in stored and OLD_NEEDLE not in stored
    assert OLD_NEEDLE not in live.return_history_as_string()
    assert live.apply_rectifications() == 0  # applied once


def test_a_live_conversation_rereads_a_preload_holding_the_rectified_record(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov, officer = _pair(workspace, clock, kind)
    first = conversation(gov, "A")
    first.add("Human", OLD, subject_id="alice")
    first.add("Human", "bob asks about opening hours on Saturday.", subject_id="bob")
    live = conversation(gov, "A", system_prompt="You are A.")  # preloads both records
    assert OLD in live.return_history_as_string()
    _rectify_old(officer)
    summary = _summary_of(live)
    assert NEW in summary and OLD_NEEDLE not in summary and "opening hours" in summary
    history = live.return_history_as_string()
    assert history.startswith("System: You are A.") and NEW in history
    assert OLD_NEEDLE not in history
    live.compact(summary)
    stored = _stored_summary(gov)
    assert NEW in stored and OLD_NEEDLE not in stored


def test_drop_erased_applies_rectifications_first(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov, officer = _pair(workspace, clock, kind)
    live = conversation(gov, "A")
    live.add("Human", OLD, subject_id="alice")
    _rectify_old(officer)
    assert live.drop_erased() == 0  # nothing erased, but the text is corrected
    assert live.conversation_history[-1]["content"] == NEW


def test_a_rectification_after_the_transcript_is_replaced_in_the_summary_compact_gets(
    workspace: Path, clock: FixedClock
) -> None:
    gov, officer = _pair(workspace, clock, "plaintext")
    live = conversation(gov, "A")
    live.add("Human", OLD, subject_id="alice")
    summary = _summary_of(live)  # built before the rectification: it quotes OLD
    assert OLD in summary
    _rectify_old(officer)
    live.compact(summary)
    stored = _stored_summary(gov)
    assert NEW in stored and OLD_NEEDLE not in stored


def test_a_short_old_text_is_not_replaced_inside_a_summary_compact_gets(
    workspace: Path, clock: FixedClock
) -> None:
    """A few characters would match unrelated words of the summary: the history changes, the words do not."""
    gov, officer = _pair(workspace, clock, "plaintext")
    live = conversation(gov, "A")
    live.add("Human", "yes", subject_id="alice")
    [record] = subject_records(officer, "alice")
    rectify(officer, subject="alice", record=record.id, text="no", reason="ticket 10")
    live.compact("[Compressed Memory Summary]\nThe user said yes to the eyes-only plan.")
    assert _stored_summary(gov).endswith("The user said yes to the eyes-only plan.")


def test_an_interrupted_rectification_is_applied_once_it_completes(
    workspace: Path, clock: FixedClock
) -> None:
    """Pending, it is not applied; its completion is a new mark, which makes compact() look again."""
    gov, officer = _pair(workspace, clock, "plaintext")
    live = conversation(gov, "A")
    live.add("Human", OLD, subject_id="alice")
    [record] = subject_records(officer, "alice")
    assert killed_at_call(
        "replace", 2, lambda: rectify(officer, subject="alice", record=record.id, text=NEW)
    )
    assert [p.record_id for p in RectificationStore(officer.governance_dir).pending()] == [
        record.id
    ]
    assert live.apply_rectifications() == 0  # not complete: nothing to apply yet
    before = live._erasure_marks()
    [receipt] = resume_rectifications(officer)
    assert live._erasure_marks() - before == {f"{receipt.id}:done"}
    text, _turns = live.compaction_transcript()
    assert NEW in text and OLD_NEEDLE not in text


def test_only_the_rectified_record_changes_when_messages_carry_timestamps(
    workspace: Path, clock: FixedClock
) -> None:
    """Two turns with the same old text: the record id tells the rectified one apart."""
    gov, officer = _pair(workspace, clock, "plaintext")
    live = conversation(gov, "A", time_enabled=True)
    live.add("Human", OLD, subject_id="alice")
    live.add("Human", OLD, subject_id="alice")
    first, _second = (r for r in subject_records(officer, "alice") if r.content == OLD)
    rectify(officer, subject="alice", record=first.id, text=NEW)
    assert live.apply_rectifications() == 1
    assert [m["content"] for m in live.conversation_history] == [NEW, OLD]


def test_conversations_that_never_loaded_the_record_are_unaffected(
    workspace: Path, clock: FixedClock
) -> None:
    gov, officer = _pair(workspace, clock, "plaintext")
    live = conversation(gov, "A")
    live.add("Human", OLD, subject_id="alice")
    other_agent = conversation(gov, "B")
    other_agent.add("Human", OLD, subject_id="alice")  # the same words, another agent's record
    _rectify_old(officer, agent="A")
    after = conversation(gov, "A")  # opened after the rectification: reads the corrected record
    assert other_agent.apply_rectifications() == 0
    assert other_agent.conversation_history[-1]["content"] == OLD
    assert after.apply_rectifications() == 0
    assert NEW in after.return_history_as_string()
    assert live.apply_rectifications() == 1


def test_subject_isolation_rereads_the_subjects_own_preload(
    workspace: Path, clock: FixedClock
) -> None:
    gov, officer = _pair(workspace, clock, "plaintext", memory={"isolation": "subject"})
    first = conversation(gov, "A", subject_id="alice")
    first.add("Human", OLD)
    first.add("Human", LATER)
    live = conversation(gov, "A", subject_id="alice")
    assert OLD in live.return_history_as_string()
    _rectify_old(officer)
    summary = _summary_of(live)
    assert NEW in summary and OLD_NEEDLE not in summary and LATER in summary
    live.compact(summary)
    store = gov.store_factory(workspace / "agents" / "A" / "MEMORY.md", lambda: "")
    try:
        text = store.subject_store("alice").read_memory() or ""
    finally:
        store.close()
    assert NEW in text and OLD_NEEDLE not in text


def test_default_mode_has_nothing_to_apply(workspace: Path, clock: FixedClock) -> None:
    gov, officer = _pair(workspace, clock, "plaintext")
    conversation(gov, "A").add("Human", OLD, subject_id="alice")
    plain = Conversation(
        name="plain", memory_md_path=workspace / "plain" / "MEMORY.md", governance=None
    )
    plain.add("Human", OLD, subject_id="alice")
    _rectify_old(officer)
    assert plain.apply_rectifications() == 0
    assert plain.conversation_history[-1]["content"] == OLD
    text, _turns = plain.compaction_transcript()
    assert OLD in text


def test_the_watch_recognises_old_content_by_the_receipts_keyed_hash() -> None:
    from governed_memory._protocols import Rectified
    from governed_memory._records import content_hash

    salt = "00ff" * 8
    item = Rectified("rec-0000000000000000", "alice", salt, (content_hash(salt, OLD),), NEW)
    assert item.had(f"  {OLD}\n") and not item.had(NEW)
