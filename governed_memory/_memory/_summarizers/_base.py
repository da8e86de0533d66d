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

from ..._protocols import LOCAL_SUMMARIZER, Summarizer, Transcript  # documented there; re-exported

__all__ = ["LOCAL_EXTRACTIVE", "SUMMARY_PREFIX", "Summarizer", "Transcript"]

LOCAL_EXTRACTIVE = LOCAL_SUMMARIZER
"""Model name of the built-in offline summarizer."""

SUMMARY_PREFIX = (
    "[Compressed Memory Summary]\n"
    "The following is a compressed summary of earlier conversation turns, "
    "replacing the raw transcript to stay within the context window.\n\n"
)
"""What the compressor puts before a summary (reference-behaviour C13)."""
