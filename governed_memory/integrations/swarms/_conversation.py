"""GovernedConversation: swarms' Conversation whose MEMORY.md goes through governed_memory.

Every method swarms' Agent calls is swarms' own, inherited; only what touches
MEMORY.md, and the history itself, are routed through an inner
:class:`governed_memory.Conversation` on the same ``memory_md_path``:

==========================  =================================================
swarms                      here
==========================  =================================================
``conversation_history``    the inner Conversation's history (one list)
``_init_memory_md``         opens the inner Conversation (folder, header,
                            pending erasures, subject isolation)
``_preload_memory_md``      its preload (through the preload gate)
``add_in_memory``           its ``add``: written first, through the consent
                            gate, then kept in the history
``_append_to_memory_md``    a write without a history message
``compact``                 its ``compact`` (archive, then atomic replace)
``_archive_memory_md``      nothing of its own: ``compact`` archives
==========================  =================================================

Before the history is read (for a model call, a compression or a caller), erasures that
completed since are dropped from it. Under a policy other than the default,
swarms' own copies (JSON/YAML exports, autosave) are refused.
"""

from __future__ import annotations

import uuid
from typing import Any

from swarms.structs.conversation import Conversation as SwarmsConversation  # type: ignore[import-untyped]  # no py.typed

from governed_memory import (
    Clock,
    Conversation,
)
from governed_memory._protocols import CONFIGURED, resolve_governance

from ._outbound import refuse

__all__ = ["GovernedConversation"]

Message = dict[str, Any]

_EXPORT_FIX = (
    "answer access requests with `governed-memory export --subject <id>` (audited, within "
    "the policy's retention), or use a policy that allows it"
)


class GovernedConversation(SwarmsConversation):  # type: ignore[misc]  # swarms ships no types
    """swarms' ``Conversation`` with governed write-through, preload and compaction.

    Takes swarms' arguments, plus:

    Args:
        subject_id: the data subject of the messages (consent, isolation,
            export and erasure find them by it).
        governance: the policy layer, as for :class:`governed_memory.Conversation`
            (not given: the configured policy; None: default mode, refused
            under a non-default policy).
        clock: timestamps and archive names (default: the system clock).
        preload_max_chars: bound on the preloaded MEMORY.md.

    Raises:
        ConfigurationError: ``governance=None`` under a non-default policy;
            or, under one, ``autosave=True``: swarms' files are plaintext and
            outside the policy. (A saved conversation swarms would resume is
            not loaded: :meth:`load` is refused, and swarms logs it.)
    """

    def __init__(
        self,
        *args: Any,
        subject_id: str | None = None,
        governance: Any = CONFIGURED,
        clock: Clock | None = None,
        preload_max_chars: int | None = None,
        **kwargs: Any,
    ) -> None:
        self._gate = resolve_governance(governance, what="GovernedConversation(governance=None)")
        if kwargs.get("autosave"):
            refuse(
                self._gate,
                "Conversation(autosave=True)",
                "it writes the whole history as plaintext JSON/YAML under conversations_dir "
                "after every message",
                f"leave autosave off; {_EXPORT_FIX}",
            )
        self._subject_id = subject_id
        self._clock = clock
        self._preload_max_chars = preload_max_chars
        self._memory: Conversation | None = None
        self._pending: list[Message] = []
        self._pending_path: Any = None
        self._preload_messages: list[Message] = []
        super().__init__(*args, **kwargs)
        if self._memory is None:  # no MEMORY.md: the governed history in memory only
            self._open_memory()

    # -- the history and the path are the inner Conversation's ----------

    @property
    def conversation_history(self) -> list[Message]:
        """The messages (the inner governed Conversation's history), erased subjects dropped first.

        Every swarms method reads the history through here (its output types,
        handoffs, exports to the caller), so none returns what an erasure
        since has removed from disk.
        """
        if self._memory is None:
            return self._pending
        self.drop_erased()
        return self._memory.conversation_history

    @conversation_history.setter
    def conversation_history(self, value: list[Message]) -> None:
        if self._memory is None:
            self._pending = value
        else:
            self._memory.conversation_history = value

    @property
    def memory_md_path(self) -> Any:
        """The MEMORY.md written through to; assign None to stop persisting."""
        return self._pending_path if self._memory is None else self._memory.memory_md_path

    @memory_md_path.setter
    def memory_md_path(self, value: Any) -> None:
        # Under a Governance, governed_memory.Conversation refuses a path outside its workspace.
        if self._memory is None:
            self._pending_path = value
        else:
            self._memory.memory_md_path = value

    @property
    def governance(self) -> Any:
        """The policy layer the memory runs under (None: default mode)."""
        return self._gate

    @property
    def subject_id(self) -> str | None:
        """The data subject of the messages (None: none)."""
        return self._subject_id

    @property
    def memory(self) -> Conversation:
        """The inner :class:`governed_memory.Conversation` (its store, preload, compaction)."""
        assert self._memory is not None
        return self._memory

    def _open_memory(self) -> None:
        memory = Conversation(
            name=self.name,
            system_prompt=self.system_prompt,
            rules=self.rules,
            custom_rules_prompt=self.custom_rules_prompt,
            user=self.user,
            time_enabled=self.time_enabled,
            context_length=self.context_length,
            memory_md_path=self._pending_path,
            id=self.id,
            preload_max_chars=self._preload_max_chars,
            subject_id=self._subject_id,
            clock=self._clock,
            governance=self._gate,
        )
        # Its static messages are swarms' (already in the history, with their
        # message ids); what it preloaded follows them in _preload_memory_md.
        static = memory.conversation_history[: len(self._static_contents())]
        self._preload_messages = memory.conversation_history[len(static) :]
        memory.conversation_history = self._pending
        self._memory = memory

    def _static_contents(self) -> list[Any]:
        return [
            c for c in (self.system_prompt, self.rules, self.custom_rules_prompt) if c is not None
        ]

    # -- MEMORY.md -----------------------------------------------------

    def _init_memory_md(self) -> None:
        """Open the governed memory: folder and header if missing, pending erasures, isolation."""
        if self._memory is None:
            self._open_memory()

    def _preload_memory_md(self) -> None:
        """Append what the governed memory preloaded (the preload gate's records)."""
        self.conversation_history.extend(self._preload_messages)
        self._preload_messages = []
        self._str_cache = None

    def _append_to_memory_md(self, role: str, content: Any) -> None:
        """Write one block through the consent gate, without a history message."""
        if getattr(self, "_suppress_memory_md", False) or self._memory is None:
            return
        self._memory.add(role, content)
        self._memory.delete(-1)

    def _archive_memory_md(self) -> None:
        """Nothing: ``compact`` archives (a new name each time, durably, before replacing)."""

    def add_in_memory(
        self,
        role: str,
        content: Any,
        metadata: dict[str, Any] | None = None,
        category: str | None = None,
    ) -> Message:
        """Add a message: written through the gate first, then kept, shaped as swarms shapes it."""
        if getattr(self, "_suppress_memory_md", False):
            # The static context (system prompt, rules) while swarms constructs: never on disk.
            return super().add_in_memory(role, content, metadata, category)  # type: ignore[no-any-return]
        if self._memory is None:  # no MEMORY.md (persistent_memory=False): memory only
            self._open_memory()
            assert self._memory is not None
        message = self._memory.add(role, content, metadata or None)
        self._swarms_shape(message, category)
        self._str_cache = None
        if self.channel is not None and content is not None and role not in ("System", "system"):
            self.channel.post(role, str(content))
        if self.token_count is True:
            message["token_count"] = self._line_token_count(self._format_message(message))
        return message

    def batch_add(self, messages: list[Message]) -> None:
        """swarms' batch add (kept in memory, not written, as swarms does).

        Under a policy, the messages are the subject's (a ``subject_id`` they do
        not carry is set on copies), so an erasure of the subject reaches them.
        """
        if self._gate is not None and self._subject_id is not None:
            messages = [
                message if "subject_id" in message else {**message, "subject_id": self._subject_id}
                for message in messages
            ]
        super().batch_add(messages)

    def _swarms_shape(self, message: Message, category: str | None) -> None:
        """Keys in swarms' order (message id, category), ours (metadata, subject) after."""
        ours: dict[str, Any] = {
            k: message.pop(k) for k in ("metadata", "subject_id", "lineage") if k in message
        }
        if self.message_id_on:
            message["message_id"] = str(uuid.uuid4())
        if category:
            message["category"] = category
        message.update(ours)

    def compact(
        self, summary: str, summary_role: str = "System", *, keep_other_subjects: bool = False
    ) -> None:
        """swarms' compaction through the governed memory: archive, then atomic replace.

        Raises what :meth:`governed_memory.Conversation.compact` raises (a
        blank summary wipes nothing; under subject isolation another
        subject's messages need ``keep_other_subjects=True``).
        """
        memory = self.memory
        memory.compact(summary, summary_role, keep_other_subjects=keep_other_subjects)
        self._str_cache = None
        for message in memory.conversation_history:
            if message.get("content") is summary:
                self._swarms_shape(message, None)
                break
        if self.channel is not None and summary_role not in ("System", "system"):
            self.channel.post(summary_role, str(summary))
        if self.autosave:
            self._autosave()

    def compaction_transcript(self) -> tuple[str, list[Message]]:
        """What a summary may be built from (see :meth:`governed_memory.Conversation.compaction_transcript`)."""
        return self.memory.compaction_transcript()

    def drop_erased(self) -> int:
        """Drop from the history what erasures since it loaded removed from disk; how many."""
        if self._memory is None or self._gate is None:
            return 0
        dropped = self._memory.drop_erased()
        if dropped:
            self._str_cache = None
        return dropped

    def return_history_as_string(self) -> str:
        """swarms' history string; its cache is dropped first when an erasure removed messages."""
        self.drop_erased()  # swarms' cache hit reads no history
        return super().return_history_as_string()  # type: ignore[no-any-return]

    # -- swarms' own copies: refused under a non-default policy --------

    def _refuse_copy(self, feature: str) -> None:
        refuse(
            self._gate,
            feature,
            "it writes the whole history as plaintext to a file of swarms' choosing",
            _EXPORT_FIX,
        )

    def save_as_json(self, force: bool = True) -> None:
        """swarms' JSON save; refused under a non-default policy."""
        self._refuse_copy("Conversation.save_as_json()")
        super().save_as_json(force)

    def save_as_yaml(self, force: bool = True) -> None:
        """swarms' YAML save; refused under a non-default policy."""
        self._refuse_copy("Conversation.save_as_yaml()")
        super().save_as_yaml(force)

    def export(self, force: bool = True) -> None:
        """swarms' export (JSON or YAML); refused under a non-default policy."""
        self._refuse_copy("Conversation.export()")
        super().export(force)

    def export_conversation(self, filename: str, *args: Any, **kwargs: Any) -> None:
        """swarms' export to ``filename``; refused under a non-default policy."""
        self._refuse_copy(f"Conversation.export_conversation({filename!r})")
        super().export_conversation(filename, *args, **kwargs)

    def _refuse_load(self, feature: str) -> None:
        refuse(
            self._gate,
            feature,
            "it replaces the history with a plaintext file, past the preload gate, and sets "
            "every attribute the file's metadata names (the policy layer and autosave among them)",
            "let the agent preload its governed memory instead",
        )

    def load(self, filename: str) -> None:
        """swarms' load of a saved history; refused under a non-default policy."""
        self._refuse_load(f"Conversation.load({filename!r})")
        super().load(filename)

    def load_from_json(self, filename: str) -> None:
        """swarms' JSON load (what ``load`` calls); refused under a non-default policy."""
        self._refuse_load(f"Conversation.load_from_json({filename!r})")
        super().load_from_json(filename)

    def load_from_yaml(self, filename: str) -> None:
        """swarms' YAML load (what ``load`` calls); refused under a non-default policy."""
        self._refuse_load(f"Conversation.load_from_yaml({filename!r})")
        super().load_from_yaml(filename)

    def import_conversation(self, filename: str) -> None:
        """swarms' import (its JSON load); refused under a non-default policy."""
        self._refuse_load(f"Conversation.import_conversation({filename!r})")
        super().import_conversation(filename)
