"""Health: the scheduler's leader, pending or blocked work, key status (ids and ages, no material).

Read-only and content-free: counts, ids, times. A part the deployment cannot
report (no master key configured, no audit log) is shown as such, with the
library's message, rather than failing the page.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import governed_memory as gm

from .. import _auth
from .._principal import Role
from .._views import console, render
from .audit import trail_of

__all__ = ["age", "routes"]

READERS = (Role.ADMINISTRATOR, Role.AUDITOR)


def age(created: str | None, now: _dt.datetime) -> str:
    """``created`` (ISO 8601) as an age in days on ``now``; '' when unknown."""
    if not created:
        return ""
    try:
        when = _dt.datetime.fromisoformat(created)
    except ValueError:
        return ""
    if when.tzinfo is None or now.tzinfo is None:
        when, now = when.replace(tzinfo=None), now.replace(tzinfo=None)
    return f"{max((now - when).days, 0)} days"


def _keys(governance: gm.Governance, now: _dt.datetime) -> dict[str, Any]:
    found: dict[str, Any] = {"data_keys": [], "data_keys_note": None}
    signer = governance.signer
    found["signing_key"] = signer.key_id if signer is not None else None
    try:
        found["audit_key"] = trail_of(governance).key.key_id
    except gm.ConfigurationError:
        found["audit_key"] = None
    if not governance.policy.encryption.enabled:
        found["data_keys_note"] = "encryption at rest is off in this policy: no data keys"
        return found
    try:
        status = gm.keyring_status(governance.keyring, governance.workspace)
    except gm.GovernedMemoryError as exc:
        found["data_keys_note"] = str(exc)
        return found
    found["master_key"] = status.master_key_id
    found["reencrypt_pending"] = status.reencrypt_pending
    # Subject keys by kind and state only: their names would identify people.
    found["data_keys"] = [
        {
            "kind": k.kind,
            "ref": k.ref[:12],
            "generation": k.current,
            "state": k.state,
            "wrapped_by": ", ".join(sorted(set(k.wrapped_by))),
            "age": age(k.created, now),
        }
        for k in status.keys
    ]
    return found


def _health(governance: gm.Governance) -> dict[str, Any]:
    now = governance.clock.now()
    standings = gm.request_standings(governance)
    return {
        "schedule": gm.schedule_status(governance),
        "purge_pending": gm.Retention(governance).pending() is not None,
        "blocked": [s for s in standings if s.request.open and s.request.blockers],
        "overdue": [s for s in standings if s.past_deadline],
        "open_requests": sum(1 for s in standings if s.request.open),
        "storage": governance.storage.where,
        **_keys(governance, now),
    }


async def health_page(request: Request) -> Response:
    """``GET /health``: leader, pending or blocked work, keys."""
    _auth.require(request, *READERS)
    found = await run_in_threadpool(_health, console(request).governance)
    return render(request, "health.html", current="health", **found)


routes = [Route("/health", health_page, methods=["GET"])]
