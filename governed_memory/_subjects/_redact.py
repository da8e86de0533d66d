"""The pure part of erasure: a memory file's text without one subject's data.

``strip_subject`` drops every record of the subject and replaces every
summary whose lineage names the subject by a marker record, so the agent
knows that earlier context is missing::

    ### System — <the summary's timestamp>
    <!-- gm {"erased_summary":"<erasure id>"} -->

    [Summary removed for erasure on 2026-11-30: earlier context is missing]

Everything else (the header, other records, their exact bytes) is kept.

Holds follow lineage: a summary whose lineage also names a subject in
``held`` (another subject under a legal hold) is derived from held data too,
so it is kept as it is and counted in ``held_summaries`` with the hold ids.
The subject's own records are removed regardless (they are not the held
subject's data).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

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
    """The new text of one file and what was taken out of it (sizes, never content).

    ``held_summaries`` were left in place: ``holds`` (ids) cover another
    subject of their lineage. ``changed`` says whether the file is rewritten.
    """

    text: str
    records: int
    summaries: int
    bytes_removed: int
    held_summaries: int = 0
    holds: tuple[str, ...] = ()
    others: int = 0
    """Records left that are not erasure markers (0: nothing but markers would remain)."""
    record_bytes: int = 0
    """UTF-8 bytes of every record of the file before the edit."""

    @property
    def changed(self) -> bool:
        return bool(self.records or self.summaries)


def _prefix(text: str, records: list[Record]) -> str:
    # Records run contiguously to the end of the text; whatever precedes the
    # first one (header, stray lines) is kept byte for byte.
    return text[: len(text) - sum(len(r.raw) for r in records)]


@lru_cache(maxsize=256)
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


def strip_subject(
    text: str,
    subject: str,
    *,
    erasure_id: str,
    day: _dt.date,
    held: Mapping[str, tuple[str, ...]] | None = None,
) -> FileEdit | None:
    """``text`` without ``subject``'s records and summaries, or None when it has none.

    ``held`` maps the other subjects under a legal hold to their hold ids; a
    summary whose lineage names one of them is kept (see the module docstring).
    """
    if not mentions(text, subject):
        return None
    parsed = parse_memory(text)
    kept: list[str] = []
    records = summaries = removed_bytes = held_summaries = 0
    holds: set[str] = set()
    others = 0
    for record in parsed.records:
        if record.subject_id == subject and not is_summary(record):
            records += 1
            removed_bytes += len(record.raw.encode("utf-8"))
        elif (subject in record_lineage(record) or record.subject_id == subject) and (
            covering := _holds_on(record, subject, held)
        ):
            held_summaries += 1  # derived from held data as well: the hold keeps it
            holds.update(covering)
            kept.append(record.raw)
            others += 1
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
            others += ERASED_MARKER_KEY not in record.meta
    if not records and not summaries and not held_summaries:
        return None
    return FileEdit(
        text=_prefix(text, parsed.records) + "".join(kept),
        records=records,
        summaries=summaries,
        bytes_removed=removed_bytes,
        held_summaries=held_summaries,
        holds=tuple(sorted(holds)),
        others=others,
        record_bytes=sum(len(r.raw.encode("utf-8")) for r in parsed.records),
    )


def _holds_on(
    record: Record, subject: str, held: Mapping[str, tuple[str, ...]] | None
) -> tuple[str, ...]:
    """The holds on another subject of ``record``'s lineage (empty: not held)."""
    if not held:
        return ()
    others = set(record_lineage(record))
    if record.subject_id is not None:
        others.add(record.subject_id)
    others.discard(subject)
    return tuple(h for other in sorted(others) for h in held.get(other, ()))


def count_records(text: str | None) -> tuple[int, int, int]:
    """(records, summaries, bytes of both) of a file's text; for whole-agent erasure."""
    if text is None:
        return 0, 0, 0
    records = parse_memory(text).records
    summaries = sum(1 for r in records if is_summary(r))
    return len(records) - summaries, summaries, sum(len(r.raw.encode("utf-8")) for r in records)
