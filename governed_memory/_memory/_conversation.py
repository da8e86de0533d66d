"""Conversation: the in-memory history with write-through to MEMORY.md.

A drop-in for the reference's ``Conversation`` memory surface (design sections
1-3, reference-behaviour A-B), with its defects D2-D8 and D11 fixed. Which
methods touch disk:

==============================  ==============================================
method                          disk
==============================  ==============================================
``__init__``                    creates folder + MEMORY.md if missing, reads it
``add``                         appends one block (unless content is blank)
``compact``                     archives MEMORY.md, then replaces it atomically
``delete``/``update``/``clear`` none: in-memory only, as in the reference; use
                                erasure to remove records from disk
everything else                 none
==============================  ==============================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from .._base import AGENTS_DIR, MEMORY_FILE, Clock, SystemClock, iso_now
from .._errors import (
    ConfigurationError,
    EmptySummaryError,
    ErasedDuringCompactionError,
    StorageError,
)
from .._format import (
    LINEAGE_KEY,
    META_OPEN,
    PRELOAD_PREFIX,
    Record,
    TokenCounter,
    TokenLedger,
    full_count,
    has_records,
    history_lineage,
    message_subjects,
    newest_records,
    parse_memory,
    record_id,
    record_offsets,
    record_offsets_newest_first,
    record_subjects,
    render_block,
    render_header,
    to_disk_text,
)
from .._protocols import (
    CONFIGURED,
    Configured,
    ConsentGate,
    ErasureWatch,
    Rectified,
    resolve_governance,
)
from .._stores import AgentStore, BlockAppender, PlaintextAgentStore, StoreFactory, isolate_subjects
from ._erasures import filter_history, is_preload
from ._isolation import Parts, isolated_preload, sort_turns

__all__ = ["Conversation", "bounded_preload_text", "newest_records"]

_MIN_REPLACED = 12
"""Shortest old text replaced verbatim in a summary (as ``_subjects._amend.MIN_REPLACED``)."""

Message = dict[str, Any]

# The encrypted store's MEMORY.md (governed_memory._stores.ENCRYPTED_MEMORY, which
# lives beside the cryptography import); a test checks the two agree.
_ENCRYPTED_MEMORY = "MEMORY.md.gmenc"


def _check_role(role: object) -> str:
    if not isinstance(role, str) or role == "":
        raise ConfigurationError(f"role {role!r} must be a non-empty string, e.g. 'Human'")
    if "\n" in role or "\r" in role:
        raise ConfigurationError(
            f"role {role!r} contains a line break, which would forge a record header "
            "in MEMORY.md; use a single-line role name"
        )
    return role


def bounded_preload_text(text: str, max_chars: int | None) -> str:
    """``text`` cut to at most ``max_chars`` by dropping the oldest whole records.

    The header is kept and records are never cut in the middle (D11); the
    result is never longer than ``max_chars``. When not even the header and
    the newest record fit, the result is ``""``: nothing is preloaded.
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    # Record offsets only, the newest found from the end: the cost is the size
    # of what is kept, not of the file (no parse).
    preamble = next(record_offsets(text), None)
    if preamble is None:
        return ""
    budget = max_chars - preamble
    cut = None
    for start in record_offsets_newest_first(text):
        if len(text) - start > budget:
            break
        cut = start
    return text[:preamble] + text[cut:] if cut is not None else ""


def _history_string(messages: list[Message]) -> str:
    parts = []
    for message in messages:
        timestamp = message.get("timestamp")
        if timestamp:
            parts.append(f"[{timestamp}] {message['role']}: {message['content']}")
        else:
            parts.append(f"{message['role']}: {message['content']}")
    return "\n\n".join(parts)


class Conversation:
    """An agent's message history, written through to MEMORY.md.

    Keyword arguments mirror the reference (``name``, ``system_prompt``,
    ``rules``, ``custom_rules_prompt``, ``user``, ``time_enabled``,
    ``memory_md_path``, ``context_length``); the rest are extensions.

    Args:
        memory_md_path: MEMORY.md to write through to; None keeps memory
            in-process only. Use :func:`governed_memory.memory_md_path` to
            derive it safely from an agent name.
        preload_max_chars: bound on how much of MEMORY.md is preloaded; the
            newest whole records are kept. None (default) preloads all of it.
        subject_id: the data subject of messages added without their own.
        clock: source of timestamps (default: the system clock).
        store_factory: builds the store for a MEMORY.md path (default: the
            plaintext store).
        token_counter: counts tokens of a string (default: tiktoken for
            ``tokenizer_model_name``, offline).
        governance: the consent gate (a :class:`~governed_memory.Governance`:
            consent, store, audit); its clock and store factory are the
            defaults. Not given: the policy the settings configure
            (``GOVERNED_MEMORY_POLICY``, a policy override), one gate shared
            by the process; with no policy configured, default mode, which
            behaves exactly like the reference, byte for byte. None: default
            mode, refused while a non-default policy is configured.

    Raises:
        ConfigurationError: ``governance=None`` while a non-default policy is
            configured; or, in default mode, the agent folder holds encrypted
            memory (``MEMORY.md.gmenc``), which only its policy can read.
        StorageError: MEMORY.md could not be created or read.
    """

    def __init__(
        self,
        *,
        name: str = "conversation-test",
        system_prompt: str | None = None,
        time_enabled: bool = False,
        context_length: int = 8192,
        rules: str | None = None,
        custom_rules_prompt: str | None = None,
        user: str = "User",
        memory_md_path: str | os.PathLike[str] | None = None,
        id: str | None = None,
        preload_max_chars: int | None = None,
        subject_id: str | None = None,
        clock: Clock | None = None,
        store_factory: StoreFactory | None = None,
        token_counter: TokenCounter | None = None,
        tokenizer_model_name: str | None = None,
        governance: ConsentGate[AgentStore] | Configured | None = CONFIGURED,
    ) -> None:
        if preload_max_chars is not None and preload_max_chars < 0:
            raise ConfigurationError(
                f"preload_max_chars={preload_max_chars} is negative; use None for no bound or a size >= 0"
            )
        if "\n" in str(name) or "\r" in str(name):
            # The name is written into the MEMORY.md header line.
            raise ConfigurationError(
                f"name {name!r} contains a line break, which would forge header lines in "
                "MEMORY.md; use a single-line conversation name"
            )
        self.id = id
        self.name = name
        self.system_prompt = system_prompt
        self.time_enabled = time_enabled
        self.context_length = context_length
        self.rules = rules
        self.custom_rules_prompt = custom_rules_prompt
        self.user = user
        self.subject_id = subject_id
        self.preload_max_chars = preload_max_chars
        self.tokenizer_model_name = tokenizer_model_name
        # Once per Conversation (never per add): the configured policy's shared
        # gate when none is given; a look at the environment's names in default mode.
        governance = resolve_governance(
            governance, what=f"Conversation(name={name!r}, governance=None)"
        )
        self.governance = governance
        self._clock: Clock = clock or (governance.clock if governance else SystemClock())
        self._now_iso = iso_now(self._clock)
        self._store_factory = store_factory or (
            governance.store_factory if governance else self._plaintext_store
        )
        self._token_counter = token_counter
        self._ledger: TokenLedger | None = None
        self._memory_md_path: str | os.PathLike[str] | None = None
        self._store: AgentStore | None = None
        self._utf8_store = False  # the store has append_utf8 (accepts_utf8_blocks)
        self._agent: str | None = (
            None  # the stores' agent (all of a conversation's stores share it)
        )
        self._erasure_watch: ErasureWatch | None = None
        self._preload_subjects: set[str] = set()
        self._last_erased: set[str] = set()
        # Subject isolation (the policy's memory.isolation = "subject"): the
        # agent's own memory (subject-free records), the subject the store is
        # bound to, other subjects' memories written to, the preloaded
        # subject-free records (kept, not summarised, by a compaction).
        self._isolated = governance is not None and governance.isolates_subjects
        self._agent_store: AgentStore | None = None
        self._bound: str | None = None
        self._others: dict[str, AgentStore] = {}
        self._shared_preload: Message | None = None

        self.conversation_history: list[Message] = self._static_messages(timestamps=time_enabled)
        if memory_md_path is not None:
            self.memory_md_path = memory_md_path
            assert self._store is not None
            if governance is not None:
                # Finish interrupted erasures of this agent before anything is preloaded.
                self._erasure_watch = governance.erasure_watch(self._store.agent)
                if self._erasure_watch is not None:
                    self._erasure_watch.on_open()
            if self._agent_store is not None:
                # Memory written before the policy isolated subjects holds every
                # subject's records in the agent's own memory: move them first.
                # The subject's own memory is created by its first stored record.
                isolate_subjects(self._agent_store)
                self._agent_store.ensure()
                self._preload_isolated()
            else:
                self._store.ensure()
                self._preload(self._store)

    # -- persistence ---------------------------------------------------

    def _plaintext_store(self, path: Path, header: Callable[[], str]) -> AgentStore:
        if (path.parent / _ENCRYPTED_MEMORY).exists():
            # A plaintext MEMORY.md beside the encrypted one would hold this
            # conversation's words unencrypted, and hide the agent's memory.
            raise ConfigurationError(
                f"agent folder {path.parent} holds encrypted memory ({_ENCRYPTED_MEMORY}), "
                "and this Conversation has no governance, so it would write a plaintext "
                "MEMORY.md beside it; configure the policy that encrypted it "
                "(GOVERNED_MEMORY_POLICY and GOVERNED_MEMORY_MASTER_KEY) or pass "
                "governance=governed_memory.Governance(...), or run `governed-memory "
                "decrypt-workspace` to go back to plaintext"
            )
        return PlaintextAgentStore(path, header, clock=self._clock)

    def _header(self) -> str:
        return render_header(self.name, self._clock.now().isoformat())

    @property
    def memory_md_path(self) -> str | os.PathLike[str] | None:
        """The MEMORY.md written through to; assign None to stop persisting."""
        return self._memory_md_path

    @memory_md_path.setter
    def memory_md_path(self, value: str | os.PathLike[str] | None) -> None:
        if value is not None and str(value) != "" and self.governance is not None:
            _check_governed_path(Path(value), self.governance.workspace)
        for opened in {
            id(s): s
            for s in (self._store, self._agent_store, *self._others.values())
            if s is not None
        }.values():
            opened.close()
        self._store, self._utf8_store, self._agent = None, False, None
        self._agent_store, self._others = None, {}
        self._memory_md_path = value
        if value is not None and str(value) != "":
            store = self._store_factory(Path(value), self._header)
            if self._isolated:
                # The agent's memory keeps subject-free records; the subject's
                # own memory everything of the conversation's subject.
                self._agent_store, self._bound = store, self.subject_id
                if self.subject_id is not None:
                    store = store.subject_store(self.subject_id)
            self._store, self._agent = store, store.agent
            self._utf8_store = getattr(type(self._store), "accepts_utf8_blocks", False) is True

    def _store_for(self, subject: str | None) -> AgentStore | None:
        """Where a message of ``subject`` is stored: under isolation, that subject's own memory."""
        store = self._store
        if self._agent_store is None or subject == self._bound or store is None:
            return store
        if subject is None:
            return self._agent_store
        other = self._others.get(subject)
        if other is None:
            other = self._others[subject] = self._agent_store.subject_store(subject)
        return other

    @property
    def store(self) -> AgentStore | None:
        """The store behind :attr:`memory_md_path` (None when not persisting)."""
        return self._store

    @property
    def preloaded(self) -> bool:
        """Whether the history holds memory resumed from an earlier session (the preload message)."""
        return any(is_preload(m) for m in self.conversation_history)

    def _preload(self, store: AgentStore, at: int | None = None) -> None:
        text = store.read_memory()
        if text is None or not has_records(text):
            return
        subjects: set[str] = set()  # lineage of a later summary
        if self.governance is not None or META_OPEN in text:
            # Records must be read (the preload gate, subjects in metadata
            # lines): parse once, then gate, bound and collect on the records.
            parsed = parse_memory(text)
            records = parsed.records
            if self.governance is not None:
                records = self.governance.preload_records(records, agent=store.agent)
            records = newest_records(parsed.preamble, records, self.preload_max_chars)
            if not records:
                return  # no record passes the gate, or not even the newest fits the bound
            if len(records) < len(parsed.records):
                text = parsed.preamble + "".join(record.raw for record in records)
            for record in records:
                subjects |= record_subjects(record)
        else:
            # Default mode over the reference's files: the text as read, cut
            # to the bound if one is set. Nothing is parsed.
            text = bounded_preload_text(text, self.preload_max_chars)
            if not text:
                return  # not even the newest record fits the bound
        self._preload_subjects = subjects
        if "\r" in text:  # the reference reads MEMORY.md in text mode: universal newlines
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        message = {"role": "System", "content": PRELOAD_PREFIX + text}
        self.conversation_history.insert(
            len(self.conversation_history) if at is None else at, message
        )

    def _preload_isolated(self, at: int | None = None) -> None:
        """Preload under subject isolation (:func:`._isolation.isolated_preload`)."""
        assert self._agent_store is not None and self.governance is not None
        own = None if self._store is self._agent_store else self._store
        preload = isolated_preload(
            self._agent_store, own, self._bound, self.governance, self.preload_max_chars
        )
        self._shared_preload, self._preload_subjects = preload.shared, preload.subjects
        where = len(self.conversation_history) if at is None else at
        self.conversation_history[where:where] = preload.messages

    # -- building messages ---------------------------------------------

    def _static_messages(self, *, timestamps: bool) -> list[Message]:
        messages: list[Message] = []
        role = self.user or "User"
        for msg_role, content in (
            ("System", self.system_prompt),
            (role, self.rules),
            (role, self.custom_rules_prompt),
        ):
            if content is not None:
                message: Message = {"role": msg_role, "content": content}
                if timestamps:
                    message["timestamp"] = self._clock.now().isoformat()
                messages.append(message)
        return messages

    def _message(
        self,
        role: str,
        content: Any,
        timestamp: str,
        metadata: dict[str, Any] | None,
        subject_id: str | None,
    ) -> Message:
        message: Message = {"role": role, "content": content}
        if self.time_enabled:
            message["timestamp"] = timestamp
        if metadata is not None:
            message["metadata"] = metadata
        if subject_id is not None:
            message["subject_id"] = subject_id
        return message

    def _block(
        self,
        role: str,
        content: Any,
        timestamp: str,
        subject_id: str | None,
        lineage: list[str] | None = None,
    ) -> str | None:
        text = content.strip() if content.__class__ is str else to_disk_text(content)
        if not text:
            return None
        try:
            if not text.isascii():  # ASCII needs no check (and is most content)
                text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ConfigurationError(
                f"content of the {role!r} message holds {text[exc.start : exc.end]!r}, which "
                "is not encodable as UTF-8 (a lone surrogate); decode the text it came from "
                "with errors='replace'"
            ) from exc
        if subject_id is None and not lineage:
            return render_block(role, timestamp, text)
        meta: dict[str, Any] = {"subject": subject_id} if subject_id is not None else {}
        if lineage:
            meta[LINEAGE_KEY] = lineage
        return render_block(role, timestamp, text, meta or None)

    # -- the reference's surface ---------------------------------------

    def add(
        self,
        role: str,
        content: Any,
        metadata: dict[str, Any] | None = None,
        *,
        subject_id: str | None = None,
    ) -> Message:
        """Append a message to the history and write it through to MEMORY.md.

        ``None``, empty and whitespace-only content stay in memory only (A5).
        The disk write happens first: if it fails, the history is unchanged
        and :class:`StorageError` propagates.
        """
        # The hot path of an agent loop: checks and building inlined (each
        # Python call costs about as much as a system call here).
        if role.__class__ is not str or not role or "\n" in role or "\r" in role:
            role = _check_role(role)  # raises, or accepts a str subclass
        subject = self.subject_id if subject_id is None else subject_id
        timestamp = self._now_iso()
        message: Message = {"role": role, "content": content}
        if self.time_enabled:
            message["timestamp"] = timestamp
        if metadata is not None:
            message["metadata"] = metadata
        if subject is not None:
            message["subject_id"] = subject
        store = self._store if self._agent_store is None else self._store_for(subject)
        if store is None:
            pass
        elif (
            self._utf8_store
            and content.__class__ is str
            and content.isascii()
            and subject is None
            and self.governance is None
        ):
            # Default mode, ASCII text (the common case): render_block's
            # bytes, built as bytes (as str the em dash would double the
            # size and the encoding would cost more than the write), without
            # its checks, which ASCII cannot trip (a line needs an em dash to
            # look like a block header, and ASCII always encodes). The
            # encrypted store seals it as one frame under the agent key.
            text = content.strip()
            if text:
                cast("BlockAppender", store).append_utf8(
                    b"".join(
                        (
                            b"### ",
                            role.encode(),
                            b" \xe2\x80\x94 ",  # the em dash
                            timestamp.encode(),
                            b"\n\n",
                            text.encode(),
                            b"\n\n---\n\n",
                        )
                    )
                )
        else:
            block = self._block(role, content, timestamp, subject)
            if block is not None:
                if self.governance is None:
                    store.append(block)
                else:
                    # Every store of a conversation is one agent's (its own memory
                    # or a subject's): the name is read once per store, not per add.
                    self.governance.persist(store, block, agent=self._agent, subject_id=subject)
        self.conversation_history.append(message)
        return message

    def compact(
        self, summary: str, summary_role: str = "System", *, keep_other_subjects: bool = False
    ) -> None:
        """Replace the history with the static context plus ``summary`` (B12).

        On disk: MEMORY.md is archived to ``archive/history_<ts>.md`` (durably),
        then atomically replaced by a fresh header and the summary block.

        The summary records its lineage (the subjects of the messages and the
        preloaded records it was built from) in its metadata, so erasing one
        of them removes it; see docs/subject-requests.md.

        Under subject isolation (the policy's ``memory.isolation = "subject"``)
        only the conversation's own memory is archived and replaced, and the
        summary's lineage is the conversation's subject alone: it stands for
        the turns :meth:`compaction_transcript` returns. The agent's shared
        records stay in the history as they were preloaded, and so do other
        subjects' messages when ``keep_other_subjects`` says the summary was
        built without them (the ContextCompressor does).

        Governed, rectifications completed since the conversation loaded are
        applied first (:meth:`apply_rectifications`); a verbatim copy of a
        rectified record's old text in ``summary`` is replaced by the new text.

        Raises:
            EmptySummaryError: ``summary`` is None, empty or blank; nothing changed.
            ConfigurationError: under subject isolation, the history holds
                another subject's messages and ``keep_other_subjects`` is not
                set: the summary could hold their words under this subject's
                name. Nothing changed.
            ErasedDuringCompactionError: a subject whose messages the summary
                was built from has been erased since; their messages are now
                dropped, nothing was written: summarise again. Governed, the
                erasures are read again under the agent's lock just before
                the write, so one that completed meanwhile is never written
                over.
            StorageError: archiving or replacing failed; nothing changed.
        """
        if summary is None or not str(summary).strip():
            raise EmptySummaryError(
                f"compact() got summary={summary!r}; a blank summary would wipe the history. "
                "Pass the text that should replace it"
            )
        summary_role = _check_role(summary_role)
        marks = self._erasure_marks()
        while True:
            for old, new in self._apply_rectifications():
                # Rectified after the summary was built: its verbatim copies of the old text go,
                # above the length a marked summary's copies are replaced from (a short old
                # text, "yes", would match unrelated words).
                if len(old) >= _MIN_REPLACED:
                    summary = str(summary).replace(old, new)
            if self.drop_erased():
                raise ErasedDuringCompactionError(sorted(self._last_erased))
            parts = self._compaction_parts()
            if parts.others and not keep_other_subjects:
                self._refuse_mixed(parts.others)
            shared, own, others = parts.shared, parts.own, parts.others
            if keep_other_subjects:
                others = [*others, *parts.left_out]  # kept in memory, unsummarised
            else:
                own = [*own, *parts.left_out]  # in the summary: the gate decides (lineage)
            # The preloaded records count unless their message is kept out of the summary.
            kept_out = any(is_preload(m) for m in others)
            preloaded = () if kept_out else self._preload_subjects
            lineage = history_lineage(own, preloaded)
            timestamp = self._clock.now().isoformat()
            message = self._message(summary_role, summary, timestamp, None, None)
            if lineage:
                message[LINEAGE_KEY] = lineage
            store = self._store
            if store is not None and self.governance is not None:
                # Governed: the summary is attributed to the conversation's subject.
                subject = self._bound if self._agent_store is not None else self.subject_id
                block = self._block(summary_role, summary, timestamp, subject, lineage)
                with store.lock():
                    # Checked again under the agent's lock: an erasure that
                    # wrote its tombstone since the check above may have
                    # cleaned this agent already; one that has not will
                    # strip the summary after this write (its lineage). A
                    # rectification completed since is applied on the next pass.
                    fresh = self._erasure_marks()
                    if not fresh - marks:
                        self.governance.compact(store, block, agent=store.agent, subject_id=subject)
                        break
                marks = fresh  # look again, the lock released (completing may wait for it)
                continue
            if store is not None:
                store.compact(self._block(summary_role, summary, timestamp, None, lineage))
            break
        self.conversation_history = [
            *self._static_messages(timestamps=False),
            *shared,
            message,
            *others,
        ]
        self._preload_subjects = set()
        self._reset_tokens()

    def _compaction_parts(self) -> Parts:
        """The turns after the static context, sorted by what a compaction does with them.

        See :func:`._isolation.sort_turns`; the subjects a summary must leave
        out are the gate's (``summarization.without_consent``).
        """
        turns = self.conversation_history[self._static_prefix() :]
        isolated = self._agent_store is not None
        left: set[str] = set()
        if self.governance is not None:
            subjects: set[str] = set(self._preload_subjects)
            for message in turns:
                subjects |= message_subjects(message)
            own_subject = self._bound if isolated else self.subject_id
            left = self.governance.left_out(subjects - {own_subject} if own_subject else subjects)
        return sort_turns(
            turns,
            mine=(set() if self._bound is None else {self._bound}) if isolated else None,
            shared_preload=self._shared_preload,
            preload_subjects=self._preload_subjects,
            left_out=left,
        )

    def compaction_transcript(self) -> tuple[str, list[Message]]:
        """What a summary for :meth:`compact` may be built from: (the text, the turns).

        The text is :meth:`return_history_as_string` of the static context and
        the turns; the turns are the messages after the static context. Under
        subject isolation they are the conversation's subject's own (and
        subject-free) turns only: pass ``keep_other_subjects=True`` to
        :meth:`compact` with a summary of them.

        Governed, rectifications completed since the conversation loaded are
        applied first (:meth:`apply_rectifications`).
        """
        self.apply_rectifications()
        own = self._compaction_parts().own
        static = self.conversation_history[: self._static_prefix()]
        return _history_string([*static, *own]), own

    def _static_prefix(self) -> int:
        """How many leading messages are the static context (none after :meth:`clear`)."""
        n = 0
        history = self.conversation_history
        for message in self._static_messages(timestamps=False):
            if n < len(history) and history[n].get("content") == message["content"]:
                n += 1
            else:
                break
        return n

    def _refuse_mixed(self, others: list[Message]) -> None:
        subjects = sorted(set().union(*(message_subjects(m) for m in others)) - {self._bound})
        refer = getattr(self.governance, "subject_ref", None)
        named = ", ".join(refer(s) if callable(refer) else "<subject>" for s in subjects)
        raise ConfigurationError(
            f"compact() refused: under the policy's memory.isolation = 'subject' this "
            f"conversation's summary may hold only its own subject's turns, but the history "
            f"also holds {len(others)} message(s) of other subjects ({named}); build the "
            "summary from compaction_transcript() and call compact(summary, "
            "keep_other_subjects=True), or compact each subject's own conversation"
        )

    def _erasure_marks(self) -> frozenset[str]:
        """The erasures of the workspace as names (none without an erasure watch)."""
        if self._erasure_watch is None:
            return frozenset()
        return self._erasure_watch.marks()

    def apply_rectifications(self) -> int:
        """Put into the history the corrected text of records rectified since this conversation loaded.

        Governed mode only (0 otherwise). A message is the rectified record
        when it is of the record's subject, its content is the old content
        (by the rectification's keyed hashes) and, if it carries a timestamp,
        its record id is the one rectified; the preload is re-read from the
        corrected files. :meth:`compaction_transcript`, :meth:`drop_erased`
        and :meth:`compact` call it, so neither the model nor a summary sees
        the old text again. Returns how many messages changed.
        """
        return len(self._apply_rectifications())

    def _apply_rectifications(self) -> list[tuple[str, str]]:
        """Apply new rectifications; the (old, new) content of each message changed."""
        if self._erasure_watch is None:
            return []
        fixed = self._erasure_watch.new_rectifications()
        if not fixed:
            return []
        assert self._store is not None  # a watch is opened with a store
        agent = self._store.agent
        changed: list[tuple[str, str]] = []
        preload_at: int | None = None
        kept: list[Message] = []
        for message in self.conversation_history:
            if is_preload(message):
                preload_at = len(kept) if preload_at is None else preload_at
                continue  # re-read below from the corrected files
            new = _rectified_content(agent, message, fixed)
            if new is not None:
                changed.append((message["content"].strip(), new))
                message["content"] = new
            kept.append(message)
        if preload_at is not None:
            self.conversation_history = kept
            self._reread_preload(preload_at)
        self._reset_tokens()
        return changed

    def _reread_preload(self, at: int) -> None:
        """Preload the memory again at index ``at`` of the history (it changed on disk)."""
        assert self._store is not None
        self._preload_subjects = set()
        if self._agent_store is not None:
            self._shared_preload = None
            self._preload_isolated(at=at)
        else:
            self._preload(self._store, at=at)

    def drop_erased(self) -> int:
        """Drop from the history what erasures since this conversation loaded removed from disk.

        Governed mode only (0 otherwise). Messages of erased subjects and
        summaries whose lineage names them go; the preload is re-read from
        the cleaned MEMORY.md if it held their records. Call it before
        summarising the history; :meth:`compact` calls it too. Returns how
        many messages were dropped. Rectifications completed since are
        applied first (:meth:`apply_rectifications`).
        """
        if self._erasure_watch is None:
            return 0
        self.apply_rectifications()
        erased = self._erasure_watch.new_erasures()
        if not erased:
            return 0
        kept, dropped, preload_at = filter_history(
            self.conversation_history,
            erased,
            static_count=len(self._static_messages(timestamps=False)),
            preload_subjects=self._preload_subjects,
        )
        if dropped:
            self.conversation_history = kept
            self._last_erased = set(erased.subjects) or {"<agent>"}
            if preload_at is not None and self._store is not None:
                self._reread_preload(preload_at)
            self._reset_tokens()
        return dropped

    def return_history_as_string(self) -> str:
        """Each message as ``[{timestamp}] {role}: {content}`` (or without the stamp), joined by blank lines."""
        return _history_string(self.conversation_history)

    def get_str(self) -> str:
        """Alias of :meth:`return_history_as_string`."""
        return self.return_history_as_string()

    def to_dict(self) -> list[Message]:
        """The history itself (the reference returns the list, not a copy)."""
        return self.conversation_history

    def to_list(self) -> list[Message]:
        """The history itself."""
        return self.conversation_history

    def to_json(self, indent: int | None = None) -> str:
        """The history as JSON; non-JSON content is rendered with ``str``."""
        return json.dumps(self.conversation_history, indent=indent, default=str, ensure_ascii=False)

    def export_json(self, path: str | os.PathLike[str]) -> None:
        """Write the history as JSON to ``path`` atomically, mode 0600."""
        from .._base import atomic_write

        try:
            atomic_write(Path(path), (self.to_json(indent=2) + "\n").encode("utf-8"))
        except OSError as exc:
            raise StorageError(f"cannot export the history to {path}: {exc}") from exc

    def count_messages_by_role(self) -> dict[str, int]:
        """Message counts per role, starting from the reference's four OpenAI roles at 0."""
        counts = {"system": 0, "user": 0, "assistant": 0, "function": 0}
        for message in self.conversation_history:
            counts[message["role"]] = counts.get(message["role"], 0) + 1
        return counts

    def query(self, index: int) -> Message | None:
        """The message at ``index``, or None."""
        i = int(index)
        return self.conversation_history[i] if 0 <= i < len(self.conversation_history) else None

    def search(self, keyword: str) -> list[Message]:
        """Messages whose content contains ``keyword``."""
        return [m for m in self.conversation_history if keyword in str(m["content"])]

    def get_last_message_as_string(self) -> str:
        """``"{role}: {content}"`` of the last message, or ``""``."""
        if not self.conversation_history:
            return ""
        last = self.conversation_history[-1]
        return f"{last['role']}: {last['content']}"

    def get_final_message_content(self) -> Any:
        """The content of the last message, or ``""``."""
        return self.conversation_history[-1]["content"] if self.conversation_history else ""

    def delete(self, index: int) -> None:
        """Remove message ``index`` from the in-memory history (not from disk)."""
        i = int(index)
        self.conversation_history.pop(i)
        if self._ledger is not None:
            self._ledger.removed(i if i >= 0 else len(self.conversation_history) + 1 + i)

    def update(self, index: int, role: str, content: Any) -> None:
        """Change message ``index`` in memory (not on disk).

        Raises:
            IndexError: no message at ``index`` (the reference only logs).
        """
        i = int(index)
        if not 0 <= i < len(self.conversation_history):
            raise IndexError(
                f"update index {i} is out of range for {len(self.conversation_history)} messages"
            )
        message = self.conversation_history[i]
        message["role"] = _check_role(role)
        message["content"] = content
        if self._ledger is not None:
            self._ledger.changed(i, message)

    def clear(self) -> None:
        """Empty the in-memory history (MEMORY.md is kept, as in the reference)."""
        self.conversation_history = []
        self._reset_tokens()

    # -- token accounting ----------------------------------------------

    def _counter(self) -> TokenCounter:
        if self._token_counter is None:
            from .._format import counter_for

            self._token_counter = counter_for(self.tokenizer_model_name)
        return self._token_counter

    @property
    def token_count(self) -> int:
        """Tokens of the history, kept as a running total (O(new messages) per call)."""
        if self._ledger is None:
            self._ledger = TokenLedger(self._counter())
        return self._ledger.total(self.conversation_history)

    def recount_tokens(self) -> int:
        """Count from scratch; call after editing ``conversation_history`` directly."""
        self._reset_tokens()
        return self.token_count

    def full_token_count(self) -> int:
        """The total computed without the running sum (for checks)."""
        return full_count(self.conversation_history, self._counter())

    def _reset_tokens(self) -> None:
        if self._ledger is not None:
            self._ledger.reset()

    def __repr__(self) -> str:
        return (
            f"Conversation(name={self.name!r}, messages={len(self.conversation_history)}, "
            f"memory_md_path={self._memory_md_path!r})"
        )


def _rectified_content(agent: str, message: Message, fixed: tuple[Rectified, ...]) -> str | None:
    """The corrected content of ``message`` if it is a rectified record of ``agent``, else None."""
    content, subject = message.get("content"), message.get("subject_id")
    if not isinstance(content, str) or subject is None:
        return None
    timestamp = message.get("timestamp")
    for item in fixed:
        if item.subject != subject or not item.had(content):
            continue
        if timestamp is not None:
            record = Record(message["role"], timestamp, content, {"subject": subject})
            if record_id(agent, record) != item.record_id:
                continue
        return item.content
    return None


def _check_governed_path(path: Path, workspace: Path) -> None:
    """Under a Governance, a MEMORY.md only where its export, erasure and retention look.

    They find an agent's memory at ``<workspace>/agents/<name>/MEMORY.md`` of the
    Governance's workspace; memory written anywhere else would be kept outside them.

    Raises:
        ConfigurationError: ``path`` is not that file of any agent.
    """
    given = Path(os.path.abspath(path))  # '..' resolved first: it cannot name the agent folder
    agents = Path(os.path.abspath(workspace)) / AGENTS_DIR
    if given != agents / given.parent.name / MEMORY_FILE:
        raise ConfigurationError(
            f"memory_md_path {str(path)!r} is outside the governed workspace {str(workspace)!r}: "
            "export, erasure and retention find an agent's memory only at "
            f"{agents}/<agent_name>/MEMORY.md; pass "
            "governed_memory.memory_md_path(agent_name), which reads the same workspace, or "
            "govern the workspace that holds this file (WORKSPACE_DIR or Governance(workspace=...))"
        )
