"""Data-subject requests: export (GDPR Art. 15/20) and erasure (Art. 17).

Modules, one concept each:

* ``_context``    what a request needs from a workspace (Governance or path)
* ``_redact``     a memory file's text without one subject (pure)
* ``_tombstones`` durable erasure state: tombstones, progress, schedules
* ``_receipt``    the erasure receipt (counts, never content)
* ``_erasure``    erase, resume, schedule, run due erasures
* ``_guard``      what a live governed Conversation does about erasures
* ``_collect``    what a workspace holds about a subject, as plain data
* ``_markdown``   the readable rendering of an export
* ``_export``     the subject access export (JSON + Markdown + manifest)
* ``_errors``     ErasureBlockedError, ErasedDuringCompactionError

Lineage (which subjects a compaction summary was derived from) lives in
``governed_memory._format._lineage``: Conversation needs it in every mode, without
this package's imports.
"""

from __future__ import annotations

from .._records._receipts import ErasureReceipt, FileRemoval
from .._records._tombstones import ErasureScope, ScheduledErasure, Tombstone, TombstoneStore
from ._context import SubjectContext, subject_context
from ._erasure import (
    blocking_holds,
    cancel_scheduled_erasure,
    erase,
    erasure_receipts,
    resume_erasures,
    run_due_erasures,
    schedule_erasure,
    scheduled_erasure_task,
)
from ._errors import ErasedDuringCompactionError, ErasureBlockedError
from ._export import ExportResult, export_agent, export_subject

__all__ = [
    "ErasedDuringCompactionError",
    "ErasureBlockedError",
    "ErasureReceipt",
    "ErasureScope",
    "ExportResult",
    "FileRemoval",
    "ScheduledErasure",
    "SubjectContext",
    "Tombstone",
    "TombstoneStore",
    "blocking_holds",
    "cancel_scheduled_erasure",
    "erase",
    "erasure_receipts",
    "export_agent",
    "export_subject",
    "resume_erasures",
    "run_due_erasures",
    "schedule_erasure",
    "scheduled_erasure_task",
    "subject_context",
]
