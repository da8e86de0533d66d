"""Summarizers: what turns a transcript into the summary that replaces it.

:class:`Summarizer` is the extension point; :func:`summarizer_for` maps a
model name to the built-in implementation (``local/extractive`` to the
offline one, anything else to litellm).
"""

from __future__ import annotations

from ._base import LOCAL_EXTRACTIVE, SUMMARY_PREFIX, Summarizer, Transcript
from ._extractive import ExtractiveSummarizer
from ._litellm import (
    COMPRESSION_SYSTEM_PROMPT,
    COMPRESSION_USER_TEMPLATE,
    LiteLLMSummarizer,
    compression_messages,
)

__all__ = [
    "COMPRESSION_SYSTEM_PROMPT",
    "COMPRESSION_USER_TEMPLATE",
    "LOCAL_EXTRACTIVE",
    "SUMMARY_PREFIX",
    "ExtractiveSummarizer",
    "LiteLLMSummarizer",
    "Summarizer",
    "Transcript",
    "compression_messages",
    "summarizer_for",
]


def summarizer_for(
    model: str, *, api_base: str | None = None, api_key: str | None = None
) -> Summarizer:
    """The built-in summarizer for ``model``.

    ``local/extractive`` gives :class:`ExtractiveSummarizer` (``api_base`` and
    ``api_key`` are ignored); any other name a :class:`LiteLLMSummarizer`.

    Raises:
        ConfigurationError: ``model`` names another ``local/`` summarizer.
    """
    if model == LOCAL_EXTRACTIVE:
        return ExtractiveSummarizer()
    if model.startswith("local/"):
        from ..._errors import ConfigurationError

        raise ConfigurationError(
            f"summarizer model {model!r} is not a built-in local summarizer; use "
            f"{LOCAL_EXTRACTIVE!r} or pass your own Summarizer as ContextCompressor(summarizer=...)"
        )
    return LiteLLMSummarizer(model, api_base=api_base, api_key=api_key)
