"""The consent gate a governed Conversation, Agent and ContextCompressor see, and its vocabulary.

The memory layer names no policy, registry or audit trail: it is given a
:class:`ConsentGate` (``governed_memory.Governance`` is one) and asks it, for
each operation that touches disk, whether it may (:class:`Decision`), and,
before a summarizer sees a transcript, which model may (:data:`SummarizerDecision`).
Erasures of the agent's data reach a live Conversation through the
:class:`ErasureWatch` the gate hands out. A Conversation given no gate asks
:func:`resolve_governance` for the configured policy's (the last section).

==============  ===========  ==================================================
operation       purpose      where
==============  ===========  ==================================================
``persist``     persist      ``Conversation.add`` writing a block
``preload``     persist      ``Conversation.__init__`` reading MEMORY.md back
``compact``     persist      ``Conversation.compact`` writing the summary
``archive``     persist      ``Conversation.compact`` archiving MEMORY.md
``summarize``   summarize    ``ContextCompressor`` choosing its summarizer
==============  ===========  ==================================================
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final, Literal, Protocol, TypeVar

from ._extension import Clock
from ._provider import default_governance, installed_provider
from ._storage import AgentStore

__all__ = [
    "CONFIGURED",
    "LOCAL_PREFIX",
    "LOCAL_SUMMARIZER",
    "Allowed",
    "Configured",
    "ConsentGate",
    "Decision",
    "Erased",
    "ErasureWatch",
    "GovernanceProvider",
    "Operation",
    "Outcome",
    "Skip",
    "SubjectRecord",
    "SummarizerDecision",
    "UseLocal",
    "is_local_model",
    "resolve_governance",
]

LOCAL_PREFIX = "local/"
"""Summarizer models named ``local/...`` run in-process: the transcript never leaves it."""
LOCAL_SUMMARIZER = "local/extractive"
"""The in-process summarizer the gate falls back to (:class:`UseLocal`)."""


class Operation(StrEnum):
    """The governed operations; each maps to a consent purpose."""

    PERSIST = "persist"
    PRELOAD = "preload"
    COMPACT = "compact"
    ARCHIVE = "archive"
    SUMMARIZE = "summarize"

    @property
    def purpose(self) -> str:
        return "summarize" if self is Operation.SUMMARIZE else "persist"


class Outcome(StrEnum):
    """What the gate decided."""

    PERSIST = "persist"
    """Go ahead (write, read back or call the summarizer)."""
    MEMORY_ONLY = "memory_only"
    """Keep working in memory; nothing reaches (or is read back from) disk."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision of the consent gate, with the policy it was made under."""

    operation: str
    outcome: Outcome
    agent: str | None
    subject_id: str | None
    purpose: str
    policy_id: str
    policy_version: str
    reason: str
    at: _dt.datetime

    @property
    def persist(self) -> bool:
        """Whether the operation may touch disk."""
        return self.outcome is Outcome.PERSIST

    def attributes(self) -> dict[str, str]:
        """The decision as audit attributes."""
        return {
            "purpose": self.purpose,
            "decision": self.outcome.value,
            "policy_id": self.policy_id,
            "policy_version": self.policy_version,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Allowed:
    """Call this summarizer model."""

    model: str
    reason: str = "allowed by the policy"


@dataclass(frozen=True)
class UseLocal:
    """Do not call the requested model; summarize with the local summarizer."""

    model: str = LOCAL_SUMMARIZER
    reason: str = ""


@dataclass(frozen=True)
class Skip:
    """Do not summarize at all (compression is skipped)."""

    reason: str = ""


SummarizerDecision = Allowed | UseLocal | Skip


def is_local_model(model: str) -> bool:
    """Whether a summarizer model runs in-process (``local/...``)."""
    return model.startswith(LOCAL_PREFIX)


@dataclass(frozen=True)
class Erased:
    """Erasures that appeared since a Conversation loaded: subjects, or the whole agent."""

    subjects: frozenset[str] = frozenset()
    whole_agent: bool = False

    def __bool__(self) -> bool:
        return bool(self.subjects) or self.whole_agent


@dataclass(frozen=True)
class Rectified:
    """A rectification of one of the agent's records, completed since a Conversation loaded.

    ``old_hashes`` are the keyed hashes (HMAC-SHA256 under ``salt``) of the
    content the record had; ``content`` is what it holds now, read from disk.
    """

    record_id: str
    subject: str
    salt: str
    old_hashes: tuple[str, ...]
    content: str

    def had(self, content: str) -> bool:
        """Whether ``content`` (stripped, as stored) is the record's old content."""
        key = bytes.fromhex(self.salt)
        digest = hmac.new(key, content.strip().encode("utf-8"), hashlib.sha256).hexdigest()
        return digest in self.old_hashes


class ErasureWatch(Protocol):
    """Tells one agent's live Conversation about erasures and rectifications of that agent's data."""

    def on_open(self) -> None:
        """Complete pending erasures covering the agent (called before the preload)."""
        ...

    def new_erasures(self) -> Erased:
        """Erasures covering the agent that appeared since the last call (completed first)."""
        ...

    def new_rectifications(self) -> tuple[Rectified, ...]:
        """Rectifications of the agent's records completed since the last call (or the open)."""
        ...

    def marks(self) -> frozenset[str]:
        """The ids of every erasure and rectification of the workspace; completes nothing.

        What ``Conversation.compact`` reads again under the agent's lock: a
        new id only means "look again" once the lock is released
        (:meth:`new_erasures` says whether it covers the agent). It must not
        wait on the erasure it finds, which may be waiting for that lock.
        """
        ...


class SubjectRecord(Protocol):
    """A stored record as the preload gate sees it: whose data it is."""

    @property
    def subject_id(self) -> str | None: ...


StoreT = TypeVar("StoreT")
RecordT = TypeVar("RecordT", bound=SubjectRecord)


class ConsentGate(Protocol[StoreT]):
    """What a governed Conversation, Agent and ContextCompressor consult.

    ``StoreT`` is the agent store the gate builds and writes through. Every
    method that touches disk decides first and audits after; a Conversation
    without a gate (default mode) runs none of this.
    """

    @property
    def clock(self) -> Clock:
        """The time of decisions; a governed Conversation stamps its messages with it."""
        ...

    @property
    def workspace(self) -> Path:
        """The governed workspace; an Agent keeps its MEMORY.md there."""
        ...

    def left_out(self, subjects: Iterable[str]) -> set[str]:
        """Which of ``subjects`` a summary must leave out (no ``persist`` consent, and the policy says so).

        Their turns stay in the history unsummarised; the summary of the rest
        may reach disk (``[summarization] without_consent = "leave_out"``).
        """
        ...

    @property
    def isolates_subjects(self) -> bool:
        """Whether each data subject has a memory of their own (``[memory] isolation = "subject"``).

        Then a Conversation for subject S reads and writes S's memory
        (``AgentStore.subject_store``) and the agent's subject-free records
        only, and compacts S's records only.
        """
        ...

    def store_factory(self, memory_path: Path, header: Callable[[], str]) -> StoreT:
        """Build the store for one agent's MEMORY.md (encrypted when the policy says so)."""
        ...

    def persist(
        self, store: StoreT, block: str, *, agent: str | None, subject_id: str | None
    ) -> bool:
        """Append ``block`` if the gate allows; return whether it reached disk."""
        ...

    def preload_records(self, records: list[RecordT], *, agent: str | None) -> list[RecordT]:
        """The records of a MEMORY.md whose subject may be read back."""
        ...

    def compact(
        self,
        store: StoreT,
        first_block: str | None,
        *,
        agent: str | None,
        subject_id: str | None,
    ) -> object:
        """Archive and replace the memory if the gate allows (else leave the disk as it is)."""
        ...

    def summarizer_decision(
        self,
        model: str,
        subjects: Iterable[str | None] = (),
        *,
        agent: str | None = None,
    ) -> SummarizerDecision:
        """Whether the summarizer ``model`` may see a transcript of ``subjects``."""
        ...

    def erasure_watch(self, agent: str) -> ErasureWatch | None:
        """The watch a live Conversation of ``agent`` keeps on erasures (None: none to keep)."""
        ...


# -- the configured policy's gate --------------------------------------------------
#
# ``Conversation``, ``Agent`` and ``ContextCompressor`` live in the memory
# layer, below the composition root that builds a ``Governance`` from
# settings, and may not import it (not even inside a function). So the root
# package (``governed_memory/__init__.py``, above every layer, imported before
# any of its sub-packages) installs a :class:`GovernanceProvider` here, and the
# memory layer asks it through :func:`resolve_governance`:
#
# * ``governance`` not given (:data:`CONFIGURED`, the default): the gate of the
#   configured policy, shared by every caller of the process, or None when no
#   policy is configured (the reference's default mode, byte for byte);
# * ``governance=None`` given: refused when a policy other than the built-in
#   default is configured (a caller cannot opt out of the admin's policy);
#   otherwise default mode;
# * a gate given: that gate.
#
# Whether a policy is configured is a look at the names of the environment
# (no pydantic, no file read), once per Conversation, never per ``add``.


class _Configured(enum.Enum):
    CONFIGURED = "configured"

    def __repr__(self) -> str:
        return "CONFIGURED"


CONFIGURED: Final = _Configured.CONFIGURED
"""The default of ``governance=``: the configured policy's gate, or default mode when none is configured."""

Configured = Literal[_Configured.CONFIGURED]
"""The type of :data:`CONFIGURED`, for signatures."""


class GovernanceProvider(Protocol):
    """Builds and shares the gate of the policy the settings configure (the root package installs one)."""

    def configured(self) -> bool:
        """Whether the settings name a policy; cheap (names of the environment only)."""
        ...

    def governance(self) -> ConsentGate[AgentStore]:
        """The configured policy's gate: one per workspace and policy, shared, thread-safe.

        Called only when :meth:`configured` is True.
        """
        ...

    def refuse_ungoverned(self, what: str) -> None:
        """Raise ``ConfigurationError`` naming the policy and the fix if it is not the default one.

        Called only when :meth:`configured` is True, for ``what`` (e.g.
        ``"Conversation(name='x', governance=None)"``) asking to run ungoverned.
        """
        ...


def resolve_governance(
    given: ConsentGate[AgentStore] | Configured | None, *, what: str
) -> ConsentGate[AgentStore] | None:
    """The gate a Conversation, Agent or ContextCompressor runs under (see the module docstring).

    Raises:
        ConfigurationError: ``given`` is None while a non-default policy is
            configured; the message names the policy and the fix.
    """
    if given is CONFIGURED:
        return default_governance()
    if given is None:
        provider = installed_provider()
        if provider is not None and provider.configured():
            provider.refuse_ungoverned(what)
        return None
    return given
