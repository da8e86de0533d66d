"""The pure part of erasure: a memory file's text without one subject's data.

``strip_subject`` drops every record of the subject and replaces every
summary whose lineage names the subject by a marker record, so the agent
knows that earlier context is missing::

    ### System — <the summary's timestamp>
    <!-- gm {"erased_summary":"<erasure id>"} -->

    [Summary removed for erasure on 2026-11-30: earlier context is missing]

Everything else (the header, other records, their exact bytes) is kept.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass

from .._format import (
    ERASED_MARKER_KEY,
    Record,
    is_summary,
    parse_memory,
    record_lineage,
    render_block,
)

__all__ = [
    "FileEdit",
    "count_records",
    "marker_text",
    "mentions",
    "strip_subject",
    "subject_needle",
]


def marker_text(day: _dt.date) -> str:
    """The content of the record left where a summary was removed."""
    return f"[Summary removed for erasure on {day.isoformat()}: earlier context is missing]"


@dataclass(frozen=True)
class FileEdit:
    """The new text of one file and what was taken out of it (sizes, never content)."""

    text: str
    records: int
    summaries: int
    bytes_removed: int


def _prefix(text: str, records: list[Record]) -> str:
    # Records run contiguously to the end of the text; whatever precedes the
    # first one (header, stray lines) is kept byte for byte.
    return text[: len(text) - sum(len(r.raw) for r in records)]


def subject_needle(subject: str) -> str:
    """How ``subject`` appears in every metadata line naming it (as a JSON string).

    Metadata lines are written by :func:`~governed_memory._format._records.render_block`
    only, with this exact encoding; a file without this text names the
    subject nowhere, and need not be parsed (most files, in a large erasure).
    """
    return json.dumps(subject, ensure_ascii=True).replace(">", "\\u003e")


def mentions(text: str, subject: str) -> bool:
    """Whether ``text`` may hold a record or summary of ``subject`` (no false negatives)."""
    return subject_needle(subject) in text


def strip_subject(text: str, subject: str, *, erasure_id: str, day: _dt.date) -> FileEdit | None:
    """``text`` without ``subject``'s records and summaries, or None when it has none."""
    if not mentions(text, subject):
        return None
    parsed = parse_memory(text)
    kept: list[str] = []
    records = summaries = removed_bytes = 0
    for record in parsed.records:
        if record.subject_id == subject and not is_summary(record):
            records += 1
            removed_bytes += len(record.raw.encode("utf-8"))
        elif subject in record_lineage(record) or record.subject_id == subject:
            # A summary built from (or attributed to) the subject.
            summaries += 1
            removed_bytes += len(record.raw.encode("utf-8"))
            kept.append(
                render_block(
                    "System", record.timestamp, marker_text(day), {ERASED_MARKER_KEY: erasure_id}
                )
            )
        else:
            kept.append(record.raw)
    if not records and not summaries:
        return None
    return FileEdit(
        text=_prefix(text, parsed.records) + "".join(kept),
        records=records,
        summaries=summaries,
        bytes_removed=removed_bytes,
    )


def count_records(text: str | None) -> tuple[int, int, int]:
    """(records, summaries, bytes of both) of a file's text; for whole-agent erasure."""
    if text is None:
        return 0, 0, 0
    records = parse_memory(text).records
    summaries = sum(1 for r in records if is_summary(r))
    return len(records) - summaries, summaries, sum(len(r.raw.encode("utf-8")) for r in records)
