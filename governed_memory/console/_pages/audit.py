"""The audit log: chain verification and the last checkpoint, search, export for an auditor.

The log keeps subjects, actors, agents and holds only as keyed hashes; the
search takes the ids and hashes them with the deployment's audit key, so an
auditor finds "everything about subject 4711" or "everything alice did"
without the log ever holding the ids. The export is the matching entries as
JSON Lines, exactly as stored (hash, MAC), for checking elsewhere.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import governed_memory as gm

from .. import _auth
from .._principal import Role
from .._views import audit_view, console, parse_day, render

__all__ = ["Search", "routes", "trail_of"]

READERS = (Role.ADMINISTRATOR, Role.AUDITOR)
SHOWN = 500
"""Entries a search page lists (newest first); the export has them all."""


def trail_of(governance: gm.Governance) -> gm.AuditTrail:
    """The deployment's audit trail (under the sinks that wrap it).

    Raises:
        ConfigurationError: the policy does not enable the audit log.
    """
    sink: Any = governance.audit
    while not isinstance(sink, gm.AuditTrail) and getattr(sink, "sink", None) is not None:
        sink = sink.sink
    if not isinstance(sink, gm.AuditTrail) or sink.log is None:
        raise gm.ConfigurationError(
            f"policy {governance.policy.id} keeps no audit log, so there is nothing to show; "
            "set audit.enabled = true in the policy (docs/audit.md)"
        )
    return sink


def _day(name: str, text: str, end: bool) -> _dt.datetime | None:
    if not text:
        return None
    day = parse_day(name, text, example="2026-12-01")
    start = _dt.datetime.combine(day, _dt.time(), tzinfo=_dt.UTC)
    return start + _dt.timedelta(days=1) if end else start


@dataclass(frozen=True)
class Search:
    """One search of the log: ids (hashed before matching), an event name, a UTC day range."""

    subject: str = ""
    operation: str = ""
    actor: str = ""
    since: str = ""
    until: str = ""

    @classmethod
    def of(cls, request: Request) -> Search:
        q = request.query_params
        return cls(
            *(q.get(k, "").strip() for k in ("subject", "operation", "actor", "since", "until"))
        )

    def entries(self, trail: gm.AuditTrail) -> list[dict[str, Any]]:
        """The matching entries as stored, oldest first.

        Raises:
            ConfigurationError: a date that is not YYYY-MM-DD.
        """
        start = _day("since", self.since, end=False)
        stop = _day("until", self.until, end=True)
        subject = trail.subject_hash(self.subject) if self.subject else None
        actor = trail.subject_hash(self.actor) if self.actor else None
        assert trail.log is not None
        found = []
        for entry in trail.log.entries():
            attrs = entry.attrs
            if self.operation and entry.event != self.operation:
                continue
            if subject is not None and subject not in (
                attrs.get("subject.hash"),
                *(attrs.get("subject.hashes") or ()),
            ):
                continue
            if actor is not None and attrs.get("actor.hash") != actor:
                continue
            if (start is not None and entry.time < start) or (
                stop is not None and entry.time >= stop
            ):
                continue
            found.append(entry.to_dict())
        return found


def _status(trail: gm.AuditTrail) -> dict[str, Any]:
    report = trail.verify()
    last = None
    assert trail.log is not None
    for entry in trail.log.entries():
        if entry.event == "audit.checkpoint":
            last = gm.AuditCheckpoint.from_entry(entry)
    return {"report": report, "checkpoint": last}


async def audit_page(request: Request) -> Response:
    """``GET /audit``: whether the chain verifies, the last checkpoint, and a search."""
    who = _auth.require(request, *READERS)
    search = Search.of(request)
    trail = trail_of(console(request).governance)
    status = await run_in_threadpool(_status, trail)
    found = await run_in_threadpool(search.entries, trail)
    await run_in_threadpool(audit_view, request, who, "audit", records=len(found))
    return render(
        request,
        "audit.html",
        current="audit",
        search=search,
        rows=list(reversed(found))[:SHOWN],
        total=len(found),
        shown=SHOWN,
        query=str(request.url.query),
        **status,
    )


async def audit_export(request: Request) -> Response:
    """``GET /audit/export``: the entries of the search as JSON Lines, a download."""
    who = _auth.require(request, *READERS)
    search = Search.of(request)
    trail = trail_of(console(request).governance)
    found = await run_in_threadpool(search.entries, trail)
    # Recorded before it is handed out, like every view.
    await run_in_threadpool(audit_view, request, who, "audit-export", records=len(found))
    body = "".join(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n" for e in found)
    return Response(
        body,
        media_type="application/jsonl",
        headers={"Content-Disposition": 'attachment; filename="audit-export.jsonl"'},
    )


routes = [
    Route("/audit", audit_page, methods=["GET"]),
    Route("/audit/export", audit_export, methods=["GET"]),
]
