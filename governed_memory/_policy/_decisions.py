"""The consent gate's vocabulary: operations, decisions, and the sink that hears of them.

:class:`Decision` is what :meth:`Governance.check` returns for persist,
preload, compact and archive; :data:`SummarizerDecision` what
:meth:`Governance.summarizer_decision` returns. :class:`AuditSink` is the
extension point the audit layer implements; the default records nothing.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from ._model import LOCAL_PREFIX, LOCAL_SUMMARIZER

__all__ = [
    "Allowed",
    "AuditSink",
    "Decision",
    "NullAuditSink",
    "Operation",
    "Outcome",
    "Skip",
    "SummarizerDecision",
    "UseLocal",
    "is_local_model",
]


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


class AuditSink(Protocol):
    """Receives one call per governed operation, after it finished.

    ``operation`` is one of ``persist``, ``preload``, ``compact``, ``archive``,
    ``summarize``, ``consent.grant``, ``consent.withdraw``, ``policy.load``.
    ``outcome`` is ``ok`` (done), ``memory_only`` (kept off disk),
    ``denied`` (ConsentRequiredError raised), ``error`` (the operation raised;
    ``error`` attribute holds the exception type), or for ``summarize``
    ``allowed`` / ``use_local`` / ``skip``. ``attrs`` carry at least
    ``policy_id`` and ``policy_version``; never message content.
    Implementations must not raise for ordinary failures of their own
    (log instead): auditing must not break the memory path unless the policy
    says so.
    """

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        """Record one finished operation."""
        ...


class NullAuditSink:
    """The default sink: records nothing (default mode writes no audit files)."""

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        return None


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
