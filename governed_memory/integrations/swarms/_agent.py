"""Agent: ``swarms.Agent`` with governed memory, by changing one import.

Everything is swarms' own (the loop, tools, MCP, handoffs, streaming,
planning) except what reaches memory: ``short_memory`` is a
:class:`GovernedConversation` on swarms' own path
(``$WORKSPACE_DIR/agents/<agent_name>/MEMORY.md``), the compressor a
:class:`GovernedContextCompressor`, and each turn is attributed to the
agent's ``subject_id``. Under a policy other than the default, swarms'
copies elsewhere (``autosave``, ``save()``, state and config dumps) and
its telemetry and log files are refused, naming the policy and the fix.
"""

from __future__ import annotations

import inspect
from typing import Any

from swarms import Agent as SwarmsAgent  # type: ignore[import-untyped]  # no py.typed
from swarms.agents.context_compressor import ContextCompressor as SwarmsContextCompressor  # type: ignore[import-untyped]  # no py.typed
from swarms.prompts.safety_prompt import SAFETY_PROMPT  # type: ignore[import-untyped]  # no py.typed

from governed_memory import ConfigurationError, memory_md_path, resolve_workspace
from governed_memory._protocols import CONFIGURED, resolve_governance

from ._compressor import GovernedContextCompressor
from ._conversation import GovernedConversation
from ._outbound import governs, policy_name, refuse, require_outbound_off

__all__ = ["Agent"]

_SWARMS_INIT = inspect.signature(SwarmsAgent.__init__)

_STATE_FIX = (
    "leave autosave off and keep the agent's memory in its governed MEMORY.md; answer access "
    "requests with `governed-memory export --subject <id>`"
)


def _needs_subject(gate: Any) -> str | None:
    """Why ``gate``'s policy needs every turn attributed to a subject (None: it does not)."""
    policy = getattr(gate, "policy", None)
    if policy is None or not governs(gate):
        return None
    reasons = []
    if policy.consent.required_for:
        reasons.append(
            f"it asks for consent ({', '.join(policy.consent.required_for)}; "
            "consent.required_for), which only a subject can give"
        )
    if str(getattr(policy.memory.isolation, "value", policy.memory.isolation)) == "subject":
        reasons.append("it keeps each subject's memory apart (memory.isolation = 'subject')")
    return " and ".join(reasons) or None


class Agent(SwarmsAgent):  # type: ignore[misc]  # swarms ships no types
    """``swarms.Agent`` whose memory runs under the configured policy.

    Takes every argument of ``swarms.Agent`` (16.0.3), plus:

    Args:
        subject_id: the data subject every turn is attributed to (consent,
            subject isolation, export and erasure). Change it between runs
            with ``agent.subject_id = ...``.
        governance: the policy layer (a :class:`governed_memory.Governance`).
            Not given: the policy the settings configure (default mode when
            none is); None: default mode, refused under a non-default policy.

    Raises:
        ConfigurationError: under a non-default policy: ``governance=None``;
            no ``subject_id`` while the policy asks for consent or isolates
            subjects; ``autosave=True``; ``publish_to_marketplace=True``;
            swarms telemetry or swarms log files (``SWARMS_LOG_FILES``) on.
        InvalidAgentNameError: with ``persistent_memory=True``, an
            ``agent_name`` that is not one folder name.
    """

    def __init__(
        self,
        *args: Any,
        subject_id: str | None = None,
        governance: Any = CONFIGURED,
        **kwargs: Any,
    ) -> None:
        given = _SWARMS_INIT.bind_partial(self, *args, **kwargs).arguments
        name = given.get("agent_name", "swarm-worker-01")
        self._governance = resolve_governance(governance, what=f"Agent({name!r}, governance=None)")
        # Refused before swarms builds anything (its constructor reports to telemetry).
        require_outbound_off(self._governance)
        if given.get("autosave"):
            refuse(
                self._governance,
                "Agent(autosave=True)",
                "at every step it writes the agent's state as plaintext JSON (its task, the "
                "messages it was seeded with, its plan's subtasks, its subject_id) and its "
                "config to the agent's swarms workspace",
                _STATE_FIX,
            )
        if given.get("publish_to_marketplace"):
            self._refuse_publish("Agent(publish_to_marketplace=True)")
        self._check_subject(subject_id, name)
        self._subject_id = subject_id
        super().__init__(*args, **kwargs)

    def _refuse_publish(self, feature: str) -> None:
        refuse(
            self._governance,
            feature,
            "it publishes short_memory.get_str() as the agent's prompt to the Swarms "
            "Marketplace: the conversation, with the preloaded memory of earlier sessions",
            "publish a prompt written for the marketplace from an agent without memory",
        )

    # -- the subject -----------------------------------------------------

    def _check_subject(self, subject_id: str | None, name: str) -> None:
        why = _needs_subject(self._governance) if subject_id is None else None
        if why is not None:
            raise ConfigurationError(
                f"Agent({name!r}) has no subject_id, but {policy_name(self._governance)} "
                f"attributes every turn to a data subject: {why}; pass "
                "Agent(..., subject_id='<the customer or user id>') and assign agent.subject_id "
                "when the next run is another subject's"
            )

    @property
    def subject_id(self) -> str | None:
        """The data subject of this agent's turns."""
        return self._subject_id

    @subject_id.setter
    def subject_id(self, value: str | None) -> None:
        """Attribute the next runs to ``value``: the memory is opened again for that subject."""
        self._check_subject(value, self.agent_name)
        if value != self._subject_id and self.messages and governs(self._governance):
            raise ConfigurationError(
                f"agent.subject_id = {value!r} refused under {policy_name(self._governance)}: "
                f"the agent's messages= seeds ({len(self.messages)}) were given for "
                f"{self._subject_id!r} and would be written to {value!r}'s memory as theirs; "
                "assign agent.messages = None (or the next subject's own messages) first"
            )
        previous, self._subject_id = self._subject_id, value
        try:
            self.short_memory = self.short_memory_init()
        except BaseException:
            self._subject_id = previous  # the agent stays with the memory it had
            raise

    @property
    def governance(self) -> Any:
        """The policy layer the agent's memory runs under (None: default mode)."""
        return self._governance

    # -- memory ----------------------------------------------------------

    def short_memory_init(self) -> GovernedConversation:
        """swarms' short memory, as a :class:`GovernedConversation` on swarms' MEMORY.md path."""
        prompt = self.system_prompt
        if self.safety_prompt_on is True:
            prompt += "\n\n" + SAFETY_PROMPT
        path = None
        if self.persistent_memory:
            # swarms' path, its agent name checked (no separators, no '..'); the
            # workspace read now (swarms caches $WORKSPACE_DIR for the process).
            gate = self._governance
            workspace = gate.workspace if gate is not None else resolve_workspace()
            path = str(memory_md_path(self.agent_name, workspace))
        return GovernedConversation(
            name=f"{self.agent_name}_id_{self.id}_conversation",
            system_prompt=prompt,
            user=self.user_name,
            rules=self.rules,
            token_count=False,
            message_id_on=True,
            time_enabled=True,
            dynamic_context_window=self.dynamic_context_window,
            tokenizer_model_name=self.model_name,
            context_length=self.context_length,
            memory_md_path=path,
            messages=self.messages,
            subject_id=self._subject_id,
            governance=self._governance,
        )

    @property
    def short_memory(self) -> GovernedConversation | None:
        """The agent's memory (a :class:`GovernedConversation`)."""
        return self.__dict__.get("_governed_memory")

    @short_memory.setter
    def short_memory(self, value: Any) -> None:
        if not isinstance(value, GovernedConversation):
            refuse(
                self._governance,
                f"short_memory = {type(value).__name__}(...)",
                "it would keep the agent's memory outside the policy's consent gate",
                "build it with agent.short_memory_init(), or assign agent.subject_id to start "
                "a subject's memory",
            )
        self.__dict__["_governed_memory"] = value

    @property
    def _context_compressor(self) -> GovernedContextCompressor | None:
        return self.__dict__.get("_governed_compressor")

    @_context_compressor.setter
    def _context_compressor(self, value: Any) -> None:
        """swarms' compressor (or a tuned one, as swarms' docs show) becomes the governed one."""
        if value is not None and not isinstance(value, GovernedContextCompressor):
            if type(value) is SwarmsContextCompressor:
                value = GovernedContextCompressor.like(value)
            else:
                refuse(
                    self._governance,
                    f"the compressor {type(value).__name__}",
                    "it would summarise the history without the policy's summarizer decision",
                    "use swarms' ContextCompressor (it is governed here) or "
                    "governed_memory.integrations.swarms.GovernedContextCompressor",
                )
        self.__dict__["_governed_compressor"] = value

    # -- swarms' copies elsewhere ----------------------------------------

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """swarms' run; under a non-default policy only while telemetry and log files stay off."""
        require_outbound_off(self._governance)
        return super().run(*args, **kwargs)

    def handle_publish_to_marketplace(self) -> Any:
        """swarms' marketplace publication; refused under a non-default policy."""
        self._refuse_publish("Agent.handle_publish_to_marketplace()")
        return super().handle_publish_to_marketplace()

    def save(self, file_path: str | None = None) -> None:
        """swarms' state file (the whole conversation, plaintext); refused under a non-default policy."""
        refuse(
            self._governance,
            "Agent.save()",
            "it writes the agent's state as plaintext JSON (its task, the messages it was "
            "seeded with, its plan's subtasks, its subject_id)",
            _STATE_FIX,
        )
        super().save(file_path)

    def load(self, file_path: str | None = None) -> None:
        """swarms' state load; refused under a non-default policy."""
        refuse(
            self._governance,
            "Agent.load()",
            "it replaces the agent's state (its conversation) from a plaintext file",
            "build the agent again: it preloads its governed memory",
        )
        super().load(file_path)

    def save_to_yaml(self, file_path: str) -> None:
        """swarms' YAML dump of the agent; refused under a non-default policy."""
        refuse(self._governance, "Agent.save_to_yaml()", "it dumps the agent's state", _STATE_FIX)
        super().save_to_yaml(file_path)

    def model_dump_json(self) -> Any:
        """swarms' JSON dump of the agent; refused under a non-default policy."""
        refuse(
            self._governance, "Agent.model_dump_json()", "it dumps the agent's state", _STATE_FIX
        )
        return super().model_dump_json()

    def model_dump_yaml(self) -> Any:
        """swarms' YAML dump of the agent; refused under a non-default policy."""
        refuse(
            self._governance, "Agent.model_dump_yaml()", "it dumps the agent's state", _STATE_FIX
        )
        return super().model_dump_yaml()


def _signature() -> inspect.Signature:
    """swarms' constructor signature with ours added, so swarms' telemetry sees its own config."""
    params = list(_SWARMS_INIT.parameters.values())
    ours = [
        inspect.Parameter("subject_id", inspect.Parameter.KEYWORD_ONLY, default=None),
        inspect.Parameter("governance", inspect.Parameter.KEYWORD_ONLY, default=CONFIGURED),
    ]
    return _SWARMS_INIT.replace(parameters=[*params[:-1], *ours, params[-1]])


Agent.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
