"""The consent gate's vocabulary, and the sink that hears of its decisions.

The vocabulary (:class:`Operation`, :class:`Outcome`, :class:`Decision`,
:data:`SummarizerDecision`) is defined with the gate protocol in
``governed_memory._protocols._gate`` and re-exported here, where the policy
layer and older imports find it. :class:`AuditSink` is the extension point
the audit layer implements; the default records nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._protocols import (
    Allowed,
    Decision,
    Operation,
    Outcome,
    Skip,
    SummarizerDecision,
    UseLocal,
    is_local_model,
)

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
