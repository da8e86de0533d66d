"""The consent gate a governed Conversation, Agent and ContextCompressor see, and its vocabulary.

The memory layer names no policy, registry or audit trail: it is given a
:class:`ConsentGate` (``governed_memory.Governance`` is one) and asks it, for
each operation that touches disk, whether it may (:class:`Decision`), and,
before a summarizer sees a transcript, which model may (:data:`SummarizerDecision`).
Erasures of the agent's data reach a live Conversation through the
:class:`ErasureWatch` the gate hands out.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TypeVar

from ._extension import Clock

__all__ = [
    "LOCAL_PREFIX",
    "LOCAL_SUMMARIZER",
    "Allowed",
    "ConsentGate",
    "Decision",
    "Erased",
    "ErasureWatch",
    "Operation",
    "Outcome",
    "Skip",
    "SubjectRecord",
    "SummarizerDecision",
    "UseLocal",
    "is_local_model",
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


class ErasureWatch(Protocol):
    """Tells one agent's live Conversation about erasures of that agent's data."""

    def on_open(self) -> None:
        """Complete pending erasures covering the agent (called before the preload)."""
        ...

    def new_erasures(self) -> Erased:
        """Erasures covering the agent that appeared since the last call (completed first)."""
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
