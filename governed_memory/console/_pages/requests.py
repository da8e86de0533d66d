"""The request register: lists by state with deadlines, opening, verifying, extending, closing.

``/requests?view=open|due-soon|overdue|closed`` lists the register with the
legal deadline (or the office's own, when the policy sets one) and the days
left; ``/requests/{id}`` shows one request with its receipt, whose signature
is checked with :func:`governed_memory.verify_receipt`. Privacy officers act;
auditors read (request metadata only: the register holds no memory content).
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import governed_memory as gm

from .. import _auth
from .._principal import Principal, Role
from .._views import Flash, act, audit_view, console, form_text, render

__all__ = ["VIEWS", "receipt_status", "routes"]

READERS = (Role.PRIVACY_OFFICER, Role.AUDITOR)
ACTORS = (Role.PRIVACY_OFFICER,)

VIEWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "open": ("Open", ("open", "due_soon", "late", "overdue")),
    "due-soon": ("Due soon", ("due_soon",)),
    "overdue": ("Overdue", ("late", "overdue")),
    "closed": ("Closed", ("closed",)),
}
"""The list views: query value -> (label, the ``RequestStanding.state`` values shown)."""


def _standings(governance: gm.Governance) -> list[gm.RequestStanding]:
    return gm.request_standings(governance)


async def list_page(request: Request, *, flash: Flash | None = None, status: int = 200) -> Response:
    """``GET /requests``: one view of the register, oldest deadline first."""
    who = _auth.require(request, *READERS)
    view = request.query_params.get("view", "open")
    if view not in VIEWS:
        raise gm.ConfigurationError(
            f"view {view!r} is not a list of the register; use one of {', '.join(VIEWS)}"
        )
    governance = console(request).governance
    found = await run_in_threadpool(_standings, governance)
    shown = sorted(
        (s for s in found if s.state in VIEWS[view][1]), key=lambda s: (s.deadline, s.request.id)
    )
    counts = {
        name: sum(1 for s in found if s.state in states) for name, (_, states) in VIEWS.items()
    }
    # The list names data subjects: a view of personal data, audited before it is shown.
    await run_in_threadpool(audit_view, request, who, "requests", records=len(shown))
    return render(
        request,
        "requests.html",
        status=status,
        flash=flash,
        current="requests",
        view=view,
        views=VIEWS,
        counts=counts,
        rows=shown,
        kinds=gm.RequestRegister.KINDS,
        can_act=who.role in ACTORS,
    )


async def open_request(request: Request) -> Response:
    """``POST /requests``: enter a request in the register (the opener is the signed-in user)."""
    who = _auth.require(request, *ACTORS)
    form = await _auth.checked_form(request)
    governance = console(request).governance

    def call() -> gm.SubjectRequest:
        return gm.open_request(
            governance,
            subject=form_text(form, "subject"),
            kind=form_text(form, "kind"),
            received=form_text(form, "received"),
            actor=who.actor,
            channel=form_text(form, "channel") or None,
            reference=form_text(form, "reference") or None,
        )

    opened = await act(call)
    if isinstance(opened, Flash):
        return await list_page(request, flash=opened, status=400)
    done = Flash("ok", f"opened {opened.id}: {opened.kind} request, due {opened.due}")
    return await detail_page(request, opened.id, flash=done)


def _standing(governance: gm.Governance, request_id: str) -> gm.RequestStanding:
    for found in gm.request_standings(governance):
        if found.request.id == request_id:
            return found
    raise gm.NotFoundError(
        f"no request {request_id!r} in the register; open the list of requests and pick one"
    )


def receipt_status(governance: gm.Governance, receipt_id: str) -> tuple[str, str]:
    """Whether the receipt ``receipt_id`` verifies: (status, why) for the page.

    ``verified``: signed by this deployment's signing key and unchanged.
    ``unsigned``: written while no signing key was configured. ``missing``:
    no receipt has that id. Else the signature check's status (``invalid``,
    ``unknown_key``) and its reason.
    """
    found = gm.stored_receipt(governance, receipt_id)
    if found is None or found.document is None:
        return "missing", f"no receipt {receipt_id!r} is stored in this deployment"
    signer = governance.signer
    if signer is None:
        return "unsigned", "no signing key is configured, so the receipt carries no signature"
    check = gm.verify_receipt(found.document, gm.PublicKey(signer.public_key_bytes))
    if check.ok:
        return "verified", f"signed by key {check.key_id} and unchanged since"
    return check.status, check.reason or check.status


async def detail_page(
    request: Request,
    request_id: str | None = None,
    *,
    flash: Flash | None = None,
    status: int = 200,
) -> Response:
    """``GET /requests/{id}``: one request, its events, deadline and receipt."""
    who = _auth.require(request, *READERS)
    request_id = request_id or str(request.path_params["request_id"])
    governance = console(request).governance
    found = await run_in_threadpool(_standing, governance, request_id)
    closing = found.request.closing
    receipt = None
    if closing is not None and closing.receipt is not None:
        receipt = await run_in_threadpool(receipt_status, governance, closing.receipt)
    await run_in_threadpool(
        audit_view, request, who, "request", subject=found.request.subject, request_id=request_id
    )
    return render(
        request,
        "request.html",
        status=status,
        flash=flash,
        current="requests",
        s=found,
        r=found.request,
        receipt=receipt,
        outcomes=gm.RequestRegister.OUTCOMES,
        can_act=who.role in ACTORS,
    )


async def _action(request: Request, run: Any, done: str) -> Response:
    who: Principal = _auth.require(request, *ACTORS)
    form = await _auth.checked_form(request)
    request_id = str(request.path_params["request_id"])
    governance = console(request).governance
    # The register records the actor; acting_as names them in every other entry too.
    result = await act(lambda: run(gm.acting_as(governance, who.actor), request_id, who, form))
    if isinstance(result, Flash):
        return await detail_page(request, request_id, flash=result, status=400)
    return await detail_page(request, request_id, flash=Flash("ok", done))


def _months(form: Any) -> int:
    text = form_text(form, "months")
    if text not in ("1", "2"):
        raise gm.ConfigurationError(
            f"months {text!r} is not 1 or 2; a time limit is extended by one or two further "
            "months in all (GDPR Art. 12(3))"
        )
    return int(text)


async def verify(request: Request) -> Response:
    """``POST /requests/{id}/verify``: the signed-in user verified the person's identity."""

    def run(gov: Any, rid: str, who: Principal, form: Any) -> Any:
        return gm.verify_request(gov, rid, by=who.actor, method=form_text(form, "method"))

    return await _action(request, run, "identity verification recorded")


async def extend(request: Request) -> Response:
    """``POST /requests/{id}/extend``: extend the time limit by 1 or 2 months, with the reason."""

    def run(gov: Any, rid: str, who: Principal, form: Any) -> Any:
        return gm.extend_request(
            gov, rid, months=_months(form), reason=form_text(form, "reason"), actor=who.actor
        )

    return await _action(request, run, "time limit extended")


async def close(request: Request) -> Response:
    """``POST /requests/{id}/close``: close with the receipt that answered it, or an outcome."""

    def run(gov: Any, rid: str, who: Principal, form: Any) -> Any:
        return gm.close_request(
            gov,
            rid,
            actor=who.actor,
            receipt=form_text(form, "receipt") or None,
            outcome=form_text(form, "outcome") or None,
            reason=form_text(form, "reason") or None,
        )

    return await _action(request, run, "request closed")


routes = [
    Route("/requests", list_page, methods=["GET"]),
    Route("/requests", open_request, methods=["POST"]),
    Route("/requests/{request_id}", detail_page, methods=["GET"]),
    Route("/requests/{request_id}/verify", verify, methods=["POST"]),
    Route("/requests/{request_id}/extend", extend, methods=["POST"]),
    Route("/requests/{request_id}/close", close, methods=["POST"]),
]
