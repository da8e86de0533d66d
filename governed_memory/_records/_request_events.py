"""A data-subject request as the register's events leave it: the values, and the fold.

The register (``_requests``) stores events; :func:`fold_events` turns them,
oldest first, into one :class:`SubjectRequest` per request. Pure: no file,
no clock. A record that does not fit (a wrong-typed field, an event of a
request never opened) is a damaged register and raises a
:class:`~governed_memory.StorageError` naming the line and the fix.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from .._errors import ConfigurationError, StorageError
from ._deadlines import internal_due, legal_due
from ._fields import Fields

__all__ = [
    "EVENTS",
    "KINDS",
    "OUTCOMES",
    "SOURCES",
    "Blocker",
    "Closing",
    "Extension",
    "SubjectRequest",
    "Verification",
    "fold_events",
    "parse_day",
]

KINDS = ("access", "rectification", "erasure", "restriction", "objection")
"""Art. 15, 16, 17, 18 and 21."""
OUTCOMES = ("answered", "partial", "refused", "withdrawn")
"""How a request ends: done; done in part (a hold kept something); refused
(Art. 12(4): the reasons and the right to complain are told); withdrawn by the person."""
SOURCES = ("request", "consent-withdrawal", "erasure-blocked")
"""Who opened it: the office (a person asked), or the library (a follow-up)."""
EVENTS = ("open", "verify", "extend", "block", "close")
REPAIR = (
    "restore requests.jsonl from a backup taken before the edit; the register is the "
    "privacy office's record and is never rebuilt from elsewhere"
)


@dataclass(frozen=True)
class Verification:
    """Who verified the person's identity, how (e.g. ``id document``), and when."""

    by: str
    method: str
    at: str


@dataclass(frozen=True)
class Extension:
    """An Art. 12(3) extension: by how many further months in all, why, who, and when told."""

    months: int
    reason: str
    by: str
    at: str
    told: str
    """The day the person was told of the extension and its reasons (within the first month)."""


@dataclass(frozen=True)
class Blocker:
    """Why the request could not be carried out yet (a hold, an unreachable file)."""

    at: str
    reason: str
    erasure_id: str | None = None
    holds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Closing:
    """How the request ended, and the receipt that proves it (when one does)."""

    at: str
    by: str
    outcome: str
    receipt: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class SubjectRequest:
    """One request, as its events leave it. Days are ISO dates, times ISO 8601 with offset."""

    id: str
    subject: str
    kind: str
    received: str
    opened_at: str
    opened_by: str
    source: str = "request"
    channel: str | None = None
    reference: str | None = None
    erasure_id: str | None = None
    note: str | None = None
    """Why the library opened it (a follow-up), e.g. the consent withdrawal that asked."""
    verification: Verification | None = None
    extension: Extension | None = None
    blockers: tuple[Blocker, ...] = ()
    closing: Closing | None = None

    @property
    def open(self) -> bool:
        return self.closing is None

    @property
    def received_day(self) -> _dt.date:
        return _dt.date.fromisoformat(self.received)

    @property
    def extension_months(self) -> int:
        return self.extension.months if self.extension is not None else 0

    @property
    def first_due(self) -> _dt.date:
        """The end of the first month: the last day to answer, or to extend and say why."""
        return legal_due(self.received_day)

    @property
    def due(self) -> _dt.date:
        """The legal due date, extension included (``_deadlines``)."""
        return legal_due(self.received_day, self.extension_months)

    def internal_due(self, internal: _dt.timedelta | None) -> _dt.date | None:
        """The office's own deadline under ``[requests] internal_deadline`` (None: not set)."""
        return internal_due(self.received_day, internal, self.extension_months)

    def deadline(self, internal: _dt.timedelta | None) -> _dt.date:
        """The date the office works to: the internal deadline when set, else the legal one."""
        return self.internal_due(internal) or self.due


def parse_day(
    name: str,
    value: object,
    *,
    today: _dt.date | None = None,
    fix: str = "a request is entered once it has arrived: give the day it was received",
) -> _dt.date:
    """A day given as ``YYYY-MM-DD`` (a date or datetime is taken as its day).

    Raises:
        ConfigurationError: not such a date, or later than ``today`` (naming value, rule, fix).
    """
    if isinstance(value, _dt.datetime):
        day = value.date()
    elif isinstance(value, _dt.date):
        day = value
    else:
        try:
            day = _dt.date.fromisoformat(str(value).strip())
        except ValueError:
            raise ConfigurationError(
                f"{name} {value!r} is not a date; write it as YYYY-MM-DD, e.g. 2026-11-30"
            ) from None
    if today is not None and day > today:
        raise ConfigurationError(
            f"{name} {day.isoformat()} is in the future (today is {today.isoformat()}); {fix}"
        )
    return day


def fold_events(records: Iterable[Any]) -> dict[str, SubjectRequest]:
    """The requests the events leave, in opening order (StorageError naming a damaged record)."""
    found: dict[str, SubjectRequest] = {}
    for record in records:
        where = str(record.get("_where", "request register"))
        fields = Fields(record, where)
        event = fields.text("event", choices=EVENTS)
        request_id = fields.text("request")
        at, actor = fields.time("at"), fields.text("actor")
        if event == "open":
            found[request_id] = SubjectRequest(
                id=request_id,
                subject=fields.text("subject"),
                kind=fields.text("kind", choices=KINDS),
                received=fields.text("received"),
                opened_at=at,
                opened_by=actor,
                source=fields.text("source", choices=SOURCES),
                channel=fields.optional_text("channel"),
                reference=fields.optional_text("reference"),
                erasure_id=fields.optional_text("erasure_id"),
                note=fields.optional_text("reason"),
            )
            continue
        request = found.get(request_id)
        if request is None:
            raise StorageError(
                f"{where}: a {event!r} event of request {request_id!r}, which was never "
                f"opened; the register is damaged or was edited: {REPAIR}"
            )
        if event == "verify":
            done = Verification(actor, fields.text("method"), fields.time("verified_at"))
            request = replace(request, verification=done)
        elif event == "extend":
            months = fields.count("months")
            extension = Extension(months, fields.text("reason"), actor, at, fields.text("told"))
            request = replace(request, extension=extension)
        elif event == "block":
            blocker = Blocker(
                at,
                fields.text("reason"),
                fields.optional_text("erasure_id"),
                fields.texts("holds"),
            )
            request = replace(request, blockers=(*request.blockers, blocker))
        else:
            closing = Closing(
                at,
                actor,
                fields.text("outcome", choices=OUTCOMES),
                fields.optional_text("receipt"),
                fields.optional_text("reason"),
            )
            request = replace(request, closing=closing)
        found[request_id] = request
    return found
