"""Stable record ids: how a privacy officer names one record of a memory file.

A record has no id of its own in MEMORY.md (the reference writes none), so
its id is derived from what never changes while it is stored::

    rec-<first 16 hex digits of SHA-256 of the JSON
         ["gm-record-1", agent, subject, role, timestamp, n]>

``n`` counts the earlier records of the same file with the same subject,
role and timestamp (0 almost always: timestamps carry microseconds), so two
records written in the same microsecond still differ. The content is not
part of the id: a rectified record keeps its id, and the id discloses
nothing of what the record says. The file is not part of it either: a
record keeps its id when a compaction moves MEMORY.md into an archive,
when encryption rewrites the file, or when an erasure removes other
subjects' records around it.

Only records with a subject have an id (the rest belong to nobody a
request can name); summaries have one too, to be listed in receipts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from ._records import Record

__all__ = ["RECORD_ID_PREFIX", "record_id", "record_ids"]

RECORD_ID_PREFIX = "rec-"
_DOMAIN = "gm-record-1"


def record_id(agent: str, record: Record, occurrence: int = 0) -> str:
    """The id of ``record`` of agent ``agent``, the ``occurrence``-th of its kind in its file."""
    key = json.dumps(
        [_DOMAIN, agent, record.subject_id, record.role, record.timestamp, occurrence],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    return RECORD_ID_PREFIX + hashlib.sha256(key.encode("ascii")).hexdigest()[:16]


def record_ids(agent: str, records: Iterable[Record]) -> list[str | None]:
    """The id of each of one file's ``records`` in order (None for a record without a subject)."""
    seen: dict[tuple[str, str, str], int] = {}
    found: list[str | None] = []
    for record in records:
        subject = record.subject_id
        if subject is None:
            found.append(None)
            continue
        key = (subject, record.role, record.timestamp)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        found.append(record_id(agent, record, occurrence))
    return found
