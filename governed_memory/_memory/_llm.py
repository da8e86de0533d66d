"""The one place governed_memory talks to a language model: litellm, imported lazily.

``import governed_memory`` must stay fast and must not import litellm (it
takes seconds). litellm is imported on the first model call or model-table
lookup, and right before that import the offline switches below are set
with ``os.environ.setdefault``, so a value the operator exported wins. This is
the only place governed_memory writes to the environment; litellm reads these
variables at import, so there is no other way to reach it.

What each switch stops (litellm 1.110 source, checked at import and on the
first call):

==========================================  ===========================================
``LITELLM_LOCAL_MODEL_COST_MAP=True``       the fetch of the model table from
                                            raw.githubusercontent.com at import (the
                                            packaged copy is used instead)
``LITELLM_OFFLINE_MODE=true``               Hugging Face tokenizer downloads (used to
                                            count prompt tokens of non-OpenAI models,
                                            e.g. for ``mock_response`` usage), and the
                                            catalogue fetches below
``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS``    the Anthropic beta-header table fetch on
                                            the first Anthropic call (older litellm)
``LITELLM_LOCAL_BLOG_POSTS=True``           the blog RSS fetch (older litellm)
==========================================  ===========================================

litellm's "Give Feedback / Get Help" banner, which it prints on stdout at
every failed call, is switched off (``litellm.suppress_debug_info = True``)
each time :func:`import_litellm` hands litellm out, so every path to a model
(the Agent, a ContextCompressor or summarizer on its own, a model-table
lookup) gets it, also when the application imported litellm first. The
failure itself reaches the caller as :class:`ModelCallError` with litellm's
exception chained; the banner would only land in the program's own output.

Otherwise litellm's own configuration is untouched: ``OPENAI_API_KEY``,
``OPENAI_API_BASE`` and the other provider variables keep working;
``api_base``/``api_key`` are only passed when given. Each call is made with
``no-log`` and ``turn_off_message_logging`` set, so litellm callbacks that
somebody registered in the process do not receive transcripts (pass
``log_to_callbacks=True`` to opt in).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .._errors import ModelCallError

__all__ = [
    "OFFLINE_ENV",
    "ChatReply",
    "ToolCall",
    "chat_completion",
    "import_litellm",
    "model_input_window",
]

OFFLINE_ENV: Mapping[str, str] = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
}
"""Set (if unset) right before litellm is first imported."""

Completion = Callable[..., Any]
"""``litellm.completion`` or a stand-in with the same call shape."""


def import_litellm() -> ModuleType:
    """litellm, imported with its network fetches switched off, and its banner silenced.

    The banner switch is set on every call, not only at the import: the
    application (or a test) may have imported litellm before us, or reset it.
    """
    module: Any = sys.modules.get("litellm")
    if module is None:
        for name, value in OFFLINE_ENV.items():
            os.environ.setdefault(name, value)
        import litellm

        module = litellm
        # Older litellm reads this flag instead of LITELLM_OFFLINE_MODE; only
        # fill it in when nobody chose a value.
        if getattr(module, "disable_hf_tokenizer_download", False) is None:
            module.disable_hf_tokenizer_download = True
    module.suppress_debug_info = True
    result: ModuleType = module
    return result


def model_input_window(model_name: str) -> int | None:
    """The input context window of ``model_name`` from litellm's packaged model table.

    None when the model is not in the table (custom, self-hosted, or a typo).
    """
    litellm = import_litellm()
    try:
        info = litellm.get_model_info(model_name)
    except Exception:  # litellm raises plain Exception for unmapped models
        return None
    value = info.get("max_input_tokens") if isinstance(info, Mapping) else None
    return value if isinstance(value, int) and value > 0 else None


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for."""

    id: str
    name: str
    arguments: str
    """The arguments as the model sent them (a JSON object, not yet parsed)."""


@dataclass(frozen=True)
class ChatReply:
    """What a chat completion returned: text and/or tool calls."""

    content: str
    tool_calls: tuple[ToolCall, ...] = field(default=())


def _describe(model: str, api_base: str | None) -> str:
    return f"model {model!r}" + (f" at {api_base}" if api_base else "")


def chat_completion(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    temperature: float | None,
    max_tokens: int | None,
    api_base: str | None = None,
    api_key: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
    log_to_callbacks: bool = False,
    completion: Completion | None = None,
) -> ChatReply:
    """One chat completion through litellm (``drop_params=True``).

    Args:
        extra: further keyword arguments for ``litellm.completion``
            (``timeout``, ``mock_response``, provider options, ...).
        completion: the function to call instead of ``litellm.completion``.

    Raises:
        ModelCallError: the call failed or the reply held neither text nor a
            tool call.
    """
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in messages],
        "temperature": temperature,
        "max_tokens": max_tokens,
        "drop_params": True,
    }
    if api_base is not None:
        kwargs["api_base"] = api_base
    if api_key is not None:
        kwargs["api_key"] = api_key
    if tools:
        kwargs["tools"] = [dict(t) for t in tools]
    if not log_to_callbacks:
        kwargs["no-log"] = True
        kwargs["turn_off_message_logging"] = True
    kwargs.update(extra or {})
    call = completion if completion is not None else import_litellm().completion
    try:
        response = call(**kwargs)
    except Exception as exc:
        raise ModelCallError(
            f"the call to {_describe(model, api_base)} failed: {type(exc).__name__}: {exc}; "
            "check the model name, api_base and the provider's API key variable"
        ) from exc
    return _parse(response, model, api_base)


def _parse(response: Any, model: str, api_base: str | None) -> ChatReply:
    try:
        message = response.choices[0].message
    except (AttributeError, IndexError, TypeError) as exc:
        raise ModelCallError(
            f"{_describe(model, api_base)} returned no choices ({response!r:.200}); "
            "check that the endpoint speaks the OpenAI chat-completions protocol"
        ) from exc
    content = getattr(message, "content", None)
    calls: list[ToolCall] = []
    for raw in getattr(message, "tool_calls", None) or ():
        function = getattr(raw, "function", None)
        name = getattr(function, "name", None)
        if not name:
            continue
        calls.append(
            ToolCall(
                id=str(getattr(raw, "id", "") or ""),
                name=str(name),
                arguments=str(getattr(function, "arguments", "") or "{}"),
            )
        )
    if not isinstance(content, str):
        content = "" if content is None else str(content)
    if not content.strip() and not calls:
        raise ModelCallError(
            f"{_describe(model, api_base)} returned an empty reply (no text, no tool call); "
            "retry, or raise max_tokens if the reply was cut off"
        )
    return ChatReply(content=content, tool_calls=tuple(calls))
