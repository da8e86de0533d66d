"""_records"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._consent import (
        CONSENT_LOCK,
        CONSENT_LOG,
        ConsentAction,
        ConsentEvent,
        ConsentRegistry,
        open_consent_line,
        validate_subject_id,
    )
    from ._holds import HOLDS_FILE, HOLDS_LOCK, Hold, HoldNotFoundError, HoldRegistry, HoldSet
    from ._receipts import ErasureReceipt, FileRemoval
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

_LAZY: dict[str, str] = {
    "CONSENT_LOCK": "._consent",
    "CONSENT_LOG": "._consent",
    "ConsentAction": "._consent",
    "ConsentEvent": "._consent",
    "ConsentRegistry": "._consent",
    "open_consent_line": "._consent",
    "validate_subject_id": "._consent",
    "HOLDS_FILE": "._holds",
    "HOLDS_LOCK": "._holds",
    "Hold": "._holds",
    "HoldNotFoundError": "._holds",
    "HoldRegistry": "._holds",
    "HoldSet": "._holds",
    "ErasureReceipt": "._receipts",
    "FileRemoval": "._receipts",
    "COMPLETE": "._tombstones",
    "ErasureScope": "._tombstones",
    "PROGRESS_SUFFIX": "._tombstones",
    "SCHEDULED_DIR": "._tombstones",
    "ScheduledErasure": "._tombstones",
    "TOMBSTONES_DIR": "._tombstones",
    "Tombstone": "._tombstones",
    "TombstoneStore": "._tombstones",
    "new_erasure_id": "._tombstones",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "COMPLETE",
    "CONSENT_LOCK",
    "CONSENT_LOG",
    "HOLDS_FILE",
    "HOLDS_LOCK",
    "PROGRESS_SUFFIX",
    "SCHEDULED_DIR",
    "TOMBSTONES_DIR",
    "ConsentAction",
    "ConsentEvent",
    "ConsentRegistry",
    "ErasureReceipt",
    "ErasureScope",
    "FileRemoval",
    "Hold",
    "HoldNotFoundError",
    "HoldRegistry",
    "HoldSet",
    "ScheduledErasure",
    "Tombstone",
    "TombstoneStore",
    "new_erasure_id",
    "open_consent_line",
    "validate_subject_id",
]
