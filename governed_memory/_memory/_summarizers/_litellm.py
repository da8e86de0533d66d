"""Summaries from a language model through litellm, as the reference asks for them.

The two prompt texts are byte for byte those the reference (swarms 16.0.3)
sends; ``tests/fixtures/swarms-16.0.3/compressor/llm_call.json`` pins them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._llm import Completion, chat_completion
from ._base import Transcript

__all__ = [
    "COMPRESSION_SYSTEM_PROMPT",
    "COMPRESSION_USER_TEMPLATE",
    "LiteLLMSummarizer",
    "compression_messages",
]

COMPRESSION_SYSTEM_PROMPT = """
You are a conversation compression expert. Your job is to produce a faithful, dense summary of an ongoing agent conversation so that the agent can continue its work without losing critical context.

Requirements:
- Preserve every concrete fact, decision, constraint, tool result, and open question.
- Preserve the original task and any user-provided instructions.
- Preserve the latest intermediate conclusions the agent has reached.
- Preserve any error messages, failed attempts, and retry context.
- Drop conversational filler, redundant restatements, and verbose chain-of-thought.
- Output ONLY the summary body. No preamble. No meta commentary.
"""

COMPRESSION_USER_TEMPLATE = """Compress the following agent conversation into a dense summary that the agent can use as its new working memory:

<conversation>
{history}
</conversation>

Produce the compressed memory now."""


def compression_messages(history: str) -> list[dict[str, str]]:
    """The system and user messages of a summary request for ``history``."""
    # replace(), not format(): braces in the history must stay as they are.
    user = COMPRESSION_USER_TEMPLATE.replace("{history}", history, 1)
    return [
        {"role": "system", "content": COMPRESSION_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


class LiteLLMSummarizer:
    """Summarizes with any model litellm can reach (``gpt-4o-mini``, ``ollama/llama3``, ...).

    The transcript is sent to the model: use it only where that is allowed
    (a model served inside your network, via ``api_base``, may be).

    Args:
        model: the litellm model string.
        api_base: the endpoint; None lets litellm use its own configuration
            (``OPENAI_API_BASE`` and friends).
        api_key: the key; None lets litellm read the provider's variable.
        completion_kwargs: further arguments for ``litellm.completion``
            (``timeout``, ``mock_response``, ...).
        log_to_callbacks: let litellm callbacks registered in the process
            see the request (off: transcripts stay out of logging tools).
        completion: a stand-in for ``litellm.completion`` (tests).
    """

    remote = True

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        completion_kwargs: Mapping[str, Any] | None = None,
        log_to_callbacks: bool = False,
        completion: Completion | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            from ..._errors import ConfigurationError

            raise ConfigurationError(
                f"summarizer model {model!r} must be a litellm model name such as 'gpt-4o-mini'"
            )
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.completion_kwargs = dict(completion_kwargs or {})
        self.log_to_callbacks = log_to_callbacks
        self._completion = completion

    def summarize(
        self, transcript: Transcript, *, max_tokens: int, temperature: float | None
    ) -> str:
        """Ask the model for a summary of ``transcript.text``.

        Raises:
            ModelCallError: the call failed or the reply was empty.
        """
        reply = chat_completion(
            model=self.model,
            messages=compression_messages(transcript.text),
            temperature=temperature,
            max_tokens=max_tokens,
            api_base=self.api_base,
            api_key=self.api_key,
            extra=self.completion_kwargs,
            log_to_callbacks=self.log_to_callbacks,
            completion=self._completion,
        )
        return reply.content

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer(model={self.model!r}, api_base={self.api_base!r})"
