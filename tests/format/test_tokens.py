"""The running token total of a Conversation always equals a full recount (fixes D9)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from governed_memory import Conversation, FixedClock, counter_for
from governed_memory._format._tokens import TokenLedger, format_message, full_count

ROLES = st.sampled_from(["Human", "Agent", "Tool Executor", "System", "User"])
CONTENT = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["", "   ", "<|endoftext|>", "turn 1: 1000 EUR", "a\n\nb"]),
    st.none(),
    st.integers(),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


class LedgerMachine(RuleBasedStateMachine):
    """Random add/delete/update/clear/compact/reassign sequences; the total never drifts."""

    def __init__(self) -> None:
        super().__init__()
        self.conversation = Conversation(
            system_prompt="You are helpful.",
            rules="Be brief.",
            time_enabled=True,
            clock=FixedClock(dt.datetime(2026, 11, 30, 4, 0, 0), tick=dt.timedelta(microseconds=7)),
        )

    @rule(role=ROLES, content=CONTENT)
    def add(self, role: str, content: Any) -> None:
        self.conversation.add(role, content)

    @precondition(lambda self: self.conversation.conversation_history)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        n = len(self.conversation.conversation_history)
        index = data.draw(st.integers(min_value=-n, max_value=n - 1))
        self.conversation.delete(index)

    @precondition(lambda self: self.conversation.conversation_history)
    @rule(data=st.data(), role=ROLES, content=CONTENT)
    def update(self, data: st.DataObject, role: str, content: Any) -> None:
        n = len(self.conversation.conversation_history)
        index = data.draw(st.integers(min_value=0, max_value=n - 1))
        self.conversation.update(index, role, content)

    @rule()
    def clear(self) -> None:
        self.conversation.clear()

    @rule(summary=st.text(min_size=1, max_size=40).filter(str.strip))
    def compact(self, summary: str) -> None:
        self.conversation.compact(summary)

    @rule()
    def reassign_history(self) -> None:
        """A caller replaces the list (same length, other contents)."""
        self.conversation.conversation_history = [
            {"role": "Human", "content": f"replaced {i}"}
            for i in range(len(self.conversation.conversation_history))
        ]

    @rule()
    def read_total(self) -> None:
        """Reading the total between steps exercises the incremental path."""
        assert self.conversation.token_count >= 0

    @invariant()
    def total_equals_full_recount(self) -> None:
        assert self.conversation.token_count == self.conversation.full_token_count()


TestLedger = LedgerMachine.TestCase
TestLedger.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


def test_total_counts_only_new_messages() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)

    ledger = TokenLedger(count)
    history = [{"role": "A", "content": "x" * i} for i in range(100)]
    ledger.total(history)
    calls.clear()
    history.append({"role": "B", "content": "new"})
    ledger.total(history)
    assert calls == ["B: new"]


def test_ledger_definition_matches_the_fixture_usage_ratio(fixtures_dir: Path) -> None:
    """230 tokens over a context of 100: the reference recorded usage_ratio 2.3."""
    usage = json.loads((fixtures_dir / "compressor" / "usage_ratio.json").read_text())
    text = (fixtures_dir / "compressor" / "history_string_before.txt").read_text()
    messages = []
    for block in text.split("\n\n"):
        stamp, rest = block[1:].split("] ", 1)
        role, content = rest.split(": ", 1)
        messages.append({"role": role, "content": content, "timestamp": stamp})
    assert "\n\n".join(format_message(m) for m in messages) == text
    tokens = full_count(messages, counter_for(None))
    assert tokens / usage["context_length"] == usage["usage_ratio"]


def test_token_count_follows_every_operation() -> None:
    conversation = Conversation(system_prompt="sys", time_enabled=False)
    count = counter_for(None)
    assert conversation.token_count == count("System: sys")
    conversation.add("Human", "hello there")
    expected = count("System: sys") + count("\n\n") + count("Human: hello there")
    assert conversation.token_count == expected
    conversation.update(1, "Human", "hi")
    assert conversation.token_count == conversation.full_token_count()
    conversation.delete(-1)
    assert conversation.token_count == count("System: sys")
    conversation.compact("summary")
    assert conversation.token_count == conversation.full_token_count()
    conversation.clear()
    assert conversation.token_count == 0


def test_recount_after_editing_a_message_in_place() -> None:
    conversation = Conversation()
    conversation.add("Human", "short")
    assert conversation.token_count == counter_for(None)("Human: short")
    conversation.conversation_history[0]["content"] = "a much longer message than before"
    assert conversation.recount_tokens() == conversation.full_token_count()
