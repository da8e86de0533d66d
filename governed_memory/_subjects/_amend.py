"""The pure part of rectification: one memory file's text with one record corrected.

:func:`amend_file` replaces the content of every copy of the record (found
by its id, :func:`~governed_memory._format.record_ids`) and deals with every
summary that may have been built from it: a summary of the same agent whose
lineage (or attribution) names the record's subject and which was written
at or after the record's time. Each such summary is

* **regenerated** when ``regenerate`` gives a new text for it (the caller
  asks the summarizer the policy allows, from the summary's source), or
* **marked** otherwise: its metadata lists the rectification
  (``"rectified": [<id>]``), a note is added after its text, and every
  verbatim copy of the old content in it (at least :data:`MIN_REPLACED`
  characters, also with its whitespace collapsed, as the extractive
  summarizer quotes) is replaced by the new content.

A summary whose lineage names another subject under a legal hold is derived
from held data: it is left as it is and counted in ``held``.

Everything is idempotent: a record that already has the new content and
names the rectification, and a summary that names it, are not changed
again, so a rectification interrupted by a crash is finished by running it
again. Everything else (the header, other records, their bytes) is kept.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .._format import (
    Record,
    is_summary,
    parse_memory,
    record_ids,
    record_lineage,
    render_block,
)
from ._redact import _holds_on, mentions

__all__ = ["MIN_REPLACED", "RECTIFIED_KEY", "FileAmendment", "amend_file", "note_text"]

RECTIFIED_KEY = "rectified"
MIN_REPLACED = 12
"""Shorter old contents are not replaced inside summaries: they could match other words."""

Regenerate = Callable[[int, Record], str | None]
"""Gives the regenerated text (prefix included) of the summary at an index of the file's
records, or None: mark it instead."""


def note_text(day: _dt.date, rectification_id: str) -> str:
    """The note a marked summary gets after its text."""
    return (
        f"[Rectified on {day.isoformat()} ({rectification_id}): a record this summary was "
        "built from was corrected; where they differ, the corrected record prevails]"
    )


@dataclass(frozen=True)
class FileAmendment:
    """The new text of one file and what changed in it (counts, never content)."""

    text: str
    records: int = 0
    marked: int = 0
    regenerated: int = 0
    held: int = 0
    holds: tuple[str, ...] = ()
    targets: tuple[int, ...] = ()
    """Indexes (in the file's records) of the summaries that were regenerated."""

    @property
    def changed(self) -> bool:
        return bool(self.records or self.marked or self.regenerated)


@dataclass(frozen=True)
class Request:
    """What one rectification asks, as the pure functions need it."""

    agent: str
    subject: str
    record_id: str
    text: str
    rectification_id: str
    day: _dt.date
    record_time: str | None
    old_texts: Sequence[str] = ()


def _names(record: Record) -> list[str]:
    value = record.meta.get(RECTIFIED_KEY)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _with_mark(record: Record, rectification_id: str) -> dict[str, object]:
    meta: dict[str, object] = dict(record.meta)
    meta[RECTIFIED_KEY] = [*_names(record), rectification_id]
    return meta


def not_before(timestamp: str, reference: str | None) -> bool:
    """Whether ``timestamp`` is not earlier than ``reference`` (unknown or unparsable: True)."""
    if reference is None:
        return True
    try:
        when, then = _dt.datetime.fromisoformat(timestamp), _dt.datetime.fromisoformat(reference)
        return when >= then
    except (ValueError, TypeError):  # unparsable, or naive against aware: may be derived
        return True


def derived(record: Record, request: Request) -> bool:
    """Whether ``record`` is a summary that may have been built from the rectified record."""
    if not is_summary(record):
        return False
    named = request.subject in record_lineage(record) or record.subject_id == request.subject
    return named and not_before(record.timestamp, request.record_time)


def amend_file(
    text: str,
    request: Request,
    *,
    held: Mapping[str, tuple[str, ...]] | None = None,
    regenerate: Regenerate | None = None,
) -> FileAmendment | None:
    """``text`` with the record corrected and its summaries dealt with; None if it has neither."""
    if not mentions(text, request.subject):
        return None
    parsed = parse_memory(text)
    ids = record_ids(request.agent, parsed.records)
    out: list[str] = []
    records = marked = regenerated = held_count = 0
    holds: set[str] = set()
    targets: list[int] = []
    for index, (record, rid) in enumerate(zip(parsed.records, ids, strict=True)):
        done = request.rectification_id in _names(record)
        if rid == request.record_id and not is_summary(record):
            if done and record.content == request.text:
                out.append(record.raw)
                continue
            records += 1
            meta = _with_mark(record, request.rectification_id) if not done else record.meta
            out.append(render_block(record.role, record.timestamp, request.text, dict(meta)))
        elif derived(record, request) and not done:
            covering = _holds_on(record, request.subject, held)
            if covering:
                held_count += 1
                holds.update(covering)
                out.append(record.raw)
                continue
            fresh = regenerate(index, record) if regenerate is not None else None
            meta = _with_mark(record, request.rectification_id)
            if fresh is not None:
                regenerated += 1
                targets.append(index)
                out.append(render_block(record.role, record.timestamp, fresh, meta))
            else:
                marked += 1
                body = _replace_old(record.content, request.old_texts, request.text)
                body = f"{body}\n\n{note_text(request.day, request.rectification_id)}"
                out.append(render_block(record.role, record.timestamp, body, meta))
        else:
            out.append(record.raw)
    if not records and not marked and not regenerated and not held_count:
        return None
    prefix = text[: len(text) - sum(len(r.raw) for r in parsed.records)]
    return FileAmendment(
        text=prefix + "".join(out),
        records=records,
        marked=marked,
        regenerated=regenerated,
        held=held_count,
        holds=tuple(sorted(holds)),
        targets=tuple(targets),
    )


def _replace_old(body: str, old_texts: Sequence[str], new: str) -> str:
    """``body`` with each verbatim copy of an old content replaced by the new one."""
    for old in old_texts:
        if len(old) < MIN_REPLACED or old == new:
            continue
        body = body.replace(old, new)
        collapsed = " ".join(old.split())
        if collapsed != old:
            body = body.replace(collapsed, " ".join(new.split()))
    return body


def find_record(text: str, agent: str, record_id: str) -> list[Record]:
    """Every record of ``text`` whose id is ``record_id`` (copies of one record)."""
    parsed = parse_memory(text)
    return [
        r
        for r, rid in zip(parsed.records, record_ids(agent, parsed.records), strict=True)
        if rid == record_id
    ]
