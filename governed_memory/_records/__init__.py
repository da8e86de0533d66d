"""Governance records: consent, legal holds, erasure records and receipts.

Modules, one concept each:

* ``_jsonl``       an append-only JSON Lines log (locked, fsynced, torn-tail safe, cached)
* ``_document``    one JSON document replaced atomically
* ``_version``     the one format-version check
* ``_fields``      typed fields of a stored record (a wrong type is a damaged file, named)
* ``_consent``     the consent registry (a log)
* ``_holds``       legal holds (a document)
* ``_tombstones``  erasure records: tombstones, progress logs, scheduled erasures
* ``_receipts``    erasure receipts; ``sign_receipt``/``verify_receipt``, the one
                   place every receipt is signed (docs/evidence.md)
* ``_text``        the check that text can be stored (UTF-8, no NUL)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._consent import (
        ConsentAction,
        ConsentEvent,
        ConsentRecord,
        ConsentRegistry,
        ConsentRemoval,
        validate_subject_id,
    )
    from ._document import JsonDocument
    from ._holds import HOLDS_FILE, HOLDS_LOCK, Hold, HoldNotFoundError, HoldRegistry, HoldSet
    from ._jsonl import JsonlLog
    from ._receipts import (
        ErasureReceipt,
        FileRemoval,
        HeldSummaries,
        UnreachedItem,
        sign_receipt,
        verify_receipt,
    )
    from ._text import validate_text
    from ._tombstones import (
        COMPLETE,
        PROGRESS_SUFFIX,
        SCHEDULED_DIR,
        TOMBSTONES_DIR,
        ErasureScope,
        ScheduledErasure,
        Tombstone,
        TombstoneStore,
        new_erasure_id,
    )
    from ._version import check_version

_LAZY: dict[str, str] = {
    "ConsentAction": "._consent",
    "ConsentEvent": "._consent",
    "ConsentRecord": "._consent",
    "ConsentRegistry": "._consent",
    "ConsentRemoval": "._consent",
    "validate_subject_id": "._consent",
    "JsonDocument": "._document",
    "JsonlLog": "._jsonl",
    "HOLDS_FILE": "._holds",
    "HOLDS_LOCK": "._holds",
    "Hold": "._holds",
    "HoldNotFoundError": "._holds",
    "HoldRegistry": "._holds",
    "HoldSet": "._holds",
    "ErasureReceipt": "._receipts",
    "FileRemoval": "._receipts",
    "HeldSummaries": "._receipts",
    "UnreachedItem": "._receipts",
    "sign_receipt": "._receipts",
    "verify_receipt": "._receipts",
    "COMPLETE": "._tombstones",
    "ErasureScope": "._tombstones",
    "PROGRESS_SUFFIX": "._tombstones",
    "SCHEDULED_DIR": "._tombstones",
    "ScheduledErasure": "._tombstones",
    "TOMBSTONES_DIR": "._tombstones",
    "Tombstone": "._tombstones",
    "TombstoneStore": "._tombstones",
    "new_erasure_id": "._tombstones",
    "check_version": "._version",
    "validate_text": "._text",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "COMPLETE",
    "HOLDS_FILE",
    "HOLDS_LOCK",
    "PROGRESS_SUFFIX",
    "SCHEDULED_DIR",
    "TOMBSTONES_DIR",
    "ConsentAction",
    "ConsentEvent",
    "ConsentRecord",
    "ConsentRegistry",
    "ConsentRemoval",
    "ErasureReceipt",
    "ErasureScope",
    "FileRemoval",
    "HeldSummaries",
    "Hold",
    "HoldNotFoundError",
    "HoldRegistry",
    "HoldSet",
    "JsonDocument",
    "JsonlLog",
    "ScheduledErasure",
    "Tombstone",
    "TombstoneStore",
    "UnreachedItem",
    "check_version",
    "new_erasure_id",
    "sign_receipt",
    "validate_subject_id",
    "validate_text",
    "verify_receipt",
]
