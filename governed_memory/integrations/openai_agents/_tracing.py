"""The SDK's tracing under a policy: a traced run is refused unless it is allowed.

The Agents SDK traces every run by default and its default processor sends
the spans, model inputs and outputs included (``trace_include_sensitive_data``
defaults to True), to OpenAI's tracing backend. That is a copy of the
session's items leaving the process, outside everything the policy governs.
So under a policy that does not rule as the built-in default, a session
operation that runs inside an SDK trace is refused (fail closed) unless the
session was built with ``allow_sdk_tracing=True`` (you checked where your
trace processors send spans, e.g. only to your own collector). Under the
default policy, as in the reference, tracing is the SDK's business.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from agents.tracing import get_current_trace, get_trace_provider

from ..._errors import ConfigurationError
from ..._policy import DEFAULT_POLICY, Policy

__all__ = ["check_tracing", "rules_as_default"]


def _run_marker() -> ContextVar[Any] | None:
    """The SDK's private mark of a run in progress (0.24); None if a release dropped it."""
    try:
        from agents.run_internal.agent_tool_configuration import _current_run
    except ImportError:
        return None
    return _current_run


_RUN = _run_marker()


def rules_as_default(policy: Policy) -> bool:
    """Whether ``policy`` rules as the built-in default does (its id and description aside)."""
    return policy.model_dump(exclude={"policy"}) == DEFAULT_POLICY.model_dump(exclude={"policy"})


def _traced() -> bool:
    trace = get_current_trace()
    if trace is not None:
        # Disabled tracing (set_tracing_disabled, RunConfig(tracing_disabled=True),
        # OPENAI_AGENTS_DISABLE_TRACING) runs under the SDK's no-op trace.
        return trace.trace_id != "no-op"
    # Runner.run (0.24) reads the session before it opens the run's trace, and a
    # run with no new input (Runner.run(agent, [], ...), a resumed RunState)
    # saves nothing before its first model call: the items read here would
    # reach a generation span. Inside a run that has no trace yet, the run is
    # traced unless tracing is disabled globally. The SDK marks a run in
    # progress only by a private context variable (pinned range <0.25); without
    # it every untraced call counts as inside a run (fail closed).
    if _RUN is not None and _RUN.get() is None:
        return False
    # Creating a trace object without starting it notifies no processor.
    return get_trace_provider().create_trace("governed_memory probe").trace_id != "no-op"


def check_tracing(policy: Policy, *, session_id: str, operation: str) -> None:
    """Refuse ``operation`` inside an SDK trace under a non-default ``policy``.

    Raises:
        ConfigurationError: naming the policy, the session and the fixes.
    """
    if not _traced() or rules_as_default(policy):
        return
    raise ConfigurationError(
        f"{operation} of session {session_id!r} refused: the run is traced by the OpenAI Agents "
        "SDK, whose default trace processor sends model inputs and outputs (this session's "
        f"items) to OpenAI, outside policy {policy.id!r} v{policy.version}; disable SDK tracing "
        "(Runner.run(..., run_config=RunConfig(tracing_disabled=True)), "
        "agents.set_tracing_disabled(True) or OPENAI_AGENTS_DISABLE_TRACING=1), or, if your "
        "trace processors keep spans where the policy allows, pass "
        "GovernedSession(..., allow_sdk_tracing=True)"
    )
