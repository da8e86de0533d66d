"""What every page shares: rendering with the frame, the security headers, the audited view.

* :class:`Console` is what the app keeps (``app.state.console``): the
  Governance, the settings and the templates.
* :func:`render` renders a page inside ``base.html`` (nav for the role,
  ``whoami``, the logout form, the flash messages), never cached.
* :func:`audit_view` writes the audit entry of a view of personal data
  *before* the page is built: if the entry cannot be written, the data is
  not shown (the error page says why).
* :func:`act` runs one library call for a form and turns its
  :class:`~governed_memory.GovernedMemoryError` into the error flash.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

import governed_memory as gm

from . import _auth
from ._principal import Principal, Role

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ._config import ConsoleConfig

__all__ = [
    "NAV",
    "SECURITY_HEADERS",
    "Console",
    "Flash",
    "SecurityHeaders",
    "act",
    "audit_view",
    "console",
    "error_page",
    "form_text",
    "parse_day",
    "render",
    "templates",
]

T = TypeVar("T")

_HERE = Path(__file__).resolve().parent

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}
"""Sent with every response of the console."""

NAV: tuple[tuple[str, str, tuple[Role, ...]], ...] = (
    ("requests", "Requests", (Role.PRIVACY_OFFICER, Role.AUDITOR)),
    ("retention", "Retention", (Role.ADMINISTRATOR, Role.AUDITOR)),
    ("audit", "Audit", (Role.ADMINISTRATOR, Role.AUDITOR)),
    ("health", "Health", (Role.ADMINISTRATOR, Role.AUDITOR)),
)
"""The navigation: (page, label, roles that may open it)."""


class SecurityHeaders:
    """Pure ASGI middleware adding :data:`SECURITY_HEADERS` (and ``no-store``) to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if not scope["path"].startswith("/static/"):
                    # Pages show personal data: no browser or proxy keeps a copy.
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, with_headers)


@dataclass(frozen=True)
class Flash:
    """One message on a page: ``ok`` (done) or ``error`` (the library's one-line refusal)."""

    kind: str
    text: str


@dataclass(frozen=True)
class Console:
    """What the app keeps: the deployment, its settings and the page templates."""

    governance: gm.Governance
    config: ConsoleConfig
    templates: Jinja2Templates = field(repr=False)


def templates() -> Jinja2Templates:
    """The page templates (autoescaped: a subject id with HTML in it is shown as text)."""
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["csrf_fields"] = _auth.csrf_fields
    env.filters["size"] = human_size
    env.filters["when"] = when
    # Every character quoted, "/" too: a subject id is one path segment (see subjects.py).
    env.filters["segment"] = lambda value: quote(str(value), safe="")
    return Jinja2Templates(env=env)


def console(request: Request) -> Console:
    """The app's :class:`Console`."""
    found: Console = request.app.state.console
    return found


def _signed_in(request: Request) -> Principal | None:
    found = request.scope.get("gm.principal")
    return found if isinstance(found, Principal) else None


def render(
    request: Request,
    template: str,
    *,
    status: int = 200,
    flash: Flash | list[Flash] | None = None,
    **context: Any,
) -> HTMLResponse:
    """``template`` rendered in the console's frame for the signed-in user."""
    who = _signed_in(request)
    flashes = [flash] if isinstance(flash, Flash) else list(flash or [])
    nav = [(page, label) for page, label, roles in NAV if who is not None and who.role in roles]
    response = console(request).templates.TemplateResponse(
        request,
        template,
        {"principal": who, "nav": nav, "flashes": flashes, "Role": Role, **context},
        status_code=status,
    )
    assert isinstance(response, HTMLResponse)
    return response


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    """``<main data-page="error">`` with ``message`` (a library error's one line)."""
    return render(request, "error.html", status=status, flash=Flash("error", message))


def audit_view(
    request: Request,
    who: Principal,
    what: str,
    *,
    subject: str | None = None,
    agent: str | None = None,
    **attrs: Any,
) -> None:
    """Record that ``who`` viewed ``what`` (``console.view``, kind ``what``) before it is shown.

    The subject and the actor are recorded as keyed hashes, as everywhere in the log.

    Raises:
        AuditWriteError: the entry could not be written; the caller must not show the data.
    """
    console(request).governance.audit.record(
        gm.AuditEvent.CONSOLE_VIEW,
        agent=agent,
        subject_id=subject,
        outcome="ok",
        actor=who.actor,
        kind=what,
        source=who.source,
        **attrs,
    )


async def act(call: Callable[[], T]) -> T | Flash:
    """Run the library ``call`` off the event loop: its result, or the error :class:`Flash`.

    A :class:`~governed_memory.GovernedMemoryError` becomes the flash (the
    library's one line: value, rule, fix); anything else propagates to the 500 page.
    """
    try:
        return await run_in_threadpool(call)
    except gm.GovernedMemoryError as exc:
        return Flash("error", str(exc))


def human_size(value: int | None) -> str:
    """``1536`` -> ``1.5 KiB`` (sizes in tables)."""
    if value is None:
        return ""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{value} B"


def when(value: object) -> str:
    """A date or time as the pages show it (minutes, UTC offset kept)."""
    if isinstance(value, _dt.datetime):
        return value.isoformat(timespec="minutes")
    if isinstance(value, str) and "T" in value:
        try:
            return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat(
                timespec="minutes"
            )
        except ValueError:
            return value
    return "" if value is None else str(value)


def parse_day(name: str, text: str, *, example: str = "2027-01-31") -> _dt.date:
    """A form's ``YYYY-MM-DD`` field as a date.

    Raises:
        ConfigurationError: naming the field, the value and the form to write.
    """
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        raise gm.ConfigurationError(
            f"{name} {text[:40]!r} is not a date; write YYYY-MM-DD (e.g. {example})"
        ) from None


def form_text(form: Any, name: str) -> str:
    """A form field as stripped text ('' when absent or a file)."""
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""
