"""The consent gate's vocabulary, and the sink that hears of its decisions.

The vocabulary (:class:`Operation`, :class:`Outcome`, :class:`Decision`,
:data:`SummarizerDecision`) is defined with the gate protocol in
``governed_memory._protocols._gate``, :class:`AuditSink` (the extension
point the audit layer implements) in ``governed_memory._protocols._extension``;
both are re-exported here, where the policy layer and older imports find
them. The default sink, :class:`NullAuditSink`, records nothing.
"""

from __future__ import annotations

from .._protocols import (
    Allowed,
    AuditSink,
    Decision,
    NullAuditSink,
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
