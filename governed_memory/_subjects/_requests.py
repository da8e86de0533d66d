"""Running a data-subject request through the register: open, verify, extend, close, report.

The register itself (``_records._requests``) stores the events and enforces
its own rules; this module adds what needs the rest of a workspace:

* every change is audited through the context's sink (``request.open``,
  ``request.verify``, ``request.extend``, ``request.block``,
  ``request.close``) with the actor; the subject is the entry's
  ``subject.hash``, never its id;
* closing checks the receipt that answered the request: it exists, it is
  of the kind the request asks for, it is about the same subject, and it is
  complete (a partial erasure closes the request as ``partial`` only);
* :func:`standing` says, as a pure function of the request, the day and
  the ``[requests]`` policy, whether a request is open, due soon, past the
  internal deadline or overdue;
* erasures the library could not finish (a legal hold, an unreachable file)
  or started itself (a consent withdrawal) enter the register as follow-ups
  (:func:`follow_up`), and an erasure that completes closes the open
  follow-ups of its subject with its receipt (:func:`settle`).

Receipts it looks up (:data:`RECEIPT_READERS`): erasure receipts (the
tombstone's id), access-export receipts (the export's id) and rectification
receipts (the rectification's id). An access request is answered by an
export, a rectification request by a rectification, an erasure request by an
erasure; restriction and objection requests close with ``--outcome`` and
``--reason``.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError, GovernedMemoryError, NotFoundError
from .._records import (
    COMPLETE,
    ErasureReceipt,
    ErasureScope,
    RequestRegister,
    SubjectRequest,
)
from ._context import SubjectContext, subject_context

if TYPE_CHECKING:
    from ._erasure import Target  # a Governance, a SubjectContext or a workspace folder

__all__ = [
    "RECEIPT_READERS",
    "FoundReceipt",
    "Standing",
    "close_request",
    "extend_request",
    "find_receipt",
    "follow_up",
    "open_request",
    "request_register",
    "settle",
    "standing",
    "standings",
    "stored_receipt",
    "subject_receipts",
    "verify_request",
]

logger = logging.getLogger("governed_memory")

ANSWERS = {"access": ("export",), "rectification": ("rectification",), "erasure": ("erasure",)}
"""Which kind of receipt answers which kind of request (restriction, objection: any, or none)."""
FOLLOW_UPS = ("consent-withdrawal", "erasure-blocked")


@dataclass(frozen=True)
class FoundReceipt:
    """A receipt a request can be closed with: its kind, whom it is about, its state.

    ``about`` answers whether the receipt is about a given subject id (a
    receipt that keeps the subject only as a keyed hash compares hashes);
    ``state`` is ``complete``, ``partial`` (``detail``: the holds) or ``pending``.
    """

    id: str
    kind: str
    about: Callable[[str], bool]
    state: str
    detail: str = ""
    document: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The receipt as stored (what :func:`~governed_memory.verify_receipt` checks); None while pending."""
    at: str | None = None
    """When it was completed (an export: written)."""


ReceiptReader = Callable[[SubjectContext, str], "FoundReceipt | None"]


def _erasure_receipt(ctx: SubjectContext, receipt_id: str) -> FoundReceipt | None:
    tombstone = ctx.tombstones().get(receipt_id)
    if tombstone is None:
        return None
    scope = tombstone.scope

    def about(subject: str) -> bool:  # an erasure of the subject everywhere, or in one agent
        return scope.subject == subject

    if tombstone.state != COMPLETE or tombstone.receipt is None:
        return FoundReceipt(tombstone.id, "erasure", about, "pending")
    receipt = ErasureReceipt.from_dict(tombstone.receipt)
    return FoundReceipt(
        receipt.id,
        "erasure",
        about,
        receipt.state,
        ", ".join(receipt.blocking_holds),
        document=dict(tombstone.receipt),
        at=receipt.completed_at,
    )


def _export_receipt(ctx: SubjectContext, receipt_id: str) -> FoundReceipt | None:
    from ._export import export_receipt

    receipt = export_receipt(ctx, receipt_id)
    if receipt is None:
        return None
    recorded, pseudonym = receipt.subject_hash, ctx.pseudonym

    def about(subject: str) -> bool:
        # The receipt names the subject by keyed hash only. Without an audit key
        # (default mode) it names nobody, and the officer's statement stands.
        if recorded is None or pseudonym is None:
            return receipt.agent is None
        return recorded == pseudonym("subject", subject)

    return FoundReceipt(
        receipt.id, "export", about, "complete", document=receipt.to_dict(), at=receipt.created_at
    )


def _rectification_receipt(ctx: SubjectContext, receipt_id: str) -> FoundReceipt | None:
    from .._records import RectificationReceipt, RectificationStore

    item = RectificationStore(ctx.governance_dir, sealing=ctx.sealing).get(receipt_id)
    if item is None:
        return None
    subject = item.subject

    def about(candidate: str) -> bool:
        return candidate == subject

    if item.pending or item.receipt is None:
        return FoundReceipt(item.id, "rectification", about, "pending")
    receipt = RectificationReceipt.from_dict(item.receipt)
    return FoundReceipt(
        receipt.id,
        "rectification",
        about,
        receipt.state,
        ", ".join(receipt.holds),
        document=dict(item.receipt),
        at=receipt.completed_at,
    )


RECEIPT_READERS: list[ReceiptReader] = [_erasure_receipt, _export_receipt, _rectification_receipt]
"""Look a receipt up by id, each kind in turn: erasure, access export, rectification."""


def request_register(target: Target) -> RequestRegister:
    """The workspace's register, auditing every change through the context's sink."""
    ctx = subject_context(target)
    return ctx.requests()


def open_request(
    target: Target,
    *,
    subject: str,
    kind: str,
    received: object,
    actor: str,
    channel: str | None = None,
    reference: str | None = None,
) -> SubjectRequest:
    """Enter a request that arrived on ``received`` (``YYYY-MM-DD``); see :class:`RequestRegister`."""
    return request_register(target).open_request(
        subject=subject,
        kind=kind,
        received=received,
        actor=actor,
        channel=channel,
        reference=reference,
    )


def verify_request(
    target: Target, request_id: str, *, by: str, method: str, at: object = None
) -> SubjectRequest:
    """Record who verified the person's identity, how and when."""
    return request_register(target).verify(request_id, by=by, method=method, at=at)


def extend_request(
    target: Target,
    request_id: str,
    *,
    months: int,
    reason: str,
    actor: str,
    told: object = None,
) -> SubjectRequest:
    """Extend the time limit by ``months`` (1 or 2) further months, within the first month."""
    return request_register(target).extend(
        request_id, months=months, reason=reason, actor=actor, told=told
    )


def stored_receipt(target: Target, receipt_id: str) -> FoundReceipt | None:
    """The receipt ``receipt_id`` (erasure, access export or rectification), or None.

    Its ``document`` is the receipt as stored, so ``verify_receipt(found.document,
    public_key)`` checks its signature (the console shows that check).
    """
    ctx = subject_context(target)
    for reader in RECEIPT_READERS:
        found = reader(ctx, receipt_id)
        if found is not None:
            return found
    return None


def subject_receipts(target: Target, subject: str) -> list[FoundReceipt]:
    """The completed receipts about ``subject``: erasures, rectifications, access exports.

    An export receipt names its subject only by keyed hash: without an audit
    key (default mode) it cannot be told whose it is and is left out here
    (:func:`stored_receipt` still finds it by id).
    """
    from ._export import export_receipts
    from ._rectify import rectification_receipts

    ctx = subject_context(target)
    pseudonym = ctx.pseudonym
    ids = [t.id for t in ctx.tombstones().all() if t.scope.subject == subject]
    ids += [r.id for r in rectification_receipts(ctx) if r.subject == subject]
    if pseudonym is not None:
        wanted = pseudonym("subject", subject)
        ids += [r.id for r in export_receipts(ctx) if r.subject_hash == wanted]
    found = [stored_receipt(ctx, i) for i in ids]
    return sorted(
        (f for f in found if f is not None and f.document is not None), key=lambda f: f.at or ""
    )


def find_receipt(ctx: SubjectContext, receipt_id: str) -> FoundReceipt:
    """The receipt ``receipt_id``, of whichever kind.

    Raises:
        NotFoundError: no reader knows it.
    """
    for reader in RECEIPT_READERS:
        found = reader(ctx, receipt_id)
        if found is not None:
            return found
    raise NotFoundError(
        f"no receipt {receipt_id!r} in the workspace; give the id of the erasure receipt "
        "(`governed-memory erasures list`) that answered the request"
    )


def close_request(
    target: Target,
    request_id: str,
    *,
    actor: str,
    receipt: str | None = None,
    outcome: str | None = None,
    reason: str | None = None,
) -> SubjectRequest:
    """Close a request with the receipt that answered it, or with an outcome and reasons.

    ``outcome`` defaults to ``answered`` with a receipt. Restriction and
    objection requests, and requests whose answer wrote no receipt, close as
    ``answered`` with ``reason`` saying what was done.

    Raises:
        NotFoundError: no such request, or no such receipt.
        ConfigurationError: the receipt is of another kind or subject, is
            pending or partial where ``answered`` was asked; a closed request; a
            refusal without reasons (see :meth:`RequestRegister.close`).
    """
    ctx = subject_context(target)
    register = ctx.requests()
    request = register.require_open(request_id, "be closed again")
    outcome = outcome or "answered"
    if receipt is not None:
        if outcome in ("refused", "withdrawn"):
            raise ConfigurationError(
                f"a request closed as {outcome} was not answered by a receipt; leave out "
                f"--receipt {receipt}, or close as answered"
            )
        _check_receipt(request, find_receipt(ctx, receipt), outcome)
    elif outcome in ("answered", "partial") and (request.kind in ANSWERS and reason is None):
        raise ConfigurationError(
            f"request {request_id} is an {request.kind} request, answered by an "
            f"{' or '.join(ANSWERS[request.kind])} receipt; give --receipt ID (the one that "
            "answered it), or --reason saying how it was answered"
        )
    return register.close(request_id, outcome=outcome, actor=actor, receipt=receipt, reason=reason)


def _check_receipt(request: SubjectRequest, found: FoundReceipt, outcome: str) -> None:
    wanted = ANSWERS.get(request.kind)
    if wanted is not None and found.kind not in wanted:
        raise ConfigurationError(
            f"receipt {found.id} is an {found.kind} receipt; request {request.id} is an "
            f"{request.kind} request, answered by an {' or '.join(wanted)} receipt: give that one"
        )
    if not found.about(request.subject):
        raise ConfigurationError(
            f"receipt {found.id} is not about the subject of request {request.id} (another "
            "subject's, or a whole agent's); give the receipt of this person's request"
        )
    if found.state == "pending":
        raise ConfigurationError(
            f"{found.kind} {found.id} is still pending; finish it (`governed-memory erasures "
            "resume`, `erasures show ID` says what is left), then close the request"
        )
    if found.state != "complete" and outcome == "answered":
        raise ConfigurationError(
            f"{found.kind} {found.id} is {found.state} (held by {found.detail or 'a hold'}); "
            "close with --outcome partial --reason saying what was kept and why, or run the "
            "erasure again once the hold is released"
        )


# -- where a request stands ----------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    """Where one request stands on ``today`` (a pure value).

    ``state``: ``closed``, ``open``, ``due_soon`` (its deadline is within
    ``warn_within``), ``late`` (past the internal deadline, not yet the legal
    one) or ``overdue`` (past the legal due date). ``days_left`` counts to the
    deadline the office works to (negative: days late).
    """

    request: SubjectRequest
    state: str
    deadline: _dt.date
    internal_due: _dt.date | None
    days_left: int

    @property
    def past_deadline(self) -> bool:
        return self.state in ("late", "overdue")

    def to_dict(self) -> dict[str, Any]:
        r = self.request
        return {
            "id": r.id,
            "subject": r.subject,
            "kind": r.kind,
            "state": self.state,
            "received": r.received,
            "due": r.due.isoformat(),
            "internal_due": self.internal_due.isoformat() if self.internal_due else None,
            "days_left": None if self.state == "closed" else self.days_left,
            "source": r.source,
            "channel": r.channel,
            "reference": r.reference,
            "opened_at": r.opened_at,
            "opened_by": r.opened_by,
            "erasure_id": r.erasure_id,
            "verification": _plain(r.verification),
            "extension": _plain(r.extension),
            "blockers": [_plain(b) for b in r.blockers],
            "closing": _plain(r.closing),
        }


def _plain(value: Any) -> Any:
    if value is None:
        return None
    data = dict(value.__dict__)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def standing(
    request: SubjectRequest,
    today: _dt.date,
    *,
    internal: _dt.timedelta | None,
    warn_within: _dt.timedelta,
) -> Standing:
    """Where ``request`` stands on ``today`` under the ``[requests]`` policy (pure)."""
    own = request.internal_due(internal)
    deadline = own or request.due
    days_left = (deadline - today).days
    if not request.open:
        state = "closed"
    elif today > request.due:
        state = "overdue"
    elif today > deadline:
        state = "late"
    elif days_left <= warn_within.days:
        state = "due_soon"
    else:
        state = "open"
    return Standing(request, state, deadline, own, days_left)


def standings(target: Target, today: _dt.date | None = None) -> list[Standing]:
    """Every request with where it stands (``today`` default: the clock's day)."""
    ctx = subject_context(target)
    register = ctx.requests()
    day = today if today is not None else register.today()
    rules = ctx.policy.requests
    return [
        standing(r, day, internal=rules.internal_deadline, warn_within=rules.warn_within)
        for r in register.requests()
    ]


# -- erasures the library could not finish, or started itself ---------------------------


def _follow_up_of(register: RequestRegister, subject: str) -> SubjectRequest | None:
    for request in register.requests():
        if (
            request.open
            and request.kind == "erasure"
            and request.subject == subject
            and request.source in FOLLOW_UPS
        ):
            return request
    return None


def follow_up(
    ctx: SubjectContext,
    scope: ErasureScope,
    *,
    reason: str,
    actor: str,
    source: str = "erasure-blocked",
    erasure_id: str | None = None,
    holds: tuple[str, ...] = (),
    blocked: bool = True,
) -> SubjectRequest | None:
    """The open follow-up request of ``scope``'s subject, opened if needed, noting ``reason``.

    For the erasures the library could not finish (``blocked``: a hold, an
    unreachable file) and those a consent withdrawal starts. One open
    follow-up per subject: a second call adds a blocker only when the reason
    changed (a scheduler retrying a held erasure daily adds nothing). The
    identity is recorded as established by ``actor``'s own act (the
    withdrawal or erasure they recorded). A whole-agent erasure names no
    subject and has none. Never raises: a register that cannot be written
    is logged (the erasure's own outcome is what the caller reports).
    """
    if scope.subject is None:
        return None
    try:
        register = ctx.requests()
        request = _follow_up_of(register, scope.subject)
        if request is None:
            request = register.open_request(
                subject=scope.subject,
                kind="erasure",
                received=register.today(),
                actor=actor,
                source=source,
                erasure_id=erasure_id,
                reason=reason if not blocked else None,
            )
            what = "consent withdrawal" if source == "consent-withdrawal" else "erasure"
            request = register.verify(
                request.id, by=actor, method=f"the {what} this actor recorded"
            )
        last = request.blockers[-1].reason if request.blockers else None
        if blocked and last != reason:
            request = register.block(
                request.id, reason=reason, actor=actor, erasure_id=erasure_id, holds=holds
            )
        return request
    except (GovernedMemoryError, OSError) as exc:
        logger.error(
            "governed_memory: the request register could not record a follow-up of an "
            "erasure (%s): %s; record it by hand with `governed-memory requests open`",
            reason,
            exc,
        )
        return None


def settle(ctx: SubjectContext, receipt: ErasureReceipt) -> SubjectRequest | None:
    """Close the open follow-up of the subject a complete erasure of them everywhere answered.

    Partial (a hold kept summaries): closed as ``partial`` with the holds
    named. Never raises (logged, as :func:`follow_up`).
    """
    subject = receipt.scope.subject
    if subject is None or receipt.scope.agent is not None:
        return None
    try:
        register = ctx.requests()
        request = _follow_up_of(register, subject)
        if request is None:
            return None
        if request.verification is None:
            request = register.verify(
                request.id, by=receipt.requested_by, method="the erasure this actor recorded"
            )
        partial = receipt.state != "complete"
        reason = (
            f"summaries kept by legal hold(s) {', '.join(receipt.blocking_holds)}; erase again "
            "once released"
            if partial
            else None
        )
        return register.close(
            request.id,
            outcome="partial" if partial else "answered",
            actor=receipt.requested_by,
            receipt=receipt.id,
            reason=reason,
        )
    except (GovernedMemoryError, OSError) as exc:
        logger.error(
            "governed_memory: erasure %s is complete, but the request register could not "
            "close its follow-up request: %s; close it with `governed-memory requests close "
            "ID --receipt %s`",
            receipt.id,
            exc,
            receipt.id,
        )
        return None
