"""Policies: the model, the settings (the one place that reads the environment), decisions.

For the CLI (documented internal names): ``OVERRIDABLE_SECTIONS``, the
sections ``policy --set SECTION.KEY`` may override, and ``shipped_policies``,
the policies ``policy list`` shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._decisions import (
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
    from ._model import (
        DEFAULT_POLICY,
        LOCAL_SUMMARIZER,
        MissingConsent,
        Policy,
        PolicyError,
        RequestsPolicy,
        ResolvedPolicy,
        RetentionPolicy,
        SchedulePolicy,
        SummarizationFallback,
        WithdrawalAction,
        load_policy,
        resolve_policy,
        shipped_policies,
    )
    from ._retention_rules import AGE_RULES, HOLDABLE, Rule, age_limit
    from ._settings import OVERRIDABLE_SECTIONS, Settings

_LAZY: dict[str, str] = {
    "Allowed": "._decisions",
    "AuditSink": "._decisions",
    "Decision": "._decisions",
    "NullAuditSink": "._decisions",
    "Operation": "._decisions",
    "Outcome": "._decisions",
    "Skip": "._decisions",
    "SummarizerDecision": "._decisions",
    "UseLocal": "._decisions",
    "is_local_model": "._decisions",
    "DEFAULT_POLICY": "._model",
    "LOCAL_SUMMARIZER": "._model",
    "MissingConsent": "._model",
    "Policy": "._model",
    "PolicyError": "._model",
    "ResolvedPolicy": "._model",
    "RetentionPolicy": "._model",
    "RequestsPolicy": "._model",
    "SchedulePolicy": "._model",
    "SummarizationFallback": "._model",
    "WithdrawalAction": "._model",
    "load_policy": "._model",
    "resolve_policy": "._model",
    "shipped_policies": "._model",
    "AGE_RULES": "._retention_rules",
    "HOLDABLE": "._retention_rules",
    "Rule": "._retention_rules",
    "age_limit": "._retention_rules",
    "OVERRIDABLE_SECTIONS": "._settings",
    "Settings": "._settings",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "AGE_RULES",
    "DEFAULT_POLICY",
    "HOLDABLE",
    "LOCAL_SUMMARIZER",
    "OVERRIDABLE_SECTIONS",
    "Allowed",
    "AuditSink",
    "Decision",
    "MissingConsent",
    "NullAuditSink",
    "Operation",
    "Outcome",
    "Policy",
    "PolicyError",
    "RequestsPolicy",
    "ResolvedPolicy",
    "RetentionPolicy",
    "Rule",
    "SchedulePolicy",
    "Settings",
    "Skip",
    "SummarizationFallback",
    "SummarizerDecision",
    "UseLocal",
    "WithdrawalAction",
    "age_limit",
    "is_local_model",
    "load_policy",
    "resolve_policy",
    "shipped_policies",
]
