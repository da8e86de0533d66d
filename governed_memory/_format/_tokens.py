"""Running token count of a conversation history (fixes D9).

The reference re-tokenises the whole history string on every loop. Here each
message is tokenised once, lazily, the first time the total is asked for after
it was added; the total is kept as a running sum. Asking for the total costs
time proportional to the messages added since the last ask, never to the
length of the history.

The total is defined as the sum, over messages, of the tokens of the message
as :meth:`Conversation.return_history_as_string` renders it, plus the tokens
of the ``"\\n\\n"`` joins. Tokenising the joined string in one piece can differ
by a few tokens where BPE merges across a join; :func:`full_count` computes
the same definition from scratch, which is what tests compare against.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["TokenCounter", "TokenLedger", "format_message", "full_count"]

TokenCounter = Callable[[str], int]
"""Counts the tokens of one string."""


def format_message(message: Mapping[str, Any]) -> str:
    """One message as return_history_as_string renders it (B11)."""
    timestamp = message.get("timestamp")
    if timestamp:
        return f"[{timestamp}] {message['role']}: {message['content']}"
    return f"{message['role']}: {message['content']}"


def full_count(history: Sequence[Mapping[str, Any]], count: TokenCounter) -> int:
    """The token total of ``history``, computed from scratch."""
    if not history:
        return 0
    join = count("\n\n")
    return sum(count(format_message(m)) for m in history) + join * (len(history) - 1)


class TokenLedger:
    """Per-message token counts and their running total for one history list."""

    def __init__(self, count: TokenCounter) -> None:
        self._count = count
        self._per_message: list[int] = []
        self._sum = 0
        self._join: int | None = None
        # The list the counts belong to: a different list object (history
        # reassigned by clear, compact or a caller) means start over.
        self._source: Sequence[Mapping[str, Any]] | None = None

    def total(self, history: Sequence[Mapping[str, Any]]) -> int:
        """The total for ``history``, counting only messages not seen yet."""
        if history is not self._source or len(history) < len(self._per_message):
            self.reset()  # another list, or this one was shortened behind our back
            self._source = history
        for message in history[len(self._per_message) :]:
            tokens = self._count(format_message(message))
            self._per_message.append(tokens)
            self._sum += tokens
        if not history:
            return 0
        if self._join is None:
            self._join = self._count("\n\n")
        return self._sum + self._join * (len(history) - 1)

    def reset(self) -> None:
        """Forget every count (after clear, compact or a direct edit)."""
        self._per_message.clear()
        self._sum = 0
        self._source = None

    def removed(self, index: int) -> None:
        """Message ``index`` was deleted from the history."""
        if index < len(self._per_message):
            self._sum -= self._per_message.pop(index)

    def changed(self, index: int, message: Mapping[str, Any]) -> None:
        """Message ``index`` was edited in place and now reads ``message``."""
        if index < len(self._per_message):
            tokens = self._count(format_message(message))
            self._sum += tokens - self._per_message[index]
            self._per_message[index] = tokens
