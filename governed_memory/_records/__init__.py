"""Governance records: consent, legal holds, erasure records and receipts.

Modules, one concept each:

* ``_jsonl``       an append-only JSON Lines log (locked, fsynced, torn-tail safe, cached)
* ``_document``    one JSON document replaced atomically
* ``_placed``      what both share: a name in a place, the writers' lock, the sealing
* ``_place``       where the records live: the governance folder (``FolderPlace``);
                   a registry given a ``RecordPlace`` instead keeps them there
* ``_version``     the one format-version check
* ``_fields``      typed fields of a stored record (a wrong type is a damaged file, named)
* ``_consent``     the consent registry (a log)
* ``_holds``       legal holds (a document)
* ``_tombstones``  erasure records: tombstones, progress logs, scheduled erasures
* ``_receipts``    erasure receipts
* ``_rectifications`` rectification records, progress logs and receipts (Art. 16)
* ``_export_receipts`` export receipts (the files of an access export and their SHA-256)
* ``_requests``    the request register: data-subject requests, arrival to closing (a log)
* ``_request_events`` a request as its events leave it (the values and the fold, pure)
* ``_deadlines``   when a request is due (GDPR Art. 12(3), pure)
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
    from ._export_receipts import ExportedFile, ExportReceipt, ExportReceiptStore
    from ._holds import HOLDS_FILE, HOLDS_LOCK, Hold, HoldNotFoundError, HoldRegistry, HoldSet
    from ._jsonl import JsonlLog
    from ._place import FolderPlace, as_place
    from ._receipts import (
        ErasureReceipt,
        FileRemoval,
        HeldSummaries,
        UnreachedItem,
        sign_receipt,
        verify_receipt,
    )
    from ._rectifications import (
        Rectification,
        RectificationReceipt,
        RectificationStore,
        RectifiedFile,
        content_hash,
        new_rectification_id,
    )
    from ._requests import (
        KINDS,
        OUTCOMES,
        REQUESTS_LOG,
        RequestRegister,
        SubjectRequest,
        parse_day,
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
    "ExportReceipt": "._export_receipts",
    "ExportReceiptStore": "._export_receipts",
    "ExportedFile": "._export_receipts",
    "JsonlLog": "._jsonl",
    "FolderPlace": "._place",
    "as_place": "._place",
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
    "Rectification": "._rectifications",
    "RectificationReceipt": "._rectifications",
    "RectificationStore": "._rectifications",
    "RectifiedFile": "._rectifications",
    "content_hash": "._rectifications",
    "new_rectification_id": "._rectifications",
    "KINDS": "._requests",
    "OUTCOMES": "._requests",
    "REQUESTS_LOG": "._requests",
    "RequestRegister": "._requests",
    "SubjectRequest": "._requests",
    "parse_day": "._requests",
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
    "KINDS",
    "OUTCOMES",
    "PROGRESS_SUFFIX",
    "REQUESTS_LOG",
    "SCHEDULED_DIR",
    "TOMBSTONES_DIR",
    "ConsentAction",
    "ConsentEvent",
    "ConsentRecord",
    "ConsentRegistry",
    "ConsentRemoval",
    "ErasureReceipt",
    "ErasureScope",
    "ExportReceipt",
    "ExportReceiptStore",
    "ExportedFile",
    "FileRemoval",
    "FolderPlace",
    "HeldSummaries",
    "Hold",
    "HoldNotFoundError",
    "HoldRegistry",
    "HoldSet",
    "JsonDocument",
    "JsonlLog",
    "Rectification",
    "RectificationReceipt",
    "RectificationStore",
    "RectifiedFile",
    "RequestRegister",
    "ScheduledErasure",
    "SubjectRequest",
    "Tombstone",
    "TombstoneStore",
    "UnreachedItem",
    "as_place",
    "check_version",
    "content_hash",
    "new_erasure_id",
    "new_rectification_id",
    "parse_day",
    "sign_receipt",
    "validate_subject_id",
    "validate_text",
    "verify_receipt",
]
