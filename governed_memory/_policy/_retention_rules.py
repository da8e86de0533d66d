"""Which retention rule governs each kind of artefact, and the age limit it sets (pure).

The planner (``_retention._plan``) decides what to delete now; a subject
access export (``_subjects``) says, for each artefact it cites, which rule
governs it and from when that rule deletes it. Both read the rules here, so
the two never disagree on which key applies or how the audit floor combines
with its maximum.
"""

from __future__ import annotations

import datetime as _dt
from enum import StrEnum

from .._base import ArtefactKind
from ._model import RetentionPolicy

__all__ = ["AGE_RULES", "HOLDABLE", "Rule", "age_limit"]


class Rule(StrEnum):
    """The retention rule that requires a deletion (named as in the policy)."""

    ARCHIVES_MAX_AGE = "archives_max_age"
    ARCHIVES_MAX_COUNT = "archives_max_count"
    IDLE_MEMORY_MAX_AGE = "idle_memory_max_age"
    EXPORTS_MAX_AGE = "exports_max_age"
    AUDIT_MAX_AGE = "audit_max_age"
    CONSENT_RECORDS_MAX_AGE = "consent_records_max_age"
    TOMBSTONES_MAX_AGE = "tombstones_max_age"


AGE_RULES: dict[ArtefactKind, Rule] = {
    ArtefactKind.MEMORY: Rule.IDLE_MEMORY_MAX_AGE,
    ArtefactKind.ARCHIVE: Rule.ARCHIVES_MAX_AGE,
    ArtefactKind.EXPORT: Rule.EXPORTS_MAX_AGE,
    ArtefactKind.AUDIT: Rule.AUDIT_MAX_AGE,
    ArtefactKind.CONSENT: Rule.CONSENT_RECORDS_MAX_AGE,
    ArtefactKind.TOMBSTONE: Rule.TOMBSTONES_MAX_AGE,
}
"""The age rule of each kind (archives also have ``archives_max_count``)."""

HOLDABLE = frozenset(
    {ArtefactKind.MEMORY, ArtefactKind.ARCHIVE, ArtefactKind.EXPORT, ArtefactKind.CONSENT}
)
"""What a legal hold keeps: artefacts with message content or consent; audit
segments and tombstones carry no content and are not held."""


def age_limit(retention: RetentionPolicy, rule: Rule) -> _dt.timedelta | None:
    """The maximum age ``rule`` sets (None: ``forever``); audit is never under its floor.

    An artefact whose age exceeds the limit (strictly) is deleted by the next purge.
    """
    limit: _dt.timedelta | None = getattr(retention, rule.value)
    if limit is not None and rule is Rule.AUDIT_MAX_AGE:
        limit = max(limit, retention.audit_min_age)
    return limit
