"""The export receipt: which files an access export wrote, their SHA-256, when, by whom.

Layout under the governance folder (folder 0700, files 0600)::

    receipts/exports/<id>.json     one export: id, subject's keyed hash, time, files, actor

A receipt is a :class:`~._document.JsonDocument` (format version 1), written
atomically and fsynced, like an erasure's tombstone carrying its receipt, so
a request in the register can be closed with its id. It holds no content and
no subject id: the subject by the audit trail's keyed hash (None when the
workspace has no audit key), the scope's agent by name. Under encryption at
rest it is sealed like the erasure records (the actor is a person too).
Ids sort chronologically (:func:`~._tombstones.new_erasure_id`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._crypto import ERASURE_PURPOSE, RecordSealing
from .._errors import StorageError
from ._document import JsonDocument
from ._fields import Fields
from ._place import FolderPlace, as_place

if TYPE_CHECKING:
    from .._protocols import RecordPlace

__all__ = ["EXPORT_RECEIPTS_DIR", "ExportReceipt", "ExportReceiptStore", "ExportedFile"]

EXPORT_RECEIPTS_DIR = "receipts/exports"
EXPORT_RECEIPT_VERSION = 1


@dataclass(frozen=True)
class ExportedFile:
    """One file of an export folder: its name, SHA-256 and size."""

    path: str
    sha256: str
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.bytes}

    @classmethod
    def from_fields(cls, fields: Fields) -> ExportedFile:
        return cls(fields.text("path"), fields.text("sha256"), fields.count("bytes"))


@dataclass(frozen=True)
class ExportReceipt:
    """Proof of one access export: what it wrote (digests, never content), when, by whom."""

    id: str
    subject_hash: str | None
    agent: str | None
    created_at: str
    actor: str
    policy_id: str
    policy_version: str
    out_dir: str
    files: tuple[ExportedFile, ...]
    signature: dict[str, Any] | None = field(default=None, compare=False)
    """The ``signature`` member of a signed receipt (see ``sign_receipt``); None: unsigned."""

    @property
    def kind(self) -> str:
        return "export"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "subject_hash": self.subject_hash,
            "agent": self.agent,
            "created_at": self.created_at,
            "actor": self.actor,
            "policy_id": self.policy_id,
            "policy_version": self.policy_version,
            "out_dir": self.out_dir,
            "files": [f.to_dict() for f in self.files],
            **({"signature": dict(self.signature)} if self.signature is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "export receipt") -> ExportReceipt:
        """The receipt of a stored document (StorageError naming a missing or wrong field)."""
        fields = Fields(data, where)
        return cls(
            id=fields.text("id"),
            subject_hash=fields.optional_text("subject_hash"),
            agent=fields.optional_text("agent"),
            created_at=fields.time("created_at"),
            actor=fields.text("actor"),
            policy_id=fields.version_text("policy_id"),
            policy_version=fields.version_text("policy_version"),
            out_dir=fields.text("out_dir"),
            files=tuple(ExportedFile.from_fields(f) for f in fields.records("files")),
            signature=fields.optional_record("signature"),
        )


class ExportReceiptStore:
    """Reads and writes export receipts in the governance folder.

    Args:
        governance_dir: the governance folder.
        sealing: seal every receipt (encryption at rest); None keeps plaintext.
    """

    def __init__(
        self, governance_dir: Path | RecordPlace, *, sealing: RecordSealing | None = None
    ) -> None:
        self.place = as_place(governance_dir)
        self.sealing = sealing

    @property
    def folder(self) -> Path:
        """The export receipts' folder (the file place only)."""
        if not isinstance(self.place, FolderPlace):
            raise StorageError(f"export receipts in {self.place!r} are not kept in files")
        return self.place.path(EXPORT_RECEIPTS_DIR)

    def write(self, receipt: ExportReceipt) -> None:
        """Store ``receipt`` durably (StorageError: not written)."""
        self._document(receipt.id).write(receipt.to_dict())

    def get(self, receipt_id: str) -> ExportReceipt | None:
        """The receipt, or None when there is none of that id."""
        document = self._document(receipt_id)
        data = document.read()
        if data is None:
            return None
        return ExportReceipt.from_dict(data, f"export receipt {document.where}")

    def ids(self) -> list[str]:
        """Receipt ids, oldest first."""
        return sorted(n[: -len(".json")] for n in self.place.names(EXPORT_RECEIPTS_DIR, ".json"))

    def _document(self, receipt_id: str) -> JsonDocument:
        name = f"{EXPORT_RECEIPTS_DIR}/{Path(receipt_id).name}.json"
        return JsonDocument(
            name,
            place=self.place,
            what="export receipt",
            version=EXPORT_RECEIPT_VERSION,
            encode=_encode,
            sealing=self.sealing,
            # Sealed as the erasure records are: the same key purpose, bound to its own path.
            purpose=ERASURE_PURPOSE,
            context=name,
        )


def _encode(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True)
