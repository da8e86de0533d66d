r"""Durable rectification state (GDPR Art. 16): the request, its progress, its receipt.

Layout under the governance folder (folders 0700, files 0600), the same
shape as the erasure records beside it (``_tombstones``)::

    rectifications/<id>.json              one rectification: who, what, why, state, receipt
    rectifications/.<id>.progress.jsonl   what an unfinished one planned, per memory;
                                          its presence marks it unfinished

The document is written (atomically, fsynced) *before* any memory file is
touched. While pending it holds the new text and the old one (a summary may
quote the old text: a resumed run must still find it there after the record
itself was rewritten), so a run killed at any point is finished by the next
``rectify`` or ``resume_rectifications`` exactly as asked; when it completes
the same file is replaced (atomically) by its ``complete`` version, without
either text, carrying the receipt: keyed hashes (:func:`content_hash`), never
content.

Under encryption at rest (``sealing`` given) the document and each progress
line are sealed envelopes, as erasure records are: the subject, the new text,
the actor and the reason are not on disk in plaintext.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._crypto import ERASURE_PURPOSE, RecordSealing
from .._errors import StorageError
from ._document import JsonDocument
from ._fields import Fields
from ._jsonl import JsonlLog
from ._place import FolderPlace, as_place

if TYPE_CHECKING:
    from .._protocols import RecordPlace

__all__ = [
    "HASH_ALGORITHM",
    "RECTIFICATIONS_DIR",
    "Rectification",
    "RectificationReceipt",
    "RectificationStore",
    "RectifiedFile",
    "content_hash",
    "is_rectification_id",
    "new_rectification_id",
]

RECTIFICATION_FORMAT_VERSION = 1
RECTIFICATIONS_DIR = "rectifications"
PROGRESS_SUFFIX = ".progress.jsonl"
PENDING = "pending"
COMPLETE = "complete"
PARTIAL = "partial"
HASH_ALGORITHM = "hmac-sha256"


_ID = re.compile(r"^rect-\d{8}T\d{12}Z-[0-9a-f]{8}$")


def is_rectification_id(value: object) -> bool:
    """Whether ``value`` has the shape of a rectification id (no path can hide in one)."""
    return isinstance(value, str) and _ID.match(value) is not None


def new_rectification_id(now: _dt.datetime) -> str:
    """A fresh id that sorts by time: ``rect-<UTC yyyymmddThhmmssffffff>Z-<8 hex>``."""
    utc = now.astimezone(_dt.UTC) if now.tzinfo else now.astimezone().astimezone(_dt.UTC)
    return f"rect-{utc:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(4)}"


def content_hash(salt: str, text: str) -> str:
    """HMAC-SHA256 of a record's content (UTF-8) under the rectification's ``salt`` (hex).

    Keyed, not a plain SHA-256: an audit log entry alone cannot confirm a
    guess of a short text (a date of birth, an account number). The salt is
    in the receipt, so whoever holds the receipt and the text checks it:
    ``hmac.new(bytes.fromhex(salt), text.encode(), "sha256").hexdigest()``.
    """
    return hmac.new(bytes.fromhex(salt), text.encode("utf-8"), hashlib.sha256).hexdigest()


_REQUEST_TEXTS = ("id", "subject", "record_id", "agent", "requested_at", "requested_by", "reason")
_REQUEST_VERSIONS = ("policy_id", "policy_version")


def _request_to_dict(item: Any) -> dict[str, Any]:
    """The request's fields (which record, who, when, why, under which policy) as stored."""
    return {name: getattr(item, name) for name in (*_REQUEST_TEXTS, *_REQUEST_VERSIONS)}


def _request_from(fields: Fields) -> dict[str, Any]:
    """The request's fields read back, as constructor arguments (StorageError naming one)."""
    found: dict[str, Any] = {name: fields.text(name) for name in _REQUEST_TEXTS}
    found.update((name, fields.version_text(name)) for name in _REQUEST_VERSIONS)
    return found


@dataclass(frozen=True)
class RectifiedFile:
    """What one rectification changed in one file (counts and sizes, never content)."""

    agent: str
    file: str
    records: int
    summaries_marked: int
    summaries_regenerated: int
    summaries_held: int
    bytes_written: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "file": self.file,
            "records": self.records,
            "summaries_marked": self.summaries_marked,
            "summaries_regenerated": self.summaries_regenerated,
            "summaries_held": self.summaries_held,
            "bytes_written": self.bytes_written,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "rectification receipt") -> RectifiedFile:
        return cls.from_fields(Fields(data, where))

    @classmethod
    def from_fields(cls, fields: Fields) -> RectifiedFile:
        return cls(
            agent=fields.text("agent"),
            file=fields.text("file"),
            records=fields.count("records"),
            summaries_marked=fields.count("summaries_marked"),
            summaries_regenerated=fields.count("summaries_regenerated"),
            summaries_held=fields.count("summaries_held"),
            bytes_written=fields.count("bytes_written"),
        )


@dataclass(frozen=True)
class RectificationReceipt:
    """Proof of one completed rectification: which record, when, who, hashes, never content.

    ``old_hashes`` are the keyed hashes (:func:`content_hash`, under ``salt``)
    of the content the record had (one per distinct stored copy, almost
    always one); ``new_hash`` that of the content it has now. ``summaries``
    is the policy's ``summarization.on_rectify`` (``mark`` or
    ``regenerate``); ``fallback`` says why summaries were marked although
    regeneration was asked for (no allowed summarizer, no source left).
    ``holds`` are the legal holds on another subject that kept summaries as
    they were (``state`` is then ``partial``).
    """

    id: str
    subject: str
    record_id: str
    agent: str
    requested_at: str
    requested_by: str
    reason: str
    completed_at: str
    policy_id: str
    policy_version: str
    salt: str
    old_hashes: tuple[str, ...]
    new_hash: str
    summaries: str
    files: tuple[RectifiedFile, ...]
    resumed: bool = False
    fallback: str | None = None
    model: str | None = None
    holds: tuple[str, ...] = ()
    signature: dict[str, Any] | None = field(default=None, compare=False)
    """The ``signature`` member of a signed receipt (issue 16 part 4 signs receipts where they
    are stored); None: unsigned."""

    @property
    def state(self) -> str:
        return PARTIAL if self.holds else COMPLETE

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)

    @property
    def summaries_marked(self) -> int:
        return sum(f.summaries_marked for f in self.files)

    @property
    def summaries_regenerated(self) -> int:
        return sum(f.summaries_regenerated for f in self.files)

    @property
    def summaries_held(self) -> int:
        return sum(f.summaries_held for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "rectification",
            "state": self.state,
            **_request_to_dict(self),
            "completed_at": self.completed_at,
            "content_hash": {
                "algorithm": HASH_ALGORITHM,
                "salt": self.salt,
                "old": list(self.old_hashes),
                "new": self.new_hash,
            },
            "summaries": self.summaries,
            "fallback": self.fallback,
            "model": self.model,
            "holds": list(self.holds),
            "files": [f.to_dict() for f in self.files],
            "resumed": self.resumed,
            "totals": {
                "files": len(self.files),
                "records": self.records,
                "summaries_marked": self.summaries_marked,
                "summaries_regenerated": self.summaries_regenerated,
                "summaries_held": self.summaries_held,
            },
            **({"signature": dict(self.signature)} if self.signature is not None else {}),
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], where: str = "rectification receipt"
    ) -> RectificationReceipt:
        """The receipt of a stored document (StorageError naming a damaged field)."""
        fields = Fields(data, where)
        hashes = fields.nested("content_hash")
        hashes.text("algorithm", choices=(HASH_ALGORITHM,))
        return cls(
            **_request_from(fields),
            completed_at=fields.text("completed_at"),
            salt=hashes.text("salt"),
            old_hashes=hashes.texts("old"),
            new_hash=hashes.text("new"),
            summaries=fields.text("summaries"),
            files=tuple(RectifiedFile.from_fields(f) for f in fields.records("files")),
            resumed=fields.flag("resumed"),
            fallback=fields.optional_text("fallback"),
            model=fields.optional_text("model"),
            holds=fields.texts("holds"),
            signature=fields.optional_record("signature"),
        )


@dataclass(frozen=True)
class Rectification:
    """One rectification, pending (``text`` set) or complete (``receipt`` set, ``text`` None)."""

    id: str
    subject: str
    record_id: str
    agent: str
    requested_at: str
    requested_by: str
    reason: str
    policy_id: str
    policy_version: str
    salt: str
    old_hashes: tuple[str, ...]
    new_hash: str
    text: str | None
    old_texts: tuple[str, ...] = ()
    state: str = PENDING
    receipt: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def pending(self) -> bool:
        return self.state == PENDING

    def completed(self, receipt: RectificationReceipt) -> Rectification:
        """The complete version: the receipt kept, the new text dropped."""
        return replace(self, state=COMPLETE, text=None, old_texts=(), receipt=receipt.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": RECTIFICATION_FORMAT_VERSION,
            **_request_to_dict(self),
            "salt": self.salt,
            "old_hashes": list(self.old_hashes),
            "new_hash": self.new_hash,
            "text": self.text,
            "old_texts": list(self.old_texts),
            "state": self.state,
            "receipt": self.receipt,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "rectification record") -> Rectification:
        fields = Fields(data, where)
        return cls(
            **_request_from(fields),
            salt=fields.text("salt"),
            old_hashes=fields.texts("old_hashes"),
            new_hash=fields.text("new_hash"),
            text=fields.optional_text("text"),
            old_texts=fields.texts("old_texts"),
            state=fields.text("state", choices=(PENDING, COMPLETE)),
            receipt=fields.optional_record("receipt"),
        )


class RectificationStore:
    """Reads and writes rectification records in the governance folder.

    Args:
        governance_dir: the governance folder.
        sealing: seal every record (encryption at rest); None keeps plaintext.
    """

    def __init__(
        self, governance_dir: Path | RecordPlace, *, sealing: RecordSealing | None = None
    ) -> None:
        self.place = as_place(governance_dir)
        self.sealing = sealing

    @property
    def folder(self) -> Path:
        """The rectifications' folder (the file place only)."""
        if not isinstance(self.place, FolderPlace):
            raise StorageError(f"rectification records in {self.place!r} are not kept in files")
        return self.place.path(RECTIFICATIONS_DIR)

    def write(self, item: Rectification) -> None:
        """Create or replace a rectification durably (a pending one's progress log first)."""
        if item.pending:
            self._progress_log(item.id).create()
        self._document(item.id).write(item.to_dict())

    def get(self, rectification_id: str) -> Rectification | None:
        """The rectification (its receipt checked too); None when absent or not such an id.

        Raises:
            StorageError: unreadable or damaged, naming the file and the field.
        """
        if not is_rectification_id(rectification_id):
            return None
        document = self._document(rectification_id)
        data = document.read()
        if data is None:
            return None
        where = f"rectification record {document.where}"
        item = Rectification.from_dict(data, where)
        if item.receipt is not None:
            RectificationReceipt.from_dict(item.receipt, f"{where}, receipt")
        return item

    def ids(self) -> list[str]:
        """Rectification ids, oldest first."""
        return sorted(n[: -len(".json")] for n in self._names(".json"))

    def settled_ids(self) -> tuple[frozenset[str], frozenset[str]]:
        """(every rectification id, the ids without a progress log): one listing, no record read.

        A rectification leaves its progress log once its receipt is written,
        so the second set holds the complete ones (and a complete one whose
        log is not yet dropped is in the first set only, as a pending one is).
        """
        ids = {n[: -len(".json")] for n in self._names(".json")}
        logged = {n[1 : -len(PROGRESS_SUFFIX)] for n in self._names(PROGRESS_SUFFIX, hidden=True)}
        return frozenset(ids), frozenset(ids - logged)

    def all(self) -> list[Rectification]:
        return [item for i in self.ids() if (item := self.get(i)) is not None]

    def pending(self) -> list[Rectification]:
        """Unfinished rectifications, oldest first (reads only their records)."""
        found = []
        for name in sorted(self._names(PROGRESS_SUFFIX, hidden=True)):
            item = self.get(name[1 : -len(PROGRESS_SUFFIX)])
            if item is not None and item.pending:
                found.append(item)
        return found

    def receipts(self) -> list[RectificationReceipt]:
        """Receipts of every completed rectification, oldest first."""
        return [
            RectificationReceipt.from_dict(item.receipt)
            for item in self.all()
            if item.receipt is not None and not item.pending
        ]

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold the workspace's rectification lock; stale temporary files go first.

        One rectification runs at a time per workspace (they are rare, and
        one may have to finish another's interrupted work first). A crash
        while a record was being written can leave its temporary copy, which
        in a plaintext workspace holds the texts in clear: it is removed here,
        under the lock, so no live writer's file is touched.
        """
        with self.place.lock(f"{RECTIFICATIONS_DIR}/.lock").held():
            self.place.remove_temps(RECTIFICATIONS_DIR)
            yield

    def log_progress(self, rectification_id: str, entry: dict[str, Any]) -> None:
        """Append one planned memory (its per-file counts) durably; call it under :meth:`session`."""
        self._progress_log(rectification_id).append(entry)

    def progress(self, rectification_id: str) -> list[dict[str, Any]]:
        """Every complete progress line, oldest first (a torn last line is not one)."""
        return list(self._progress_log(rectification_id).read())

    def drop_progress(self, rectification_id: str) -> None:
        self._progress_log(rectification_id).delete()

    def _names(self, suffix: str, *, hidden: bool = False) -> list[str]:
        return self.place.names(RECTIFICATIONS_DIR, suffix, hidden=hidden)

    def _document(self, rectification_id: str) -> JsonDocument:
        name = f"{RECTIFICATIONS_DIR}/{rectification_id}.json"
        return JsonDocument(
            name,
            place=self.place,
            what="rectification record",
            version=RECTIFICATION_FORMAT_VERSION,
            encode=_encode,
            sealing=self.sealing,
            purpose=ERASURE_PURPOSE,
            context=name,
        )

    def _progress_log(self, rectification_id: str) -> JsonlLog[dict[str, Any]]:
        name = f"{RECTIFICATIONS_DIR}/.{rectification_id}{PROGRESS_SUFFIX}"
        return JsonlLog(
            name,
            place=self.place,
            load=_entry,
            what="rectification progress",
            sealing=self.sealing,
            purpose=ERASURE_PURPOSE,
            context=name,
        )


def _encode(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True)


def _entry(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A progress line, each field's type checked (StorageError naming it)."""
    fields = Fields(data, where)
    for item in fields.records("files"):
        RectifiedFile.from_fields(item)
    fields.texts("holds")
    fields.optional_text("fallback")
    fields.optional_text("model")
    return data
