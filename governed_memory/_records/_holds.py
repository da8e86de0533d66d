"""Legal holds: data that must not be deleted while a matter is open.

A hold names one agent (everything in its folder) or one data subject (every
memory file and archive holding a record of theirs, and their consent
records). Held data is skipped by retention purges and refused by erasure,
until the hold is released. Released holds stay in the file with who released
them and when: the history of holds is itself evidence.

Storage: ``<governance>/holds.json`` (format version 1), a
:class:`~._document.JsonDocument` replaced atomically (temp file, fsync,
rename, folder fsync) under an exclusive ``flock`` on ``holds.lock`` beside
it, so concurrent writers never lose a hold and a crash leaves the old file
or the new one. Readers take no lock and re-read the file only when its
``stat`` changed. Not safe on network filesystems (NFS, SMB).
Under encryption at rest (``sealing`` given) the file is one sealed envelope
(see ``_sealing``) around the same document: no subject, reason or actor is
on disk in plaintext.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import Clock, FileLock, SystemClock, validate_agent_name
from .._crypto import HOLDS_PURPOSE, RecordSealing
from .._errors import ConfigurationError, HoldNotFoundError, StorageError
from ._consent import validate_subject_id
from ._document import JsonDocument
from ._fields import Fields
from ._place import as_place, file_lock
from ._text import required_text

if TYPE_CHECKING:
    from .._protocols import RecordLock, RecordPlace

__all__ = [
    "HOLDS_FILE",
    "HOLDS_FORMAT_VERSION",
    "Hold",
    "HoldNotFoundError",
    "HoldRegistry",
    "HoldSet",
]

HOLDS_FILE = "holds.json"
HOLDS_LOCK = "holds.lock"
HOLDS_FORMAT_VERSION = 1

HoldEvent = Callable[[str, Mapping[str, Any]], None]
"""Called after a hold changes: ``(event name, attributes)``."""


@dataclass(frozen=True)
class Hold:
    """One legal hold, as stored. Times are timezone-aware ISO 8601."""

    id: str
    reason: str
    placed_by: str
    placed_at: str
    agent: str | None = None
    subject: str | None = None
    released_at: str | None = None
    released_by: str | None = None
    release_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.released_at is None

    @property
    def target(self) -> str:
        """``agent 'A'`` or ``subject 'S'``, for messages."""
        return f"agent {self.agent!r}" if self.agent is not None else f"subject {self.subject!r}"


@dataclass(frozen=True)
class HoldSet:
    """The active holds at one moment, indexed for lookups (a pure value).

    Maps each held agent and subject to the ids of the holds on it.
    """

    agents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    subjects: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, holds: Iterable[Hold]) -> HoldSet:
        agents: dict[str, tuple[str, ...]] = {}
        subjects: dict[str, tuple[str, ...]] = {}
        for hold in holds:
            if not hold.active:
                continue
            if hold.agent is not None:
                agents[hold.agent] = (*agents.get(hold.agent, ()), hold.id)
            if hold.subject is not None:
                subjects[hold.subject] = (*subjects.get(hold.subject, ()), hold.id)
        return cls(agents, subjects)

    @property
    def has_subject_holds(self) -> bool:
        """Whether any file must be read to know if it is held."""
        return bool(self.subjects)

    def for_agent(self, agent: str | None) -> tuple[str, ...]:
        return self.agents.get(agent, ()) if agent is not None else ()

    def for_subjects(self, subjects: Iterable[str]) -> tuple[str, ...]:
        found: list[str] = []
        for subject in subjects:
            found.extend(self.subjects.get(subject, ()))
        return tuple(found)

    def all_subject_holds(self) -> tuple[str, ...]:
        return tuple(i for ids in self.subjects.values() for i in ids)

    def keeping(self, agent: str | None, subjects: Iterable[str] | None) -> tuple[str, ...]:
        """The holds that keep an artefact of ``agent`` holding records of ``subjects``.

        ``subjects`` None means not known (unread, or encrypted without a
        reader): every subject hold then keeps it, since a hold errs on the
        side of keeping.
        """
        if not (self.agents or self.subjects):
            return ()
        ids = self.for_agent(agent)
        if self.has_subject_holds:
            if subjects is None:
                ids += self.all_subject_holds()
            else:
                ids += self.for_subjects(sorted(subjects))
        return ids


def _one_target(agent: str | None, subject: str | None) -> tuple[str | None, str | None]:
    if (agent is None) == (subject is None):
        raise ConfigurationError(
            f"a hold targets exactly one agent or one subject (got agent={agent!r}, "
            f"subject={subject!r}); pass one of them"
        )
    if agent is not None:
        return validate_agent_name(agent), None
    return None, validate_subject_id(subject)


class HoldRegistry:
    """The legal holds of one workspace, shared by every process on it.

    Args:
        governance_dir: folder holding ``holds.json`` (created 0700 by the
            first ``place``, never by a read), or the record place holding it.
        clock: time of placing and releasing (default: the system clock).
        id_factory: makes hold ids (default ``hold-<8 hex digits>``).
        on_event: told ``("hold.place" | "hold.release", attributes)`` after
            each durable change (the audit trail hooks in here).
        sealing: seal the file (encryption at rest); None keeps it plaintext.
    """

    def __init__(
        self,
        governance_dir: Path | RecordPlace,
        *,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
        on_event: HoldEvent | None = None,
        sealing: RecordSealing | None = None,
    ) -> None:
        self.sealing = sealing
        self._clock: Clock = clock or SystemClock()
        self._new_id = id_factory or (lambda: f"hold-{secrets.token_hex(4)}")
        self._on_event = on_event
        self._mutex = threading.RLock()
        place = as_place(governance_dir)
        self._document = JsonDocument(
            HOLDS_FILE,
            place=place,
            what="legal holds file",
            version=HOLDS_FORMAT_VERSION,
            lock=place.lock(HOLDS_LOCK),
            encode=_encode,
            sealing=sealing,
            purpose=HOLDS_PURPOSE,
            context=HOLDS_FILE,
        )
        self._parsed: tuple[dict[str, Any] | None, tuple[Hold, ...]] = (None, ())

    @property
    def path(self) -> Path:
        return self._document.path

    @property
    def where(self) -> str:
        """How messages name the holds file (the file place: its path)."""
        return self._document.where

    @property
    def record_lock(self) -> RecordLock:
        """The lock every writer of the holds file holds (a key operation converting it too)."""
        assert self._document.lock is not None  # the registry always builds its file with one
        return self._document.lock

    @property
    def lock(self) -> FileLock:
        """:attr:`record_lock` as the lock file it is in the file place."""
        return file_lock(self.record_lock, "legal holds file")

    @property
    def document(self) -> JsonDocument:
        """The holds file (for converting its stored form; see ``_keys``)."""
        return self._document

    # -- reading -------------------------------------------------------

    def _load(self) -> tuple[Hold, ...]:
        with self._mutex:
            document = self._document.read()
            if document is None:
                return ()
            if document is not self._parsed[0]:  # the file changed: parse its holds again
                self._parsed = (document, _holds_of(document, self.where))
            return self._parsed[1]

    def holds(self, *, include_released: bool = False) -> list[Hold]:
        """Holds, oldest first; only active ones unless ``include_released``."""
        return [h for h in self._load() if include_released or h.active]

    def active(self) -> HoldSet:
        """The active holds as an immutable, indexed value (for planners)."""
        return HoldSet.of(self._load())

    def holds_for(self, *, agent: str | None = None, subject: str | None = None) -> list[Hold]:
        """Active holds on ``agent`` or on ``subject`` (either matches)."""
        return [
            h
            for h in self._load()
            if h.active
            and (
                (agent is not None and h.agent == agent)
                or (subject is not None and h.subject == subject)
            )
        ]

    def is_held(self, *, agent: str | None = None, subject: str | None = None) -> bool:
        """Whether an active hold covers ``agent`` or ``subject``.

        Erasure asks this before removing anything: ``is_held(subject=S)`` for
        a subject request, and ``is_held(agent=A)`` for each agent it touches.
        """
        return bool(self.holds_for(agent=agent, subject=subject))

    # -- writing -------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[list[Hold]]:
        """Exclusive access; yields the current holds, saves them on exit."""
        with self._mutex, self._document.locked():
            holds = list(self._load())
            before = list(holds)
            yield holds
            if holds != before:
                self._document.write({"holds": [_to_json(h) for h in holds]})

    def _now(self) -> str:
        now = self._clock.now()
        return (now if now.tzinfo is not None else now.astimezone()).isoformat()

    def place(
        self,
        *,
        agent: str | None = None,
        subject: str | None = None,
        reason: str,
        actor: str,
    ) -> Hold:
        """Place a hold on one agent or one subject; durable when it returns.

        Raises:
            ConfigurationError: no or two targets, an invalid name, a blank reason or actor.
            StorageError: the hold could not be stored (nothing changed).
        """
        agent, subject = _one_target(agent, subject)
        hold = Hold(
            id=self._new_id(),
            reason=required_text("reason", reason, example="litigation 2026-114"),
            placed_by=required_text("actor", actor, example="legal@example.org"),
            placed_at=self._now(),
            agent=agent,
            subject=subject,
        )
        with self._locked() as holds:
            if any(h.id == hold.id for h in holds):
                raise StorageError(f"hold id {hold.id!r} already exists; the id factory repeats")
            holds.append(hold)
        self._emit("hold.place", hold)
        return hold

    def release(
        self,
        *,
        hold_id: str | None = None,
        agent: str | None = None,
        subject: str | None = None,
        actor: str,
        reason: str | None = None,
    ) -> Hold:
        """Release one active hold, chosen by id or by its agent or subject.

        Raises:
            HoldNotFoundError: no active hold matches.
            ConfigurationError: the agent or subject has several active holds
                and no ``hold_id`` says which one to release.
        """
        actor = required_text("actor", actor, example="legal@example.org")
        note = None if reason is None else required_text("reason", reason, example="case closed")
        if hold_id is None:
            agent, subject = _one_target(agent, subject)
        with self._locked() as holds:
            index = _choose(holds, hold_id, agent, subject)
            released = replace(
                holds[index], released_at=self._now(), released_by=actor, release_reason=note
            )
            holds[index] = released
        self._emit("hold.release", released)
        return released

    def _emit(self, event: str, hold: Hold) -> None:
        if self._on_event is not None:
            self._on_event(
                event,
                {
                    "hold_id": hold.id,
                    "agent": hold.agent,
                    "subject": hold.subject,
                    "actor": hold.released_by or hold.placed_by,
                },
            )


def _choose(holds: list[Hold], hold_id: str | None, agent: str | None, subject: str | None) -> int:
    matches = [
        i
        for i, h in enumerate(holds)
        if h.active
        and (hold_id is None or h.id == hold_id)
        and (agent is None or h.agent == agent)
        and (subject is None or h.subject == subject)
    ]
    if not matches:
        what = " and ".join(
            f"{name} {value!r}"
            for name, value in (("id", hold_id), ("agent", agent), ("subject", subject))
            if value is not None
        )
        raise HoldNotFoundError(
            f"no active hold with {what}; `governed-memory hold list` shows the active holds"
        )
    if len(matches) > 1:
        ids = ", ".join(holds[i].id for i in matches)
        raise ConfigurationError(
            f"{holds[matches[0]].target} has {len(matches)} active holds ({ids}); "
            "pass the id of the one to release"
        )
    return matches[0]


def _to_json(hold: Hold) -> dict[str, Any]:
    return {k: v for k, v in asdict(hold).items() if v is not None}


def _encode(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, ensure_ascii=False)


_HOLD_FIELDS = tuple(Hold.__dataclass_fields__)


def _holds_of(document: dict[str, Any], path: str) -> tuple[Hold, ...]:
    """The holds of the stored document; a wrong-typed or unknown field is named (StorageError)."""
    return tuple(
        _hold_of(item) for item in Fields(document, f"legal holds file {path}").records("holds")
    )


def _hold_of(fields: Fields) -> Hold:
    fields.only(_HOLD_FIELDS)
    return Hold(
        id=fields.text("id"),
        reason=fields.text("reason"),
        placed_by=fields.text("placed_by"),
        placed_at=fields.text("placed_at"),
        agent=fields.optional_text("agent"),
        subject=fields.optional_text("subject"),
        released_at=fields.optional_text("released_at"),
        released_by=fields.optional_text("released_by"),
        release_reason=fields.optional_text("release_reason"),
    )
