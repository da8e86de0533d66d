"""One data subject: consent history, holdings (never content), holds, requests, receipts; actions.

``/subjects/{subject}`` takes the subject id as one URL path segment, every
character percent-encoded ("/" as ``%2F``): the route reads the raw path, so
any id the library accepts has its page. The page shows counts, sizes and
dates of the records held, never their content; the content is a separate,
audited view (``/subjects/{subject}/content``) for privacy officers only.

Actions (POST ``/subjects/{subject}/<action>``): ``export`` (the bundle as a
zip download), ``erase`` (the typed id must equal the subject id; a hold
refuses it with the library's message naming the hold), ``rectify``,
``place-hold``, ``release-hold``. Each passes the signed-in user's actor to
the library, which audits it.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

import governed_memory as gm

from .. import _auth
from .._principal import Principal, Role
from .._views import Flash, act, audit_view, console, form_text, parse_day, render

__all__ = ["Holding", "holdings", "routes", "subject_of"]

READERS = (Role.PRIVACY_OFFICER, Role.ADMINISTRATOR)
"""Who may open a subject's page: counts and holds only, no content."""
OFFICERS = (Role.PRIVACY_OFFICER,)
"""Who may export, erase, rectify and view content."""
HOLDERS = (Role.PRIVACY_OFFICER, Role.ADMINISTRATOR)
"""Who may place and release legal holds."""
PREFIX = "/subjects/"


def subject_of(request: Request) -> tuple[str, str | None]:
    """The subject id (decoded) and the action segment of ``/subjects/{subject}[/{action}]``.

    Read from the raw path: an id holding "/" arrives as ``%2F`` in one segment.

    Raises:
        HTTPException: 404 for any other shape of path.
        ConfigurationError: the encoded id is not UTF-8.
    """
    raw = request.scope.get("raw_path") or request.scope["path"].encode()
    path = raw.decode("latin-1").split("?", 1)[0]
    parts = path[len(PREFIX) :].split("/") if path.startswith(PREFIX) else []
    if not 1 <= len(parts) <= 2 or not parts[0]:
        raise _not_found()
    try:
        subject = unquote(parts[0], errors="strict")
    except UnicodeDecodeError:
        raise gm.ConfigurationError(
            f"the subject id in the address ({parts[0][:60]}) is not percent-encoded UTF-8; "
            "open the subject from the request register or the look-up form"
        ) from None
    return subject, parts[1] if len(parts) == 2 else None


def _not_found() -> Exception:
    return HTTPException(status_code=404)


@dataclass(frozen=True)
class Holding:
    """What one agent's file holds about a subject: counts, bytes and dates, never content."""

    agent: str
    file: str
    records: int
    bytes: int
    first: str
    last: str
    rectified: int


def holdings(records: list[gm.SubjectRecord]) -> list[Holding]:
    """Group a subject's records by agent and file (pure)."""
    groups: dict[tuple[str, str], list[gm.SubjectRecord]] = {}
    for record in records:
        groups.setdefault((record.agent, record.file), []).append(record)
    found = []
    for (agent, file), items in sorted(groups.items()):
        times = sorted(r.timestamp for r in items)
        found.append(
            Holding(
                agent=agent,
                file=file,
                records=len(items),
                bytes=sum(len(r.content.encode("utf-8")) for r in items),
                first=times[0],
                last=times[-1],
                rectified=sum(1 for r in items if r.rectified),
            )
        )
    return found


def _holds(governance: gm.Governance) -> Any:
    return gm.Retention(governance).holds


def _overview(governance: gm.Governance, subject: str) -> dict[str, Any]:
    records = gm.subject_records(governance, subject)  # refuses an id no record can name
    held = [h for h in _holds(governance).holds(include_released=True) if h.subject == subject]
    return {
        "consent": governance.consent.history(subject),
        "holdings": holdings(records),
        "holds": sorted(held, key=lambda h: (not h.active, h.placed_at)),
        "requests": sorted(
            (s for s in gm.request_standings(governance) if s.request.subject == subject),
            key=lambda s: s.request.received,
            reverse=True,
        ),
        "receipts": gm.subject_receipts(governance, subject),
    }


async def subject_page(request: Request) -> Response:
    """``GET /subjects/{subject}``: everything about the subject except the content."""
    who = _auth.require(request, *READERS)
    subject, action = subject_of(request)
    if action == "content":
        return await content_page(request)
    if action is not None:
        raise _not_found()
    return await _page(request, who, subject)


async def _page(
    request: Request,
    who: Principal,
    subject: str,
    *,
    flash: Flash | None = None,
    status: int = 200,
) -> Response:
    governance = console(request).governance
    # Read first: an id the library refuses is its one-line error, before anything is audited.
    overview = await run_in_threadpool(_overview, governance, subject)
    await run_in_threadpool(audit_view, request, who, "subject", subject=subject)
    return render(
        request,
        "subject.html",
        status=status,
        flash=flash,
        subject=subject,
        segment=quote(subject, safe=""),
        officer=who.role in OFFICERS,
        holder=who.role in HOLDERS,
        **overview,
    )


async def content_page(request: Request) -> Response:
    """``GET /subjects/{subject}/content``: the records' content, audited before it is shown."""
    who = _auth.require(request, *OFFICERS)
    subject, _ = subject_of(request)
    governance = console(request).governance
    records = await run_in_threadpool(gm.subject_records, governance, subject)
    await run_in_threadpool(
        audit_view, request, who, "content", subject=subject, records=len(records)
    )
    return render(
        request,
        "content.html",
        subject=subject,
        segment=quote(subject, safe=""),
        records=records,
    )


# -- actions ---------------------------------------------------------------------------


def _confirmed(subject: str, form: FormData) -> None:
    typed = form_text(form, "confirm")
    if typed != subject:
        raise gm.ConfigurationError(
            f"the confirmation {typed[:60]!r} is not the subject id; type the subject id exactly "
            "to confirm the erasure (nothing was erased)"
        )


def _until(form: FormData) -> str:
    text = form_text(form, "until")
    if not text:
        return ""
    return f" (review by {parse_day('until', text, example='2027-06-30').isoformat()})"


def _erase(gov: gm.Governance, subject: str, who: Principal, form: FormData) -> str:
    _confirmed(subject, form)
    receipt = gm.erase(
        gm.acting_as(gov, who.actor),
        subject=subject,
        reason=form_text(form, "reason"),
        actor=who.actor,
    )
    return f"erased: receipt {receipt.id} ({receipt.state}, {receipt.records} records)"


def _rectify(gov: gm.Governance, subject: str, who: Principal, form: FormData) -> str:
    receipt = gm.rectify(
        gm.acting_as(gov, who.actor),
        gate=gov,
        subject=subject,
        record=form_text(form, "record"),
        text=form_text(form, "text"),
        reason=form_text(form, "reason"),
        actor=who.actor,
    )
    return f"rectified: receipt {receipt.id} ({receipt.state})"


def _place_hold(gov: gm.Governance, subject: str, who: Principal, form: FormData) -> str:
    until = _until(form)
    hold = _holds(gov).place(
        subject=subject, reason=form_text(form, "reason") + until, actor=who.actor
    )
    return f"placed hold {hold.id}"


def _release_hold(gov: gm.Governance, subject: str, who: Principal, form: FormData) -> str:
    hold_id = form_text(form, "hold")
    mine = [h.id for h in _holds(gov).holds() if h.subject == subject]
    if hold_id not in mine:
        raise gm.HoldNotFoundError(
            f"no active hold {hold_id[:40]!r} on this subject; pick one of the holds listed "
            "on this page"
        )
    hold = _holds(gov).release(hold_id=hold_id, actor=who.actor)
    return f"released hold {hold.id}"


Action = Callable[[gm.Governance, str, Principal, FormData], str]
ACTIONS: dict[str, tuple[tuple[Role, ...], Action]] = {
    "erase": (OFFICERS, _erase),
    "rectify": (OFFICERS, _rectify),
    "place-hold": (HOLDERS, _place_hold),
    "release-hold": (HOLDERS, _release_hold),
}


async def subject_action(request: Request) -> Response:
    """``POST /subjects/{subject}/<action>``: one action, then the page with its outcome."""
    subject, action = subject_of(request)
    if action == "export":
        return await export(request, subject)
    if action not in ACTIONS:
        raise _not_found()
    roles, run = ACTIONS[action]
    who = _auth.require(request, *roles)
    form = await _auth.checked_form(request)
    governance = console(request).governance
    result = await act(lambda: run(governance, subject, who, form))
    if isinstance(result, Flash):
        return await _page(request, who, subject, flash=result, status=400)
    return await _page(request, who, subject, flash=Flash("ok", result))


def _export_zip(gov: gm.Governance, subject: str, who: Principal) -> tuple[str, bytes]:
    # The bundle is written to a private (0700) temporary folder, zipped in memory and
    # removed before the response is sent: the server keeps no copy (the receipt stays).
    folder = Path(tempfile.mkdtemp(prefix="gm-console-export-"))
    try:
        result = gm.export_subject(
            gm.acting_as(gov, who.actor), subject, folder / "export", actor=who.actor
        )
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted((folder / "export").rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(folder / "export").as_posix())
        return result.id, buffer.getvalue()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def export(request: Request, subject: str) -> Response:
    """``POST /subjects/{subject}/export``: the access export (Art. 15/20) as a zip download."""
    who = _auth.require(request, *OFFICERS)
    await _auth.checked_form(request)
    governance = console(request).governance
    result = await act(lambda: _export_zip(governance, subject, who))
    if isinstance(result, Flash):
        return await _page(request, who, subject, flash=result, status=400)
    export_id, data = result
    return Response(
        data,
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{export_id}.zip"'},
    )


async def find_subject(request: Request) -> Response:
    """``GET /subjects?subject=ID``: the subject's page (the frame's look-up form)."""
    _auth.require(request, *READERS)
    subject = request.query_params.get("subject", "").strip()
    if not subject:
        raise gm.ConfigurationError(
            "no subject id given; type the data subject's id (as the request register shows it)"
        )
    return RedirectResponse(PREFIX + quote(subject, safe=""), status_code=303)


routes = [
    Route("/subjects", find_subject, methods=["GET"]),
    Route("/subjects/{rest:path}", subject_page, methods=["GET"]),
    Route("/subjects/{rest:path}", subject_action, methods=["POST"]),
]
