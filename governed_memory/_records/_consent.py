"""The consent registry: who agreed to what, when, and under which policy.

One append-only JSON Lines file, ``<workspace>/.governed_memory/consent.jsonl``,
holds every grant and withdrawal ever made (the proof a regulator asks for).
The current state of a (subject, purpose) pair is its latest event.

The log is a chained :class:`~._jsonl.JsonlLog` (format version 2 on every
line written by this release; see ``_chain``): each record carries its
sequence number and the link of the record before it, so a line replayed
(an old grant copied after a withdrawal), swapped, or deleted from the
middle makes every query raise a :class:`StorageError` naming the line:
a decision that needs consent fails closed, never reads a tampered log as
granted. Under encryption at rest the chain is sealed with each record and
cannot be forged without the master key; in plaintext it catches copies,
moves and deletions, not a forger who rewrites the fields too (docs/consent.md).
Lines of version 1, written before the chain, still read as an unchained
prefix. Unchanged otherwise:

* A writer takes an exclusive ``flock`` on ``consent.lock`` beside the log,
  repairs a torn last line a crashed writer may have left, appends one
  complete line and fsyncs before returning. An acknowledged grant or
  withdrawal survives a power cut.
* Readers take no lock. They only consume complete lines (ending in ``\\n``),
  so a half-written line is invisible until it is complete.
* Every query first ``stat``s the log: unchanged (inode, size, mtime) means the
  cached state is current; a larger file of the same inode is read from the
  last offset only. So the consent gate re-checks on every write for the
  price of one ``stat``, and a withdrawal made by another process takes
  effect at that process's next write.

Retention and the key operations never touch the file: they list the stored
records (:meth:`ConsentRegistry.records`), remove expired ones
(:meth:`ConsentRegistry.remove`) and convert the stored form
(:meth:`ConsentRegistry.rewrite`) through the registry, under its lock.

Under encryption at rest (``sealing`` given) each line is a sealed envelope
(see ``_sealing``): the subject, purpose, actor and policy are never on disk
in plaintext; everything above holds unchanged, line for line.

Not safe on network filesystems with weak flock/append semantics (NFS, SMB).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import FileLock
from .._crypto import CONSENT_PURPOSE, RecordSealing
from .._errors import ConfigurationError, GovernedMemoryError, StorageError
from ._chain import is_note
from ._fields import Fields
from ._jsonl import JsonlLog, encode_line
from ._place import as_place, file_lock
from ._text import validate_text
from ._version import check_version

if TYPE_CHECKING:
    from .._protocols import RecordLock, RecordPlace, WriteGuard

__all__ = [
    "CONSENT_FORMAT_VERSION",
    "ConsentAction",
    "ConsentEvent",
    "ConsentRecord",
    "ConsentRegistry",
    "ConsentRemoval",
    "validate_subject_id",
]

CONSENT_LOG = "consent.jsonl"
CONSENT_LOCK = "consent.lock"
CONSENT_FORMAT_VERSION = 2
LEGACY_FORMAT_VERSION = 1  # before the record chain: read as an unchained prefix
_REPAIR = (
    "restore consent.jsonl from a backup taken before the edit; or, if every line in it is "
    "genuine, move it aside and record each subject's current consent again with "
    "`governed-memory consent grant` / `withdraw`"
)

_SUBJECT_MAX = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def validate_subject_id(subject_id: object) -> str:
    """Return ``subject_id`` if it can identify a data subject.

    Raises:
        ConfigurationError: not a non-empty single-line string of at most 256
            characters, or not UTF-8 text (a lone surrogate, a NUL).
    """
    if isinstance(subject_id, str):
        validate_text(
            "subject_id", subject_id, fix="use a stable pseudonymous identifier", nul=False
        )
    if not isinstance(subject_id, str) or not subject_id.strip():
        raise ConfigurationError(
            f"subject_id {subject_id!r} must be a non-empty string, e.g. a customer number"
        )
    if len(subject_id) > _SUBJECT_MAX or _CONTROL.search(subject_id):
        raise ConfigurationError(
            f"subject_id {subject_id[:40]!r}... must be at most {_SUBJECT_MAX} characters "
            "without control characters; use a stable pseudonymous identifier"
        )
    return subject_id


class ConsentAction(StrEnum):
    """What a consent event does."""

    GRANT = "grant"
    WITHDRAW = "withdraw"


@dataclass(frozen=True)
class ConsentEvent:
    """One grant or withdrawal, as stored (one JSON line).

    ``at`` is timezone-aware ISO 8601 (the host's offset), so records from
    hosts in different zones compare correctly.
    """

    subject: str
    purpose: str
    action: ConsentAction
    at: str
    actor: str
    policy_id: str
    policy_version: str

    @property
    def granted(self) -> bool:
        return self.action is ConsentAction.GRANT

    def to_dict(self) -> dict[str, Any]:
        """The stored fields, without the format version."""
        data = asdict(self)
        data["action"] = self.action.value
        return data

    def to_json(self) -> str:
        """The event as one unchained line (format version 1, without its newline).

        The log stores version 2: these fields plus its chain (``seq``, ``prev``).
        """
        return encode_line({"v": LEGACY_FORMAT_VERSION, **self.to_dict()}).decode("utf-8")

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> ConsentEvent:
        """The event of one stored line's JSON object (``where`` names it in messages).

        Raises:
            StorageError: a field missing or of the wrong type, naming the line and the field.
        """
        fields = Fields(data, where)
        return cls(
            subject=fields.text("subject"),
            purpose=fields.text("purpose"),
            action=ConsentAction(fields.text("action", choices=[a.value for a in ConsentAction])),
            at=fields.time("at"),
            actor=fields.text("actor"),
            policy_id=fields.version_text("policy_id"),
            policy_version=fields.version_text("policy_version"),
        )

    @classmethod
    def from_json(cls, line: str, where: str) -> ConsentEvent:
        """The event of one stored plaintext line."""
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise StorageError(
                f"{where} is not a consent record ({exc}); the log is damaged"
            ) from exc
        if isinstance(data, dict) and data.get("v") == LEGACY_FORMAT_VERSION:
            return cls.from_dict(check_version(data, LEGACY_FORMAT_VERSION, where), where)
        return cls.from_dict(check_version(data, CONSENT_FORMAT_VERSION, where), where)


@dataclass(frozen=True)
class ConsentRecord:
    """One stored line of the log, as retention sees it.

    ``id`` names the line in a purge plan (a digest of its stored bytes);
    ``size`` counts its bytes with the newline; ``event`` is None when the
    line cannot be read (damaged, or sealed and unopenable): such a line is
    never removed.
    """

    id: str
    size: int
    event: ConsentEvent | None


@dataclass(frozen=True)
class ConsentRemoval:
    """What :meth:`ConsentRegistry.remove` did: ids removed, and ids kept by ``keep``.

    An id in neither was not in the log (removed meanwhile).
    """

    removed: frozenset[str]
    kept: frozenset[str]


def record_id(stored: bytes) -> str:
    """How a stored line is named in a purge plan: a digest of its bytes."""
    return hashlib.sha256(stored).hexdigest()[:32]


class ConsentRegistry:
    """Durable per-subject, per-purpose consent, shared by every process on a workspace.

    Args:
        folder: the governance folder holding the log (created 0700 on the
            first grant or withdrawal, never by a read), or the place holding it.
        sealing: seal each record (encryption at rest); None writes and
            reads the plaintext log.
    """

    def __init__(self, folder: Path | RecordPlace, *, sealing: RecordSealing | None = None) -> None:
        place = as_place(folder)
        self.sealing = sealing
        self._log: JsonlLog[ConsentEvent] = JsonlLog(
            CONSENT_LOG,
            place=place,
            load=ConsentEvent.from_dict,
            what="consent log",
            lock=place.lock(CONSENT_LOCK),
            version=CONSENT_FORMAT_VERSION,
            sealing=sealing,
            purpose=CONSENT_PURPOSE,
            context=CONSENT_LOG,
            chained=True,
            legacy=LEGACY_FORMAT_VERSION,
            repair=_REPAIR,
        )
        self._mutex = threading.RLock()
        self._state: dict[tuple[str, str], ConsentEvent] = {}
        self._seen = 0  # events of the log already in _state
        self._generation = 0  # the log's generation _state was built from

    @property
    def path(self) -> Path:
        """The JSON Lines log."""
        return self._log.path

    @property
    def where(self) -> str:
        """How messages name the log (the file place: its path)."""
        return self._log.where

    @property
    def record_lock(self) -> RecordLock:
        """The lock every writer of the log holds (a key operation converting it takes it too)."""
        assert self._log.lock is not None  # the registry always builds its log with one
        return self._log.lock

    @property
    def lock(self) -> FileLock:
        """:attr:`record_lock` as the lock file it is in the file place."""
        return file_lock(self.record_lock, "consent log")

    # -- reading -------------------------------------------------------

    def _events(self) -> Sequence[ConsentEvent]:
        """Every event, with the latest-per-pair state brought up to date (hold the mutex)."""
        events = self._log.read()
        return self._apply(events, self._log.generation)

    def _apply(self, events: Sequence[ConsentEvent], generation: int) -> Sequence[ConsentEvent]:
        """Bring the latest-per-pair state up to ``events`` read at ``generation`` (hold the mutex)."""
        if generation != self._generation:
            self._state, self._seen, self._generation = {}, 0, generation
        if len(events) != self._seen:
            for event in events[self._seen :]:
                self._state[(event.subject, event.purpose)] = event
            self._seen = len(events)
        return events

    def latest(self, subject_id: str, purpose: str) -> ConsentEvent | None:
        """The latest event for (subject, purpose), or None when there was none."""
        with self._mutex:
            self._events()
            return self._state.get((subject_id, purpose))

    def is_granted(self, subject_id: str, purpose: str) -> bool:
        """Whether ``subject_id`` currently consents to ``purpose``."""
        event = self.latest(subject_id, purpose)
        return event is not None and event.granted

    def granted_guard(self, subject_id: str, purpose: str) -> WriteGuard | None:
        """A write's guard for ``subject_id``'s ``purpose`` consent as last read, without reading.

        The guard is true while the log is unchanged since that read (see
        ``WriteGuard``): a write that checks it in its own transaction is
        allowed exactly as :meth:`is_granted` would allow it then. None when
        the consent read last is not a grant, when nothing was read yet, or in
        a place without guards (the file place): call :meth:`is_granted`.
        """
        with self._mutex:
            events, generation, guard = self._log.cached()
            if guard is None:
                return None
            self._apply(events, generation)
            event = self._state.get((subject_id, purpose))
            return guard if event is not None and event.granted else None

    def status(self, subject_id: str) -> dict[str, ConsentEvent]:
        """The latest event per purpose for one subject."""
        with self._mutex:
            self._events()
            return {p: e for (s, p), e in self._state.items() if s == subject_id}

    def history(self, subject_id: str | None = None) -> list[ConsentEvent]:
        """Every event, oldest first (only ``subject_id``'s when given)."""
        with self._mutex:
            events = self._events()
            return [e for e in events if subject_id is None or e.subject == subject_id]

    def subjects(self) -> list[str]:
        """Every subject that has a consent record, sorted."""
        with self._mutex:
            self._events()
            return sorted({s for s, _ in self._state})

    def records(self) -> list[ConsentRecord]:
        """Every stored line, oldest first, read now; an unreadable one has no event.

        Unlike the queries above this never fails on a damaged line: retention
        lists the log to age its records, and keeps what it cannot read.
        """
        found = []
        for number, stored in enumerate(self._log.stored_lines(), start=1):
            where = f"consent log {self.where} (line {number})"
            try:
                data = self._log.parse(stored, where)
            except (GovernedMemoryError, ValueError, OSError):
                data = None  # damaged, sealed and unopenable, or of another version
            if data is not None and is_note(data):
                continue  # the chain's note of removed records: no record, nothing to age
            event = self._event(data, where) if data is not None else None
            found.append(ConsentRecord(record_id(stored), len(stored) + 1, event))
        return found

    @staticmethod
    def _event(data: dict[str, Any], where: str) -> ConsentEvent | None:
        try:
            return ConsentEvent.from_dict(data, where)
        except (GovernedMemoryError, ValueError):
            return None

    def _readable(self, stored: bytes, number: int) -> ConsentEvent | None:
        where = f"consent log {self.where} (line {number})"
        try:
            return ConsentEvent.from_dict(self._log.parse(stored, where), where)
        except (GovernedMemoryError, ValueError, OSError):
            return None  # damaged, sealed and unopenable, or of another version

    # -- writing -------------------------------------------------------

    def record(self, event: ConsentEvent) -> None:
        """Append ``event`` durably (fsynced before returning).

        Raises:
            StorageError: the log could not be written; nothing was recorded.
        """
        validate_subject_id(event.subject)
        self._log.append(event.to_dict())

    def remove(
        self,
        ids: Collection[str],
        *,
        keep: Callable[[ConsentEvent | None], bool] | None = None,
    ) -> ConsentRemoval:
        """Remove the stored lines named by ``ids`` (see :meth:`records`) in one atomic rewrite.

        Runs under the writers' lock, so no grant or withdrawal is lost.

        Args:
            ids: the records to remove.
            keep: asked, under the lock, about each record found; True keeps
                it (a legal hold placed after it was planned).
        """
        wanted = set(ids)
        removed: set[str] = set()
        kept: set[str] = set()

        def drop(stored: bytes) -> bool:
            digest = record_id(stored)
            if digest not in wanted:
                return False
            if keep is not None and keep(self._readable(stored, 0)):
                kept.add(digest)
                return False
            removed.add(digest)
            return True

        with self._mutex:
            self._log.remove(drop)
        return ConsentRemoval(frozenset(removed), frozenset(kept))

    def rewrite(self, convert: Callable[[bytes], bytes]) -> bool:
        """Replace each stored line by ``convert(line)`` in one atomic rewrite, under the lock.

        For converting the stored form (sealing, unsealing, re-sealing under a
        new key generation): ``convert`` sees the line as stored. Returns
        whether the file changed.
        """
        with self._mutex:
            return self._log.rewrite(convert)

    def make_event(
        self,
        subject_id: str,
        purpose: str,
        action: ConsentAction,
        *,
        at: _dt.datetime,
        actor: str,
        policy_id: str,
        policy_version: str,
    ) -> ConsentEvent:
        """Build a validated event (the time is made timezone-aware)."""
        if isinstance(actor, str):
            validate_text("actor", actor, fix="give a name such as 'dpo@example.org'", nul=False)
        if isinstance(purpose, str):
            validate_text("purpose", purpose, fix="use a purpose the policy names")
        if not actor or _CONTROL.search(actor):
            raise ConfigurationError(
                f"actor {actor!r} must be a non-empty single-line name, e.g. 'dpo@example.org'"
            )
        aware = at if at.tzinfo is not None else at.astimezone()
        return ConsentEvent(
            subject=validate_subject_id(subject_id),
            purpose=purpose,
            action=action,
            at=aware.isoformat(),
            actor=actor,
            policy_id=policy_id,
            policy_version=policy_version,
        )
