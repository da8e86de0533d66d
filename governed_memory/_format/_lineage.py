"""Lineage: which data subjects' records went into a summary.

A compaction replaces a transcript by a summary the LLM wrote from it, so the
summary is derived from every subject whose messages it saw. In governed mode
the summary block's metadata line names them::

    ### System — 2026-11-30T10:00:00
    <!-- gm {"lineage":["alice","bob"]} -->

    [Compressed Memory Summary] ...

The subjects are those of the in-memory messages being summarised, those of
the records in the preloaded MEMORY.md, and, for a summary of a summary, the
lineage of the earlier summary (inherited). Erasure of a subject removes every
summary whose lineage names it (see docs/subject-requests.md).

A summary without lineage (written by the reference, or in default mode with
no subject ids) names nobody and is never matched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._records import META_OPEN, Record, parse_memory

__all__ = [
    "ERASED_MARKER_KEY",
    "LINEAGE_KEY",
    "SUMMARY_PREFIX",
    "history_lineage",
    "is_summary",
    "message_subjects",
    "record_lineage",
    "record_subjects",
    "subjects_in_text",
    "summary_meta",
]

LINEAGE_KEY = "lineage"
ERASED_MARKER_KEY = "erased_summary"
SUMMARY_PREFIX = "[Compressed Memory Summary]"


def record_lineage(record: Record) -> tuple[str, ...]:
    """The subjects a summary record was derived from (empty for other records)."""
    value = record.meta.get(LINEAGE_KEY)
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def is_summary(record: Record) -> bool:
    """Whether ``record`` is a compaction summary (it has lineage or the summary prefix)."""
    return LINEAGE_KEY in record.meta or record.content.startswith(SUMMARY_PREFIX)


def record_subjects(record: Record) -> set[str]:
    """Every subject whose data ``record`` holds: its own subject and its lineage."""
    found = set(record_lineage(record))
    if record.subject_id is not None:
        found.add(record.subject_id)
    return found


def subjects_in_text(text: str) -> set[str]:
    """Every subject named by a record (or a summary's lineage) of a memory file's text."""
    found: set[str] = set()
    if META_OPEN not in text:  # subjects and lineage live in metadata lines only
        return found
    for record in parse_memory(text).records:
        found |= record_subjects(record)
    return found


def message_subjects(message: Mapping[str, Any]) -> set[str]:
    """Subjects of an in-memory message: its ``subject_id`` and any ``lineage``."""
    found: set[str] = set()
    subject = message.get("subject_id")
    if isinstance(subject, str):
        found.add(subject)
    lineage = message.get(LINEAGE_KEY)
    if isinstance(lineage, list | tuple):
        found.update(v for v in lineage if isinstance(v, str))
    return found


def history_lineage(messages: Iterable[Mapping[str, Any]], preloaded: Iterable[str]) -> list[str]:
    """The sorted lineage of a summary of ``messages`` plus the preloaded subjects."""
    found = set(preloaded)
    for message in messages:
        found |= message_subjects(message)
    return sorted(found)


def summary_meta(lineage: Iterable[str]) -> dict[str, Any] | None:
    """The metadata of a summary block: ``{"lineage": [...]}``, or None when nobody."""
    subjects = sorted(set(lineage))
    return {LINEAGE_KEY: subjects} if subjects else None
