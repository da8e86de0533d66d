"""The MEMORY.md format: records (parse, render, escape), record ids, lineage of summaries, tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._lineage import (
        ERASED_MARKER_KEY,
        LINEAGE_KEY,
        history_lineage,
        is_summary,
        message_subjects,
        record_lineage,
        record_subjects,
        subjects_in_text,
    )
    from ._record_ids import RECORD_ID_PREFIX, record_id, record_ids
    from ._records import (
        HEADER_MARKER,
        META_OPEN,
        PRELOAD_PREFIX,
        MemoryFile,
        Record,
        has_records,
        newest_records,
        parse_memory,
        record_offsets,
        record_offsets_newest_first,
        render_block,
        render_header,
        to_disk_text,
    )
    from ._tokenizer import counter_for
    from ._tokens import TokenCounter, TokenLedger, full_count

_LAZY: dict[str, str] = {
    "ERASED_MARKER_KEY": "._lineage",
    "LINEAGE_KEY": "._lineage",
    "history_lineage": "._lineage",
    "is_summary": "._lineage",
    "message_subjects": "._lineage",
    "record_lineage": "._lineage",
    "record_subjects": "._lineage",
    "subjects_in_text": "._lineage",
    "RECORD_ID_PREFIX": "._record_ids",
    "record_id": "._record_ids",
    "record_ids": "._record_ids",
    "HEADER_MARKER": "._records",
    "META_OPEN": "._records",
    "MemoryFile": "._records",
    "PRELOAD_PREFIX": "._records",
    "Record": "._records",
    "has_records": "._records",
    "newest_records": "._records",
    "parse_memory": "._records",
    "record_offsets": "._records",
    "record_offsets_newest_first": "._records",
    "render_block": "._records",
    "render_header": "._records",
    "to_disk_text": "._records",
    "counter_for": "._tokenizer",
    "TokenCounter": "._tokens",
    "TokenLedger": "._tokens",
    "full_count": "._tokens",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "ERASED_MARKER_KEY",
    "HEADER_MARKER",
    "LINEAGE_KEY",
    "META_OPEN",
    "PRELOAD_PREFIX",
    "RECORD_ID_PREFIX",
    "MemoryFile",
    "Record",
    "TokenCounter",
    "TokenLedger",
    "counter_for",
    "full_count",
    "has_records",
    "history_lineage",
    "is_summary",
    "message_subjects",
    "newest_records",
    "parse_memory",
    "record_id",
    "record_ids",
    "record_lineage",
    "record_offsets",
    "record_offsets_newest_first",
    "record_subjects",
    "render_block",
    "render_header",
    "subjects_in_text",
    "to_disk_text",
]
