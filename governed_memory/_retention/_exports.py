"""Export bundles past ``exports_max_age`` that retention cannot delete, named from their receipts.

A subject-access export is a folder written where ``export --out`` points.
Retention deletes it only inside the managed exports folder
(``<workspace>/.governed_memory/exports/``, scanned as ``EXPORT`` artefacts by
``_scan``). Anywhere else (and always on a database deployment, which keeps
no folder of its own: the bundle lies on the disk of the host that ran the
export) the folder is beyond reach, and ``exports_max_age`` would silently
not apply. Every export leaves a receipt in the record place, on either
backend, so a purge lists the unmanaged exports older than the rule whose
folder is still on this host's disk: the operator deletes those. Nothing
here deletes anything or reads an export's files.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import format_duration
from .._errors import GovernedMemoryError
from .._records import ExportReceiptStore

if TYPE_CHECKING:
    from .._crypto import RecordSealing
    from .._protocols import RecordPlace

__all__ = ["UnmanagedExport", "unmanaged_exports"]


@dataclass(frozen=True)
class UnmanagedExport:
    """An export folder older than ``exports_max_age``, outside what retention deletes."""

    id: str
    created_at: str
    out_dir: str
    note: str
    """One line for the operator: which folder, why it is kept, what to do."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "out_dir": self.out_dir,
            "note": self.note,
        }


def _local(iso: str) -> _dt.datetime:
    when = _dt.datetime.fromisoformat(iso)
    return when.astimezone().replace(tzinfo=None) if when.tzinfo is not None else when


def _inside(out_dir: str, managed: Path | None) -> bool:
    if managed is None:
        return False
    try:
        return Path(out_dir).parent == managed.resolve()
    except OSError:
        return False


def unmanaged_exports(
    records: Path | RecordPlace,
    *,
    managed: Path | None,
    reach: str,
    max_age: _dt.timedelta | None,
    now: _dt.datetime,
    sealing: RecordSealing | None = None,
) -> tuple[UnmanagedExport, ...]:
    """The exports made before ``now - max_age`` whose folder is not in ``managed``, oldest first.

    Args:
        records: the record place (or governance folder) holding the export receipts.
        managed: the exports folder retention purges; None on a database (none is).
        reach: what retention deletes from, for the notes (that folder, or the database).
        max_age: the policy's ``exports_max_age``; None (``forever``) lists nothing.
        now: naive local time, the planner's convention.
        sealing: opens sealed receipts (encrypted mode).

    Only folders found on this host's disk are listed: one already deleted is
    not named again, and on a database deployment a folder another host wrote
    is seen by a purge (or dry run) on that host. A receipt that cannot be
    read is passed over: the list is advice, and a purge never fails for it.
    """
    if max_age is None:
        return ()
    store = ExportReceiptStore(records, sealing=sealing)
    found = []
    for receipt_id in store.ids():
        try:
            receipt = store.get(receipt_id)
            if receipt is None or _local(receipt.created_at) >= now - max_age:
                continue
        except (GovernedMemoryError, ValueError):
            continue
        if _inside(receipt.out_dir, managed) or not os.path.lexists(receipt.out_dir):
            continue  # an EXPORT artefact of the scan (the purge deletes it), or gone
        note = (
            f"export {receipt.id} of {receipt.created_at} in {receipt.out_dir} is older than "
            f"exports_max_age ({format_duration(max_age)}) but lies outside {reach}, so no "
            "purge deletes it: delete that folder on the host that wrote it once it is handed over"
        )
        found.append(UnmanagedExport(receipt.id, receipt.created_at, receipt.out_dir, note))
    return tuple(found)
