"""The console application: :func:`create_app` builds the Starlette app over one Governance.

The app holds no state of its own beyond what the library keeps: every page
reads through the public API (``import governed_memory as gm``) at request
time, so the console shows the file backend and the PostgreSQL backend alike
and several console processes (or the CLI beside them) stay consistent.

Layers inside the app, outermost first: the security headers (every
response, refusals and error pages included), the access control of
``_auth`` (session, CSRF guard), then the routes. Errors never reach the
browser as a traceback: a library error is the page with its one-line
message; anything else is a plain 500 page while the details go to the log.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import governed_memory as gm

from . import _auth
from ._pages import audit, health, requests, retention, subjects
from ._pages.audit import trail_of
from ._principal import Role
from ._views import SECURITY_HEADERS, Console, SecurityHeaders, error_page, templates

if TYPE_CHECKING:
    from ._config import ConsoleConfig

__all__ = ["create_app"]

logger = logging.getLogger("governed_memory.console")

_HERE = Path(__file__).resolve().parent


def _home(request: Request) -> Response:
    """``/``: the first page the signed-in role may use."""
    who = _auth.principal(request)
    first = "/retention" if who.role is Role.ADMINISTRATOR else "/requests"
    return RedirectResponse(first, status_code=303)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "no such page; use the links above", 405: "this page does not take that"}
    detail = messages.get(exc.status_code, exc.detail)
    return error_page(request, exc.status_code, str(detail))


async def _library_error(request: Request, exc: Exception) -> Response:
    # The library's own one-line message: the value, the rule and the fix.
    status = 404 if isinstance(exc, LookupError) else 400
    return error_page(request, status, str(exc))


async def _unexpected(request: Request, exc: Exception) -> Response:
    logger.exception("console: %s %s failed", request.method, request.url.path)
    response = HTMLResponse(
        '<!doctype html><title>Error</title><main data-page="error">'
        '<div role="alert" class="flash flash-error">the console could not complete this '
        "request (an internal error); the server log names the cause</div></main>",
        status_code=500,
    )
    # This response comes from the outermost middleware, outside SecurityHeaders.
    response.headers.update(SECURITY_HEADERS)
    return response


def create_app(config: ConsoleConfig, governance: gm.Governance) -> Starlette:
    """The console's ASGI application over ``governance`` (its storage, policy and audit trail).

    Args:
        config: the console settings (bind, sign-in, sessions); see ``ConsoleConfig``.
        governance: the deployment the console shows and acts on; every action
            is audited through ``governance.audit`` with the signed-in user's actor.

    Raises:
        ConfigurationError: the policy keeps no audit log (the console records
            every view and action there, so it refuses to run without one), or
            the accounts file or the secret key file is unsafe (see ``_auth.install``).
    """
    try:
        trail_of(governance)
    except gm.ConfigurationError as exc:
        raise gm.ConfigurationError(
            f"the console records every view of personal data and every action in the audit "
            f"log, and {exc}"
        ) from None
    routes = [
        Route("/", _home),
        *requests.routes,
        *subjects.routes,
        *retention.routes,
        *audit.routes,
        *health.routes,
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            HTTPException: _http_error,
            gm.GovernedMemoryError: _library_error,
            Exception: _unexpected,
        },
    )
    app.state.governance = governance
    app.state.console = Console(governance=governance, config=config, templates=templates())
    _auth.install(app, config)
    # Added last, so outermost: the sign-in middleware's own refusals get the headers too.
    app.add_middleware(SecurityHeaders)
    return app
