"""What a policy says about swarms' features that write or send data elsewhere.

swarms keeps copies of a conversation outside MEMORY.md: the Agent's state
and config files (``autosave``, ``save()``), the Conversation's JSON/YAML
exports, its telemetry, which is on by default and sends every run's
inputs, conversation, model requests and responses to swarms' collector, and
its log files (``SWARMS_LOG_FILES``, off by default), where some methods log
the text they are given.
Under the default policy they keep swarms' behaviour. Under any other, none
of them may carry a governed conversation: each is refused, naming the
policy, the feature and the fix.
"""

from __future__ import annotations

from typing import Any

from governed_memory import ConfigurationError

__all__ = ["governs", "policy_name", "refuse", "require_outbound_off"]


def _policy(gate: object) -> Any:
    return getattr(gate, "policy", None)


def governs(gate: object) -> bool:
    """Whether ``gate`` rules differently from the default policy (None: default mode)."""
    if gate is None:
        return False
    policy = _policy(gate)
    if policy is None:
        return True  # a gate of its own: assume it governs
    from governed_memory._policy import DEFAULT_POLICY

    # As governed_memory refuses governance=None: the id and description do not count.
    default = DEFAULT_POLICY.model_dump(exclude={"policy"})
    return bool(policy.model_dump(exclude={"policy"}) != default)


def policy_name(gate: object) -> str:
    """``policy 'regulated' v1 (<source>)``, for messages."""
    policy = _policy(gate)
    if policy is None:
        return f"the consent gate {type(gate).__name__}"
    return f"policy {policy.id!r} v{policy.version} ({policy.source})"


def refuse(gate: object, feature: str, why: str, fix: str) -> None:
    """Raise ``ConfigurationError`` when ``gate`` governs: ``feature`` would let data out."""
    if governs(gate):
        raise ConfigurationError(
            f"{feature} refused under {policy_name(gate)}: {why}, outside the policy's "
            f"consent, encryption, retention and erasure; {fix}"
        )


def require_outbound_off(gate: object) -> None:
    """Refuse a governed agent while swarms' telemetry or its log files are on."""
    require_telemetry_off(gate)
    require_log_files_off(gate)


def require_log_files_off(gate: object) -> None:
    """Refuse a governed agent while swarms writes its log to files.

    With ``SWARMS_LOG_FILES`` on, swarms' loguru logger writes INFO and above
    to ``$WORKSPACE_DIR/logs`` as plaintext, and ``Agent.add_memory()``,
    ``send_agent_message()``, ``run_concurrent_tasks()`` and a failed plan
    log the text they were given. swarms configures the files at import
    (``_CONFIGURED_DIR``, the only record of it, is read for that), and again
    when a later module asks with the variable changed, so both are checked.
    """
    if not governs(gate):
        return
    from swarms.utils import loguru_logger  # type: ignore[import-untyped]  # no py.typed

    configured = getattr(loguru_logger, "_CONFIGURED_DIR", None)
    if loguru_logger.log_files_enabled() or (configured is not None and configured[1]):
        raise ConfigurationError(
            f"swarms log files refused under {policy_name(gate)}: SWARMS_LOG_FILES is on, and "
            "swarms writes its log as plaintext to $WORKSPACE_DIR/logs, with the text "
            "add_memory(), send_agent_message(), run_concurrent_tasks() and a failed plan "
            "are given, outside the policy; set SWARMS_LOG_FILES=false (swarms' default) in "
            "the environment before the process starts"
        )


def require_telemetry_off(gate: object) -> None:
    """Refuse a governed agent while swarms' telemetry can export its conversation.

    swarms reads ``SWARMS_TELEMETRY_ON`` once per process (one shared
    exporter), so it cannot be turned off for one agent without changing
    every other swarms object of the process; the admin turns it off. With
    it off, the exporter is built now, inert, so that a later change of the
    variable cannot turn it on for this process.
    """
    if not governs(gate):
        return
    from swarms.telemetry.otel import swarm_telemetry, telemetry_on  # type: ignore[import-untyped]  # no py.typed

    if telemetry_on() or swarm_telemetry().ready:
        raise ConfigurationError(
            f"swarms telemetry refused under {policy_name(gate)}: it is on (SWARMS_TELEMETRY_ON "
            "is unset or true) and exports every run's task, conversation, model requests and "
            "responses to https://telemetry.swarms.world, outside the policy; set "
            "SWARMS_TELEMETRY_ON=false in the environment before the process starts"
        )
