"""The request register: every data-subject request, from arrival to closing (GDPR Art. 12).

The privacy office's record of each request a person made (access,
rectification, erasure, restriction, objection): when it arrived and by
which channel, who verified the person's identity and how, when it is due
(``_deadlines``: one month from receipt, Art. 12(3)), whether and why it was
extended, and how it was closed: the receipt (an erasure's, an export's, a
rectification's) that answered it, or the reasons for a refusal. Erasures
that could not be done (a legal hold, an unreachable file) and erasures a
consent withdrawal started are entered here too, so nothing is left to a
warning on stderr.

Storage: one append-only, chained :class:`~._jsonl.JsonlLog` of *events*,
``<governance>/requests.jsonl`` (format version 1): ``open``, ``verify``,
``extend``, ``block`` and ``close``, each naming its request, its time and
its actor. A request's state is the fold of its events, so the register
keeps its own history, and the chain (see ``_chain``) makes a line copied,
moved or deleted from the middle an error naming the line. A writer takes
an exclusive ``flock`` on ``requests.lock`` across reading the state,
checking the change (closing twice is refused) and appending the event; the
append is fsynced before it returns, and a line torn by a crash is never
read and is cut by the next writer. Readers take no lock.

Under encryption at rest (``sealing`` given) each line is a sealed envelope
under the ``requests`` purpose key: the subject id (the register keeps it:
it is the office's record of whose request it is), the channel, the
reference, the reasons and the actors are never on disk in plaintext.

The storage seam: the register needs only :class:`~governed_memory._protocols.RecordLog`
(``read``, ``append``) and a lock that excludes its other writers; a
database backend passes both (``log=``, ``lock=``): an append-only table and
a row or advisory lock. Not safe on network filesystems (NFS, SMB).
"""

from __future__ import annotations

import datetime as _dt
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar

from .._base import Clock, FileLock, SystemClock
from .._crypto import REQUESTS_PURPOSE, RecordSealing
from .._errors import ConfigurationError, NotFoundError, StorageError
from .._protocols import RecordLog, RecordPlace
from ._consent import validate_subject_id
from ._deadlines import MAX_EXTENSION_MONTHS
from ._jsonl import JsonlLog
from ._place import as_place, file_lock
from ._request_events import (
    KINDS,
    OUTCOMES,
    REPAIR,
    SOURCES,
    Blocker,
    Closing,
    Extension,
    SubjectRequest,
    Verification,
    fold_events,
    parse_day,
)
from ._text import required_text

__all__ = [
    "KINDS",
    "OUTCOMES",
    "REQUESTS_FORMAT_VERSION",
    "REQUESTS_LOCK",
    "REQUESTS_LOG",
    "Blocker",
    "Closing",
    "Extension",
    "RequestRegister",
    "SubjectRequest",
    "Verification",
    "parse_day",
]

REQUESTS_LOG = "requests.jsonl"
REQUESTS_LOCK = "requests.lock"
REQUESTS_FORMAT_VERSION = 1
RequestEvent = Callable[[str, Mapping[str, Any]], None]
"""Told ``(audit event name, attributes)`` after each durable change."""


def _optional(name: str, value: object, *, example: str) -> str | None:
    return None if value is None else required_text(name, value, example=example)


def _choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigurationError(
            f"{name} {value!r} is not one of {', '.join(choices)}; give one of them"
        )
    assert isinstance(value, str)
    return value


class RequestRegister:
    """The data-subject requests of one workspace, shared by every process on it.

    Args:
        governance_dir: folder holding ``requests.jsonl`` (created 0700 by
            the first change, never by a read), or the record place holding it.
        clock: the time of each change (default: the system clock).
        id_factory: makes request ids (default ``req-<YYYYMMDD>-<6 hex digits>``
            from the day of receipt).
        on_event: told ``(audit event, attributes)`` after each durable change.
        sealing: seal each record (encryption at rest); None keeps plaintext.
        log: the record log to use instead of the file (a database backend).
        lock: excludes the register's other writers across a read and an
            append (with ``log``; default: an ``flock`` on ``requests.lock``).
    """

    KINDS: ClassVar[tuple[str, ...]] = KINDS
    """The kinds of request (GDPR Art. 15, 16, 17, 18, 21), for forms that offer them."""
    OUTCOMES: ClassVar[tuple[str, ...]] = OUTCOMES
    """How a request can be closed."""

    def __init__(
        self,
        governance_dir: Path | RecordPlace,
        *,
        clock: Clock | None = None,
        id_factory: Callable[[_dt.date], str] | None = None,
        on_event: RequestEvent | None = None,
        sealing: RecordSealing | None = None,
        log: RecordLog | None = None,
        lock: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        place = as_place(governance_dir)
        self.sealing = sealing
        self.clock: Clock = clock or SystemClock()
        self._new_id = id_factory or (
            lambda day: f"req-{day.strftime('%Y%m%d')}-{secrets.token_hex(3)}"
        )
        self.on_event = on_event
        self.record_lock = place.lock(REQUESTS_LOCK)
        """Excludes the register's other writers across a read, a check and an append."""
        self.file: JsonlLog[dict[str, Any]] = JsonlLog(
            REQUESTS_LOG,
            place=place,
            load=lambda data, where: {**data, "_where": where},
            what="request register",
            lock=None,  # the register holds record_lock across its read, check and append
            version=REQUESTS_FORMAT_VERSION,
            sealing=sealing,
            purpose=REQUESTS_PURPOSE,
            context=REQUESTS_LOG,
            chained=True,
            repair=REPAIR,
        )
        self._log: RecordLog = log if log is not None else self.file
        self._locked = lock if lock is not None else self.record_lock.held
        self._mutex = threading.RLock()

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def where(self) -> str:
        """How messages name the register's log (the file place: its path)."""
        return self.file.where

    @property
    def lock(self) -> FileLock:
        """:attr:`record_lock` as the lock file it is in the file place."""
        return file_lock(self.record_lock, "request register")

    # -- reading -------------------------------------------------------

    def requests(self) -> list[SubjectRequest]:
        """Every request, in the order they were opened.

        Raises:
            StorageError: the register is damaged or was edited (names the line and the fix).
            SealedRecordError: it is sealed and no master key is configured.
        """
        with self._mutex:
            return list(fold_events(self._log.read()).values())

    def get(self, request_id: str) -> SubjectRequest:
        """The request ``request_id``.

        Raises:
            NotFoundError: no request has that id.
        """
        found = fold_events(self._log.read()).get(request_id)
        if found is None:
            raise NotFoundError(
                f"no request {request_id!r} in the register; `governed-memory requests list` "
                "shows the ids"
            )
        return found

    def require_open(self, request_id: str, verb: str) -> SubjectRequest:
        """The request ``request_id`` if it is open (``verb``: what was asked, for the message).

        Raises:
            NotFoundError: no such request. ConfigurationError: it is closed.
        """
        return _open_one(fold_events(self._log.read()), request_id, verb)

    # -- writing -------------------------------------------------------

    def _now(self) -> str:
        now = self.clock.now()
        return (now if now.tzinfo is not None else now.astimezone()).isoformat()

    def today(self) -> _dt.date:
        """The clock's day, in local time (the day deadlines are counted against)."""
        now = self.clock.now()
        return (now if now.tzinfo is not None else now.astimezone()).date()

    @contextmanager
    def _change(self) -> Iterator[dict[str, SubjectRequest]]:
        """The requests as stored, read under the writers' lock held for the block."""
        with self._mutex, self._locked():
            yield fold_events(self._log.read())

    def _append(self, event: str, request_id: str, actor: str, **body: Any) -> None:
        record = {"event": event, "request": request_id, "at": self._now(), "actor": actor}
        record.update({k: v for k, v in body.items() if v is not None})
        self._log.append(record)

    def open_request(
        self,
        *,
        subject: str,
        kind: str,
        received: object,
        actor: str,
        channel: str | None = None,
        reference: str | None = None,
        source: str = "request",
        erasure_id: str | None = None,
        reason: str | None = None,
    ) -> SubjectRequest:
        """Enter a request that arrived on ``received``; durable when it returns.

        Raises:
            ConfigurationError: an unknown kind, a date that is not one or is in
                the future, a blank actor, a subject id no record can store.
        """
        subject = validate_subject_id(subject)
        kind = _choice("kind", kind, KINDS)
        day = parse_day("received date", received, today=self.today())
        actor = required_text("actor", actor, example="dpo@example.org")
        body = {
            "subject": subject,
            "kind": kind,
            "received": day.isoformat(),
            "source": _choice("source", source, SOURCES),
            "channel": _optional("channel", channel, example="email"),
            "reference": _optional("reference", reference, example="DSR-2026-311"),
            "erasure_id": erasure_id,
            "reason": _optional("reason", reason, example="blocked by a legal hold"),
        }
        with self._change() as current:
            request_id = self._new_id(day)
            if request_id in current:
                raise StorageError(f"request id {request_id!r} exists; the id factory repeats")
            self._append("open", request_id, actor, **body)
            request = fold_events(self._log.read())[request_id]
        self._emit("request.open", request, actor, source=request.source)
        return request

    def verify(self, request_id: str, *, by: str, method: str, at: object = None) -> SubjectRequest:
        """Record who verified the person's identity, how, and when (default: now).

        Raises:
            NotFoundError: no such request. ConfigurationError: it is closed, or bad input.
        """
        by = required_text("verified by", by, example="dpo@example.org")
        method = required_text("verification method", method, example="id document checked")
        when = self._now() if at is None else _time("verification time", at, self.clock)
        with self._change() as current:
            request = _open_one(current, request_id, "be verified")
            self._append("verify", request.id, by, method=method, verified_at=when)
        return self._done("request.verify", request_id, by)

    def extend(
        self, request_id: str, *, months: int, reason: str, actor: str, told: object = None
    ) -> SubjectRequest:
        """Extend the time limit to ``months`` further months in all (Art. 12(3)).

        ``told``: the day the person was told, with the reasons (default: today).
        The extension is decided, and the person told, within the first month.

        Raises:
            ConfigurationError: months outside 1..2 or not more than already
                granted, after the first month, a closed request, a blank reason.
        """
        if isinstance(months, bool) or not isinstance(months, int) or not 1 <= months <= 2:
            raise ConfigurationError(
                f"an extension of {months!r} months is outside 1..{MAX_EXTENSION_MONTHS}: "
                "Art. 12(3) allows at most two further months; give 1 or 2"
            )
        reason = required_text("extension reason", reason, example="complex: records in 14 agents")
        actor = required_text("actor", actor, example="dpo@example.org")
        today = self.today()
        told_day = parse_day(
            "told date",
            told if told is not None else today,
            today=today,
            fix="give the day the person was told of the extension and its reasons",
        )
        with self._change() as current:
            request = _open_one(current, request_id, "be extended")
            if months <= request.extension_months:
                raise ConfigurationError(
                    f"request {request_id} is already extended by {request.extension_months} "
                    f"months; give more months (at most {MAX_EXTENSION_MONTHS} in all)"
                )
            last = request.first_due
            if today > last:  # the person is told by the same day at the latest (told <= today)
                raise ConfigurationError(
                    f"request {request_id} was received {request.received}: an extension on "
                    f"{today.isoformat()} is after the first month, which ended {last}; "
                    "Art. 12(3) requires the person to be told of an extension and its "
                    "reasons within the first month. Answer the request now"
                )
            if told_day < request.received_day:
                raise ConfigurationError(
                    f"told date {told_day} is before the request was received "
                    f"({request.received}); give the day the person was told"
                )
            self._append(
                "extend", request.id, actor, months=months, reason=reason, told=str(told_day)
            )
        return self._done("request.extend", request_id, actor, months=months)

    def block(
        self,
        request_id: str,
        *,
        reason: str,
        actor: str,
        erasure_id: str | None = None,
        holds: tuple[str, ...] = (),
    ) -> SubjectRequest:
        """Note why the request cannot be carried out yet (it stays open)."""
        reason = required_text("reason", reason, example="blocked by legal hold hold-1a2b")
        with self._change() as current:
            request = _open_one(current, request_id, "be blocked")
            self._append(
                "block",
                request.id,
                required_text("actor", actor, example="scheduler"),
                reason=reason,
                erasure_id=erasure_id,
                holds=list(holds) or None,
            )
        return self._done("request.block", request_id, actor, erasure_id=erasure_id)

    def close(
        self,
        request_id: str,
        *,
        outcome: str,
        actor: str,
        receipt: str | None = None,
        reason: str | None = None,
    ) -> SubjectRequest:
        """Close the request: ``outcome``, the receipt that answered it, the reasons.

        The receipt's existence and fit are checked by the caller (the
        subject operations, which can read receipts); here the register's own rules:

        Raises:
            ConfigurationError: an unknown outcome; ``answered`` or ``partial``
                without identity verification; ``refused`` without reasons;
                ``partial`` without both; already closed (names when and by whom).
        """
        outcome = _choice("outcome", outcome, OUTCOMES)
        actor = required_text("actor", actor, example="dpo@example.org")
        note = _optional("reason", reason, example="manifestly unfounded: Art. 12(5)")
        if outcome in ("refused", "partial") and note is None:
            raise ConfigurationError(
                f"closing as {outcome} needs --reason: Art. 12(4) requires telling the person "
                "why, and of their right to complain to a supervisory authority"
            )
        with self._change() as current:
            request = _open_one(current, request_id, "be closed again")
            if outcome in ("answered", "partial") and request.verification is None:
                raise ConfigurationError(
                    f"request {request_id}'s identity is not verified; record it first with "
                    f"`governed-memory requests verify {request_id} --by WHO --method HOW`"
                )
            self._append("close", request.id, actor, outcome=outcome, receipt=receipt, reason=note)
        return self._done("request.close", request_id, actor, outcome=outcome, receipt_id=receipt)

    def _done(self, event: str, request_id: str, actor: str, **attrs: Any) -> SubjectRequest:
        request = self.get(request_id)
        self._emit(event, request, actor, **attrs)
        return request

    def _emit(self, event: str, request: SubjectRequest, actor: str, **attrs: Any) -> None:
        if self.on_event is not None:
            self.on_event(
                event,
                {
                    "request_id": request.id,
                    "subject": request.subject,
                    "kind": request.kind,
                    "actor": actor,
                    "due": request.due.isoformat(),
                    **attrs,
                },
            )


def _time(name: str, value: object, clock: Clock) -> str:
    if isinstance(value, _dt.datetime):
        when = value
    else:
        try:
            when = _dt.datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise ConfigurationError(
                f"{name} {value!r} is not a date or time; write YYYY-MM-DD or "
                "YYYY-MM-DDTHH:MM, e.g. 2026-11-30T14:05"
            ) from None
    aware = when if when.tzinfo is not None else when.astimezone()
    now = clock.now()
    if aware > (now if now.tzinfo is not None else now.astimezone()):
        raise ConfigurationError(
            f"{name} {aware.isoformat()} is in the future; give when it was done"
        )
    return aware.isoformat()


def _open_one(current: Mapping[str, SubjectRequest], request_id: str, verb: str) -> SubjectRequest:
    request = current.get(request_id)
    if request is None:
        raise NotFoundError(
            f"no request {request_id!r} in the register; `governed-memory requests list` "
            "shows the ids"
        )
    if request.closing is not None:
        c = request.closing
        raise ConfigurationError(
            f"request {request_id} was closed ({c.outcome}) at {c.at} by {c.by}, so it cannot "
            f"{verb}; open a new request if the person asked again"
        )
    return request
