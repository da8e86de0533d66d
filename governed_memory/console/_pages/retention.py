"""Retention: the policy in force, the next scheduled purge, a dry-run preview, the last purges.

The preview is :meth:`governed_memory.Retention.plan` for the chosen day: what
a purge on that day would delete and what a hold keeps, changing nothing.
Artefact paths name agents, not data subjects; the page shows no content.
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
from .._views import console, parse_day, render

__all__ = ["preview_moment", "routes"]

READERS = (Role.ADMINISTRATOR, Role.AUDITOR)
SHOWN = 200
"""Plan rows the preview lists (the counts cover all)."""
RULES = (
    "archives_max_age",
    "archives_max_count",
    "idle_memory_max_age",
    "exports_max_age",
    "audit_min_age",
    "audit_max_age",
    "consent_records_max_age",
    "tombstones_max_age",
)


def preview_moment(text: str, now: _dt.datetime) -> _dt.datetime:
    """The end of the chosen day (``YYYY-MM-DD``), local time as retention plans it, at least ``now``.

    Raises:
        ConfigurationError: not a date, or outside the years a plan can be made for.
    """
    day = parse_day("preview date", text)
    if not 1970 <= day.year <= 8000:
        raise gm.ConfigurationError(
            f"preview date {text!r} is outside the years 1970 to 8000, the moments a purge can "
            "be planned for; give a date in that range"
        )
    # Retention compares naive local times (artefact times are the host's, like mtimes).
    local_now = now.astimezone().replace(tzinfo=None) if now.tzinfo else now
    return max(_dt.datetime.combine(day, _dt.time(23, 59, 59)), local_now)


def _policy_rows(policy: gm.Policy) -> list[tuple[str, str]]:
    rules = policy.retention
    rows = []
    for name in RULES:
        value: Any = getattr(rules, name, None)
        if isinstance(value, _dt.timedelta):
            text = f"{value.days} days" if not value.seconds else str(value)
        else:
            text = "none (kept)" if value is None else str(value)
        rows.append((name, text))
    return rows


def _overview(governance: gm.Governance, as_of: str) -> dict[str, Any]:
    retention = gm.Retention(governance)
    found: dict[str, Any] = {
        "schedule": gm.schedule_status(governance),
        "reports": retention.reports(limit=5),
        "pending": retention.pending() is not None,
        "plan": None,
    }
    if as_of:
        now = governance.clock.now()
        found["plan"] = retention.plan(as_of=preview_moment(as_of, now))
    return found


async def retention_page(request: Request) -> Response:
    """``GET /retention[?as_of=YYYY-MM-DD]``: the policy, the schedule, a preview, the last purges."""
    _auth.require(request, *READERS)
    governance = console(request).governance
    as_of = request.query_params.get("as_of", "").strip()
    overview = await run_in_threadpool(_overview, governance, as_of)
    return render(
        request,
        "retention.html",
        current="retention",
        policy=governance.policy,
        rules=_policy_rows(governance.policy),
        as_of=as_of,
        shown=SHOWN,
        **overview,
    )


routes = [Route("/retention", retention_page, methods=["GET"])]
