"""Data-subject requests: export (GDPR Art. 15/20), rectification (Art. 16), erasure (Art. 17).

Modules, one concept each:

* ``_context``    what a request needs from a workspace (Governance or path)
* ``_redact``     a memory file's text without one subject (pure)
* (``_records``) durable erasure state (tombstones, progress, schedules) and
  the erasure receipt (counts, never content)
* ``_erasure``    erase, resume, schedule, run due erasures
* ``_removal``    what an erasure does in one agent, memory by memory (subject memories too)
* ``_unfinished`` what a request could not do in one agent (a damaged file, a missing
  key, a symbolic link) and the fix; failures stay local to their agent
* ``_guard``      what a live governed Conversation does about erasures
* ``_collect``    what a workspace holds about a subject, as plain data
* ``_access``     what Art. 15(1) asks beside the data: purposes, recipients, retention
* ``_schema``     the models export.json is built through (docs/export-schema.json is
  generated from them by ``_write_schema``)
* ``_markdown``   the readable rendering of an export
* ``_report``     the Art. 15(1)(a)-(h) report for the person (report.md)
* ``_export``     the subject access export (JSON + Markdown + report + manifest, and its receipt)
* ``_amend``      a memory file's text with one record corrected (pure)
* ``_rectify``    rectification (Art. 16): find by record id, correct, mark or
  regenerate the summaries built from it, receipt
* ``_requests``   requests through the register: open, verify, extend, close (with the
  receipt that answered), where each stands, and the follow-ups of erasures
* ``_errors``     ErasureBlockedError, ErasedDuringCompactionError

Lineage (which subjects a compaction summary was derived from) lives in
``governed_memory._format._lineage``: Conversation needs it in every mode, without
this package's imports.

For the request register (documented internal names): ``export_receipt`` and
``export_receipts``, the receipts of access exports, by the id an export
returns. For the CLI (documented internal names): ``subject_context``, through which
``erasures list`` reads scheduled erasures and tombstones, and
``pending_erasure`` and ``PendingErasure``, what ``erasures show`` and
``erasures run-due`` print for a pending erasure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes
from .._records import (
    ErasureReceipt,
    ErasureScope,
    FileRemoval,
    RectificationReceipt,
    ScheduledErasure,
    Tombstone,
    TombstoneStore,
)
from ._context import SubjectContext, acting_as, subject_context
from ._erasure import (
    blocking_holds,
    cancel_scheduled_erasure,
    erase,
    erasure_receipts,
    pending_erasure,
    resume_erasures,
    run_due_erasures,
    schedule_erasure,
    scheduled_erasure_task,
)
from ._errors import ErasedDuringCompactionError, ErasureBlockedError
from ._export import ExportResult, export_agent, export_receipt, export_receipts, export_subject
from ._rectify import (
    SubjectRecord,
    SummarizerGate,
    rectification_receipts,
    rectify,
    resume_rectifications,
    subject_records,
)
from ._requests import (
    RECEIPT_READERS,
    FoundReceipt,
    Standing,
    close_request,
    extend_request,
    find_receipt,
    follow_up,
    open_request,
    request_register,
    settle,
    standing,
    standings,
    stored_receipt,
    subject_receipts,
    verify_request,
)
from ._unfinished import PendingErasure, Unfinished

__all__ = [
    "RECEIPT_READERS",
    "ErasedDuringCompactionError",
    "ErasureBlockedError",
    "ErasureGuard",
    "ErasureReceipt",
    "ErasureScope",
    "ExportResult",
    "FileRemoval",
    "FoundReceipt",
    "PendingErasure",
    "RectificationReceipt",
    "ScheduledErasure",
    "Standing",
    "SubjectContext",
    "SubjectRecord",
    "SummarizerGate",
    "Tombstone",
    "TombstoneStore",
    "Unfinished",
    "acting_as",
    "blocking_holds",
    "cancel_scheduled_erasure",
    "close_request",
    "erase",
    "erasure_receipts",
    "export_agent",
    "export_receipt",
    "export_receipts",
    "export_subject",
    "extend_request",
    "filter_history",
    "find_receipt",
    "follow_up",
    "open_request",
    "pending_erasure",
    "rectification_receipts",
    "rectify",
    "request_register",
    "resume_erasures",
    "resume_rectifications",
    "run_due_erasures",
    "schedule_erasure",
    "scheduled_erasure_task",
    "settle",
    "standing",
    "standings",
    "stored_receipt",
    "subject_context",
    "subject_receipts",
    "subject_records",
    "verify_request",
]

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._guard import ErasureGuard, filter_history

_LAZY: dict[str, str] = {
    "ErasureGuard": "._guard",
    "filter_history": "._guard",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
