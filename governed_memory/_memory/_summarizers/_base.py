"""The Summarizer extension point and what it is given.

A summarizer turns an agent's transcript into the text that replaces it when
the context is compressed. Two ship with governed_memory:

* :class:`LiteLLMSummarizer`: asks a language model, exactly as the reference
  does (same prompts, same parameters). The transcript leaves the process.
* :class:`ExtractiveSummarizer` (model name ``local/extractive``): no network,
  no weights; keeps the task, the most informative sentences and the latest
  turns. For deployments that may not send transcripts anywhere.

Write your own by implementing :class:`Summarizer` and passing it as
``ContextCompressor(summarizer=...)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["LOCAL_EXTRACTIVE", "SUMMARY_PREFIX", "Summarizer", "Transcript"]

LOCAL_EXTRACTIVE = "local/extractive"
"""Model name of the built-in offline summarizer."""

SUMMARY_PREFIX = (
    "[Compressed Memory Summary]\n"
    "The following is a compressed summary of earlier conversation turns, "
    "replacing the raw transcript to stay within the context window.\n\n"
)
"""What the compressor puts before a summary (reference-behaviour C13)."""


@dataclass(frozen=True)
class Transcript:
    """A conversation to summarize, in both of the forms summarizers want.

    Attributes:
        text: the history as ``return_history_as_string()`` renders it,
            static context included (what the reference sends to the model).
        messages: the turns to summarize: the history without the static
            context (system prompt, rules) that compaction re-seeds anyway.
        user_role: the role tasks are recorded under (``Human`` for an
            Agent), when known.
    """

    text: str
    messages: Sequence[Mapping[str, Any]] = field(default=())
    user_role: str | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Turns a transcript into a summary that replaces it.

    Attributes:
        model: the model name the summary comes from (``local/extractive``
            for the built-in offline summarizer).
        remote: True when :meth:`summarize` sends the transcript out of the
            process (a policy can refuse such summarizers).
    """

    model: str
    remote: bool

    def summarize(
        self, transcript: Transcript, *, max_tokens: int, temperature: float | None
    ) -> str:
        """Return the summary body (no prefix); it should fit in ``max_tokens``.

        May raise; the compressor then keeps the history as it is. An empty
        return value is refused by ``Conversation.compact``.
        """
        ...
