r"""Durable erasure state: tombstones, their progress logs and scheduled erasures.

Layout under the governance folder (all folders 0700, files 0600)::

    tombstones/<id>.json              one erasure: scope, who, why, state, receipt
    tombstones/.<id>.progress.jsonl   what an unfinished erasure planned, per agent;
                                      its presence marks the erasure unfinished
    scheduled-erasures/<id>.json      an erasure with a grace period, not yet due

A tombstone is written (atomically, fsynced) *before* any record is touched,
so an erasure interrupted at any point is found and completed by the next
``erase``, ``resume_erasures``, scheduler run, or the next open of an affected
agent. When it completes, the same file is replaced by its ``complete``
version carrying the receipt (counts only, never content); the progress log
is then deleted. Ids sort chronologically (UTC time, then random hex), so
"tombstones newer than X" is a name comparison.

Tombstones and scheduled erasures are :class:`~._document.JsonDocument`\ s
(format version 1); a progress log is a :class:`~._jsonl.JsonlLog` whose
lines carry no version of their own (their format is the tombstone's). All
of them are written only under the erasure's lock (:meth:`TombstoneStore.
locked`, an ``flock`` on ``tombstones/.<id>.lock``), or before anyone can
know the erasure's id. A progress line torn by a crash is cut before the
next one is appended, exactly as in the consent log, so a resumed erasure's
receipt counts every agent; a damaged complete line is reported, never
skipped.

Tombstones keep the subject identifier (not any content) as proof of the
erasure; ``retention.tombstones_max_age`` bounds how long. Under encryption at
rest (``sealing`` given) every one of these files, and each progress line, is
a sealed envelope (see ``_sealing``): the subject, actor and reason are not on
disk in plaintext; file names (erasure ids: a time and random hex) are.
"""

from __future__ import annotations

import datetime as _dt
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from .._base import FileLock
from .._crypto import ERASURE_PURPOSE, RecordSealing
from .._errors import ConfigurationError, StorageError
from ._document import JsonDocument
from ._fields import Fields, damaged
from ._jsonl import JsonlLog
from ._place import FolderPlace, as_place, file_lock

if TYPE_CHECKING:
    from .._protocols import RecordLock, RecordPlace

__all__ = [
    "COMPLETE",
    "PENDING",
    "TOMBSTONE_FORMAT_VERSION",
    "ErasureRequest",
    "ErasureScope",
    "RequestFields",
    "ScheduledErasure",
    "Tombstone",
    "TombstoneStore",
    "new_erasure_id",
    "request_from_dict",
    "request_to_dict",
]

TOMBSTONE_FORMAT_VERSION = 1
TOMBSTONES_DIR = "tombstones"  # where retention looks for them (tombstones_max_age)
SCHEDULED_DIR = "scheduled-erasures"
PROGRESS_SUFFIX = ".progress.jsonl"
PENDING = "pending"
COMPLETE = "complete"


def new_erasure_id(now: _dt.datetime) -> str:
    """A fresh id that sorts by time: ``<UTC yyyymmddThhmmssffffff>Z-<8 hex>``."""
    utc = now.astimezone(_dt.UTC) if now.tzinfo else now.astimezone().astimezone(_dt.UTC)
    return f"{utc:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class ErasureScope:
    """What an erasure or export covers.

    ``subject`` alone: that subject in every agent. ``agent`` alone: the whole
    agent folder. Both: that subject's records in that agent only.
    """

    subject: str | None = None
    agent: str | None = None

    def __post_init__(self) -> None:
        if self.subject is None and self.agent is None:
            raise ConfigurationError(
                "an erasure or export needs a subject, an agent, or both; "
                "pass --subject S and/or --agent A"
            )

    def covers_agent(self, name: str) -> bool:
        return self.agent is None or self.agent == name

    def describe(self) -> str:
        parts = []
        if self.subject is not None:
            parts.append(f"subject {self.subject!r}")
        if self.agent is not None:
            parts.append(f"agent {self.agent!r}")
        return " in ".join(parts)

    def to_dict(self) -> dict[str, str | None]:
        return {"subject": self.subject, "agent": self.agent}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "erasure record") -> ErasureScope:
        """The scope stored in a record (``where`` names it in messages).

        Raises:
            StorageError: a field of the wrong type, or neither a subject nor an agent.
        """
        return scope_of(Fields(data, where, "scope."))


def scope_of(fields: Fields) -> ErasureScope:
    """The scope held by ``fields`` (a stored record's ``scope`` object)."""
    subject, agent = fields.optional_text("subject"), fields.optional_text("agent")
    if subject is None and agent is None:
        raise damaged(fields.where, fields.prefix.rstrip("."), fields.data, "a subject or an agent")
    return ErasureScope(subject=subject, agent=agent)


class ErasureRequest(Protocol):
    """What every erasure document records about the request: which, what, when, who, why."""

    @property
    def id(self) -> str: ...
    @property
    def scope(self) -> ErasureScope: ...
    @property
    def requested_at(self) -> str: ...
    @property
    def requested_by(self) -> str: ...
    @property
    def reason(self) -> str: ...


def request_to_dict(request: ErasureRequest) -> dict[str, Any]:
    """The request's fields as stored in a tombstone or receipt (in this key order)."""
    return {
        "id": request.id,
        "scope": request.scope.to_dict(),
        "requested_at": request.requested_at,
        "requested_by": request.requested_by,
        "reason": request.reason,
    }


class RequestFields(TypedDict):
    """:func:`request_from_dict`'s answer: keyword arguments of the documents' constructors."""

    id: str
    scope: ErasureScope
    requested_at: str
    requested_by: str
    reason: str


def request_from_dict(
    data: dict[str, Any] | Fields, where: str = "erasure record"
) -> RequestFields:
    """The request's fields read back from a stored document, as constructor arguments.

    Raises:
        StorageError: a field missing or of the wrong type (naming ``where`` and the field).
    """
    fields = data if isinstance(data, Fields) else Fields(data, where)
    return {
        "id": fields.text("id"),
        "scope": scope_of(fields.nested("scope")),
        "requested_at": fields.text("requested_at"),
        "requested_by": fields.text("requested_by"),
        "reason": fields.text("reason"),
    }


@dataclass(frozen=True)
class Tombstone:
    """One erasure, pending or complete; ``receipt`` is set once complete."""

    id: str
    scope: ErasureScope
    requested_at: str
    requested_by: str
    reason: str
    policy_id: str
    policy_version: str
    state: str = PENDING
    completed_at: str | None = None
    receipt: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def pending(self) -> bool:
        return self.state == PENDING

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": TOMBSTONE_FORMAT_VERSION,
            **request_to_dict(self),
            "policy_id": self.policy_id,
            "policy_version": self.policy_version,
            "state": self.state,
            "completed_at": self.completed_at,
            "receipt": self.receipt,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "erasure record") -> Tombstone:
        """The tombstone of a stored document (``where`` names it in messages).

        Raises:
            StorageError: a field missing or of the wrong type.
        """
        fields = Fields(data, where)
        return cls(
            **request_from_dict(fields),
            policy_id=fields.version_text("policy_id"),
            policy_version=fields.version_text("policy_version"),
            state=fields.text("state", choices=(PENDING, COMPLETE)),
            completed_at=fields.optional_text("completed_at"),
            receipt=fields.optional_record("receipt"),
        )


@dataclass(frozen=True)
class ScheduledErasure:
    """An erasure that runs when ``due_at`` (aware ISO 8601) has passed."""

    id: str
    scope: ErasureScope
    due_at: str
    requested_at: str
    requested_by: str
    reason: str

    def due(self, now: _dt.datetime) -> bool:
        return _aware(_dt.datetime.fromisoformat(self.due_at)) <= _aware(now)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": TOMBSTONE_FORMAT_VERSION,
            "id": self.id,
            "scope": self.scope.to_dict(),
            "due_at": self.due_at,
            "requested_at": self.requested_at,
            "requested_by": self.requested_by,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "scheduled erasure") -> ScheduledErasure:
        """The scheduled erasure of a stored document (``where`` names it in messages).

        Raises:
            StorageError: a field missing or of the wrong type (``due_at`` not a time).
        """
        fields = Fields(data, where)
        return cls(**request_from_dict(fields), due_at=fields.time("due_at"))


def _aware(when: _dt.datetime) -> _dt.datetime:
    return when if when.tzinfo else when.astimezone()


class TombstoneStore:
    """Reads and writes erasure state in the governance folder.

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
    def tombstone_dir(self) -> Path:
        """The tombstones' folder (the file place only)."""
        if not isinstance(self.place, FolderPlace):
            raise StorageError(f"erasure records in {self.place!r} are not kept in files")
        return self.place.path(TOMBSTONES_DIR)

    # -- tombstones ------------------------------------------------------

    def write(self, tombstone: Tombstone) -> None:
        """Create or replace a tombstone durably.

        A pending tombstone's progress log is created (empty) first: it marks
        the erasure as unfinished, so finding pending erasures reads only
        their files, not every receipt ever kept. It goes (:meth:`drop_progress`)
        only after the complete tombstone is durable.
        """
        if tombstone.pending:
            self._progress_log(tombstone.id).create()
        self._tombstone(tombstone.id).write(tombstone.to_dict())

    def get(self, erasure_id: str) -> Tombstone | None:
        """The tombstone (its receipt checked too); None when absent.

        Raises:
            StorageError: unreadable, or damaged (a field missing or of the wrong
                type: the message names the file and the field).
        """
        data = self.document(erasure_id)
        if data is None:
            return None
        where = f"erasure record {self._tombstone(erasure_id).where}"
        tombstone = Tombstone.from_dict(data, where)
        if tombstone.receipt is not None:
            from ._receipts import ErasureReceipt  # here: it imports this module

            ErasureReceipt.from_dict(tombstone.receipt, f"{where}, receipt")
        return tombstone

    def document(self, erasure_id: str) -> dict[str, Any] | None:
        """The stored JSON document of a tombstone (opened when sealed); None when absent."""
        return self._tombstone(erasure_id).read()

    def ids(self) -> list[str]:
        """Tombstone ids, oldest first (cheap: one directory listing)."""
        return sorted(n[: -len(".json")] for n in self.place.names(TOMBSTONES_DIR, ".json"))

    def all(self) -> list[Tombstone]:
        found = []
        for erasure_id in self.ids():
            tombstone = self.get(erasure_id)
            if tombstone is not None:
                found.append(tombstone)
        return found

    def pending(self) -> list[Tombstone]:
        """Unfinished erasures, oldest first (reads only their tombstones)."""
        found = []
        for name in sorted(self._progress_names()):
            tombstone = self.get(name[1 : -len(PROGRESS_SUFFIX)])
            if tombstone is not None and tombstone.pending:
                found.append(tombstone)
        return found

    def _progress_names(self) -> list[str]:
        return self.place.names(TOMBSTONES_DIR, PROGRESS_SUFFIX, hidden=True)

    @contextmanager
    def locked(self, erasure_id: str) -> Iterator[None]:
        """Hold the erasure's lock: one process at a time works on (or converts) it.

        When the erasure is complete at the end of the block the lock file is
        removed: whoever waits on it re-reads the tombstone under the lock and
        finds it complete.
        """
        lock = self.record_lock(erasure_id)
        with lock.held():
            yield
            current = self.get(erasure_id)
            if current is not None and not current.pending and isinstance(lock, FileLock):
                lock.path.unlink(missing_ok=True)

    def record_lock(self, erasure_id: str) -> RecordLock:
        """The erasure's lock itself, for work on its records that must not read the tombstone.

        :meth:`locked` is the way to work on an erasure; a key operation
        converting the stored form of its files holds this lock instead.
        """
        return self.place.lock(f"{TOMBSTONES_DIR}/.{erasure_id}.lock")

    def lock(self, erasure_id: str) -> FileLock:
        """:meth:`record_lock` as the lock file it is in the file place."""
        return file_lock(self.record_lock(erasure_id), "erasure record")

    # -- progress of an unfinished erasure --------------------------------

    def log_progress(self, erasure_id: str, entry: dict[str, Any]) -> None:
        """Append one planned step (an agent and its per-file counts) durably.

        Call it under :meth:`locked`; a torn last line a crash left is cut first.
        """
        self._progress_log(erasure_id).append(entry)

    def log_progress_lines(self, erasure_id: str, entries: list[dict[str, Any]]) -> None:
        """:meth:`log_progress` of several steps, with one write and one fsync."""
        self._progress_log(erasure_id).extend(entries)

    def progress(self, erasure_id: str) -> list[dict[str, Any]]:
        """Every complete progress line, oldest first (a torn last line from a crash is not one).

        Raises:
            StorageError: a complete line is damaged (it is reported, not skipped).
        """
        return list(self._progress_log(erasure_id).read())

    def drop_progress(self, erasure_id: str) -> None:
        self._progress_log(erasure_id).delete()

    # -- scheduled erasures ----------------------------------------------

    def schedule(self, item: ScheduledErasure) -> None:
        self._scheduled_erasure(item.id).write(item.to_dict())

    def scheduled(self) -> list[ScheduledErasure]:
        found = []
        for name in sorted(self.place.names(SCHEDULED_DIR, ".json")):
            document = self._scheduled_erasure(name[: -len(".json")])
            data = document.read()
            if data is not None:
                found.append(
                    ScheduledErasure.from_dict(data, f"scheduled erasure {document.where}")
                )
        return found

    def unschedule(self, erasure_id: str) -> bool:
        return self._scheduled_erasure(erasure_id).delete()

    # -- files -------------------------------------------------------------

    def _tombstone(self, erasure_id: str, lock: RecordLock | None = None) -> JsonDocument:
        return self._document(f"{TOMBSTONES_DIR}/{erasure_id}.json", lock)

    def _scheduled_erasure(self, erasure_id: str) -> JsonDocument:
        return self._document(f"{SCHEDULED_DIR}/{erasure_id}.json", None)

    def _document(self, name: str, lock: RecordLock | None) -> JsonDocument:
        return JsonDocument(
            name,
            place=self.place,
            what="erasure record",
            version=TOMBSTONE_FORMAT_VERSION,
            lock=lock,
            encode=_encode,
            sealing=self.sealing,
            purpose=ERASURE_PURPOSE,
            context=name,
        )

    def _progress_log(
        self, erasure_id: str, lock: RecordLock | None = None
    ) -> JsonlLog[dict[str, Any]]:
        name = f"{TOMBSTONES_DIR}/.{erasure_id}{PROGRESS_SUFFIX}"
        return JsonlLog(
            name,
            place=self.place,
            load=_entry,
            what="erasure progress",
            lock=lock,
            sealing=self.sealing,
            purpose=ERASURE_PURPOSE,
            context=name,
        )


def _encode(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True)


def _entry(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A progress line, the type of each field it has checked (StorageError naming it).

    A line's fields are read when the erasure's receipt is built; a field of
    the wrong type is reported here, with the file and the line.
    """
    fields = Fields(data, where)
    fields.text("agent")
    fields.optional_text("partition")
    for item in fields.records("files"):
        _present(item, texts=("agent", "file"), counts=_FILE_COUNTS, flags=("deleted",))
    for item in fields.records("blocked"):
        _present(item, texts=("agent", "file"), counts=("summaries",), flags=())
        item.texts("holds")
    return data


_FILE_COUNTS = ("records", "summaries", "bytes_removed", "bytes_written")


def _present(
    fields: Fields, *, texts: tuple[str, ...], counts: tuple[str, ...], flags: tuple[str, ...]
) -> None:
    for name in texts:
        if name in fields.data:
            fields.text(name)
    for name in counts:
        if name in fields.data:
            fields.count(name)
    for name in flags:
        if name in fields.data:
            fields.flag(name)
