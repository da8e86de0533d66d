"""Agent: a model in a loop over a persistent, compressible memory (reference-behaviour C16).

Each :meth:`Agent.run` records the task under the user's name, then loops:

1. compression check (``_context_compressor.maybe_compress``), at the top of
   every iteration, integer and ``"auto"`` modes alike;
2. one model call through ``litellm.completion``: the system prompt as the
   system message, the whole history (``return_history_as_string()``) as
   the user message, as the reference sends it; the tools, if any;
3. the reply recorded under the agent's name, each tool call run and its
   output recorded as ``Tool Executor``;
4. stop: after ``max_loops`` iterations, or when ``stopping_condition``
   returns True; in ``"auto"`` mode also when a reply calls no tool, and
   always at ``auto_max_loops`` iterations.

Memory is ``<workspace>/agents/<agent_name>/MEMORY.md``: an agent constructed
again with the same name (another process, the next day) preloads it and
resumes.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from .._base import Clock, validate_agent_name
from .._base import memory_md_path as derive_memory_md_path
from .._errors import ConfigurationError, ModelCallError
from .._protocols import CONFIGURED, Configured, resolve_governance
from ._compressor import ContextCompressor
from ._conversation import Conversation, _check_role
from ._llm import ChatReply, Completion, chat_completion
from ._tools import Toolbox

if TYPE_CHECKING:
    from .._protocols import ConsentGate
    from .._stores import AgentStore

__all__ = ["DEFAULT_AUTO_MAX_LOOPS", "DEFAULT_CONTEXT_LENGTH", "TOOL_ROLE", "Agent"]

logger = logging.getLogger("governed_memory.agent")

DEFAULT_CONTEXT_LENGTH = 16000
"""Context window assumed for a model litellm's table does not know."""
DEFAULT_AUTO_MAX_LOOPS = 25
"""The most iterations one ``max_loops="auto"`` run makes."""
TOOL_ROLE = "Tool Executor"

RETRY_WAIT_FIRST = 0.5
"""Seconds: the first retry waits a random time up to this; each next one up to twice as long."""
RETRY_WAIT_MAX = 20.0
"""Seconds: the longest wait between two tries of a model call."""

# Failures that the same request cannot cure: a wrong key, a malformed or
# refused request, a model that does not exist.
_FINAL_STATUS = frozenset({400, 401, 403, 404, 422})
_FINAL_ERRORS = frozenset(
    {
        "AuthenticationError",
        "BadRequestError",
        "PermissionDeniedError",
        "NotFoundError",
        "UnprocessableEntityError",
    }
)


def _worth_retrying(exc: BaseException) -> bool:
    """Whether a failed model call may succeed if sent again (a 5xx, a timeout, a 429)."""
    cause = exc.__cause__
    if cause is None:
        return True  # an empty reply: sampling again may give text
    status = getattr(cause, "status_code", None)
    if isinstance(status, int) and status in _FINAL_STATUS:
        return False
    return not any(kind.__name__ in _FINAL_ERRORS for kind in type(cause).__mro__)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name}={value!r} must be a whole number >= 1")
    return value


def _check_max_loops(value: object) -> int | Literal["auto"]:
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"max_loops={value!r} must be a whole number >= 1 or 'auto' (loop while the "
            "model calls tools, up to auto_max_loops)"
        )
    return value


def _render_reply(reply: ChatReply) -> str:
    lines = [reply.content] if reply.content.strip() else []
    lines.extend(f"[tool call] {call.name}({call.arguments})" for call in reply.tool_calls)
    return "\n".join(lines)


class Agent:
    """An LLM agent whose memory persists in MEMORY.md and is compressed before it overflows.

    Args:
        agent_name: the memory key (one folder name: letters, digits, ``-``,
            ``_``, ``.``); replies are recorded under it.
        model_name: any litellm model string (``gpt-4o-mini``,
            ``ollama/llama3``, ``openai/<name>`` with ``api_base``...).
        system_prompt: sent as the system message; kept out of MEMORY.md.
        rules: recorded under ``user_name`` at the top of the history; kept
            out of MEMORY.md.
        max_loops: model calls per :meth:`run`, or ``"auto"``.
        context_compression: attach ``ContextCompressor(threshold=0.9)`` as
            ``agent._context_compressor`` (replace it to tune; None disables).
        context_length: the model's input window in tokens (default: from
            litellm's packaged model table, else 16000).
        user_name: the role tasks are recorded under.
        workspace_dir: the workspace (default: ``$WORKSPACE_DIR``, else
            ``./agent_workspace``).
        memory_md_path: use this MEMORY.md instead of the derived path.
        persistent_memory: False keeps memory in-process only.
        tools: Python functions the model may call (see docs/agent.md).
        temperature, max_tokens: for each model call (None: provider default).
        api_base, api_key: the endpoint and key (None: litellm's own
            configuration, e.g. ``OPENAI_API_BASE``/``OPENAI_API_KEY``).
        subject_id: the data subject of the messages (governed mode).
        summarizer_model: the compressor's summarizer (default: model_name;
            ``local/extractive`` keeps transcripts in-process).
        stopping_condition: called with each reply; True ends the run.
        auto_max_loops: the iteration cap of ``max_loops="auto"``.
        retry_attempts: tries per model call before :class:`ModelCallError`.
            A failed try is retried after a random wait (exponential backoff
            with full jitter: up to 0.5 s, then up to 1 s, 2 s, ... 20 s), but
            never on an authentication, permission, not-found or bad-request
            error, which the same request cannot cure. The provider SDK's own
            hidden retries are off (``max_retries=0``) unless ``llm_args``
            sets them, so ``retry_attempts`` counts every request.
        retry_sleep: how the wait between tries is spent (default
            ``time.sleep``; tests pass a function that records it).
        llm_args: further ``litellm.completion`` arguments (``timeout``,
            ``mock_response``, provider options).
        id: the conversation id (default: a fresh uuid hex).
        preload_max_chars: bound on the preloaded MEMORY.md (newest records kept).
        governance: the consent gate (a :class:`~governed_memory.Governance`:
            consent, encryption, audit). Not given: the policy the settings
            configure, as for :class:`Conversation` (default mode when none
            is); None is refused while a non-default policy is configured.
        clock: timestamps of messages.
        completion: a stand-in for ``litellm.completion`` (tests).

    Raises:
        InvalidAgentNameError: ``agent_name`` cannot be a folder name.
        ConfigurationError: another argument is invalid.
        StorageError: MEMORY.md could not be created or read.
    """

    def __init__(
        self,
        agent_name: str,
        model_name: str = "gpt-4o-mini",
        system_prompt: str | None = None,
        rules: str | None = None,
        max_loops: int | Literal["auto"] = 1,
        *,
        context_compression: bool = True,
        context_length: int | None = None,
        user_name: str = "Human",
        workspace_dir: str | os.PathLike[str] | None = None,
        memory_md_path: str | os.PathLike[str] | None = None,
        persistent_memory: bool = True,
        tools: Sequence[Callable[..., Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        subject_id: str | None = None,
        summarizer_model: str | None = None,
        stopping_condition: Callable[[str], bool] | None = None,
        auto_max_loops: int = DEFAULT_AUTO_MAX_LOOPS,
        retry_attempts: int = 3,
        retry_sleep: Callable[[float], None] = time.sleep,
        llm_args: Mapping[str, Any] | None = None,
        id: str | None = None,
        preload_max_chars: int | None = None,
        governance: ConsentGate[AgentStore] | Configured | None = CONFIGURED,
        clock: Clock | None = None,
        completion: Completion | None = None,
    ) -> None:
        self.agent_name = validate_agent_name(agent_name)
        # Resolved once, then handed to the memory and the compressor as given.
        governance = resolve_governance(
            governance, what=f"Agent({self.agent_name!r}, governance=None)"
        )
        if not isinstance(model_name, str) or not model_name.strip():
            raise ConfigurationError(
                f"model_name {model_name!r} must be a litellm model name such as 'gpt-4o-mini'"
            )
        self.model_name = model_name
        self.system_prompt = system_prompt
        self.rules = rules
        self.max_loops = _check_max_loops(max_loops)
        self.auto_max_loops = _positive_int("auto_max_loops", auto_max_loops)
        self.retry_attempts = _positive_int("retry_attempts", retry_attempts)
        self._retry_sleep = retry_sleep
        if max_tokens is not None:
            _positive_int("max_tokens", max_tokens)
        self.user_name = _check_role(user_name)
        if temperature is not None and (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or not temperature >= 0
        ):
            raise ConfigurationError(f"temperature={temperature!r} must be None or a number >= 0")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.api_base = api_base
        self.api_key = api_key
        self.subject_id = subject_id
        self.stopping_condition = stopping_condition
        self.llm_args = dict(llm_args or {})
        self.id = id or uuid.uuid4().hex
        self._completion = completion
        self.toolbox = Toolbox(tools or ())
        self.context_length = (
            _positive_int("context_length", context_length)
            if context_length is not None
            else self._default_context_length()
        )
        self.context_compression = context_compression
        self._context_compressor: ContextCompressor | None = (
            ContextCompressor(
                threshold=0.9, summarizer_model=summarizer_model, governance=governance
            )
            if context_compression
            else None
        )
        path: str | os.PathLike[str] | None = None
        if persistent_memory:
            path = (
                memory_md_path
                if memory_md_path is not None
                else derive_memory_md_path(
                    self.agent_name,
                    # Under governance, memory lives in the governed workspace
                    # (beside its consent registry), not wherever $WORKSPACE_DIR points.
                    workspace_dir
                    if workspace_dir is not None or governance is None
                    else governance.workspace,
                )
            )
        self.short_memory = Conversation(
            name=f"{self.agent_name}_id_{self.id}_conversation",
            id=self.id,
            system_prompt=system_prompt,
            rules=rules,
            user=user_name,
            time_enabled=True,
            context_length=self.context_length,
            memory_md_path=path,
            preload_max_chars=preload_max_chars,
            subject_id=subject_id,
            clock=clock,
            tokenizer_model_name=model_name,
            governance=governance,
        )

    def _default_context_length(self) -> int:
        from ._llm import model_input_window

        return model_input_window(self.model_name) or DEFAULT_CONTEXT_LENGTH

    @property
    def memory_md_path(self) -> Path | None:
        """The MEMORY.md this agent writes through to (None: in-process only)."""
        path = self.short_memory.memory_md_path
        return Path(path) if path is not None else None

    # -- the loop --------------------------------------------------------

    def _messages(self) -> list[dict[str, str]]:
        messages = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": self.short_memory.return_history_as_string()})
        return messages

    def _call_model(self) -> ChatReply:
        messages = self._messages()
        # One retry authority: the provider SDK's own retries are off unless asked for.
        extra = {"max_retries": 0, **self.llm_args}

        def call() -> ChatReply:
            return chat_completion(
                model=self.model_name,
                messages=messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                api_base=self.api_base,
                api_key=self.api_key,
                tools=self.toolbox.schemas or None,
                extra=extra,
                completion=self._completion,
            )

        def log(state: Any) -> None:
            logger.warning(
                "agent '%s': attempt %d/%d failed: %s; retrying in %.1f s",
                self.agent_name,
                state.attempt_number,
                self.retry_attempts,
                state.outcome.exception() if state.outcome else None,
                state.next_action.sleep if state.next_action else 0.0,
            )

        retrying = Retrying(
            stop=stop_after_attempt(self.retry_attempts),
            wait=wait_random_exponential(multiplier=RETRY_WAIT_FIRST, max=RETRY_WAIT_MAX),
            retry=retry_if_exception(
                lambda exc: isinstance(exc, ModelCallError) and _worth_retrying(exc)
            ),
            sleep=self._retry_sleep,
            before_sleep=log,
            reraise=True,
        )
        return retrying(call)

    def run(self, task: str) -> str:
        """Record ``task``, loop the model over the memory, and return the final reply text.

        The final reply is the text of the last reply that had text (a reply
        made only of tool calls has none).

        Raises:
            ConfigurationError: ``task`` is not a non-blank string.
            ModelCallError: a model call failed ``retry_attempts`` times; the
                task and everything before the failure stay in memory.
        """
        if not isinstance(task, str) or not task.strip():
            raise ConfigurationError(f"task {task!r} must be a non-blank string")
        self.short_memory.add(role=self.user_name, content=task)
        auto = self.max_loops == "auto"
        limit = self.auto_max_loops if auto else int(self.max_loops)
        final = ""
        for loop in range(1, limit + 1):
            if self._context_compressor is not None:
                self._context_compressor.maybe_compress(self)
            reply = self._call_model()
            if reply.content.strip():
                final = reply.content
            self.short_memory.add(role=self.agent_name, content=_render_reply(reply))
            for call in reply.tool_calls:
                self.short_memory.add(role=TOOL_ROLE, content=self.toolbox.run(call))
            if self.stopping_condition is not None and self.stopping_condition(reply.content):
                break
            if auto and self.stopping_condition is None and not reply.tool_calls:
                break
            if auto and loop == limit:
                logger.warning(
                    "agent '%s': max_loops='auto' reached its cap of %d iterations; "
                    "returning the last reply (raise auto_max_loops to allow more)",
                    self.agent_name,
                    limit,
                )
        return final

    def __repr__(self) -> str:
        return (
            f"Agent(agent_name={self.agent_name!r}, model_name={self.model_name!r}, "
            f"max_loops={self.max_loops!r}, context_length={self.context_length})"
        )
