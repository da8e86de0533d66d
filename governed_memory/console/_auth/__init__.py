"""The console's access control: accounts, sessions, CSRF, login rate limits and OIDC.

The seam the pages code against (docs/console-auth.md):

* :func:`install` adds ``/login``, ``/login/oidc``, ``/auth/callback`` and
  ``/logout`` and the middleware that resolves the session and guards every
  state-changing request;
* :func:`principal` / :func:`require` give the signed-in user of a request or
  refuse it (a redirect to ``/login``; a 403 page naming the role needed);
* :func:`csrf_fields` renders the hidden ``csrf_token`` and a one-time
  ``form_nonce`` for one form, and :func:`checked_form` reads a posted form
  the middleware has checked (403 otherwise).

Modules: ``_accounts`` (argon2 local accounts), ``_sessions`` (server-side
sessions), ``_csrf`` (tokens and nonces), ``_ratelimit`` (sliding windows),
``_oidc`` (authlib client), ``_middleware``, ``_routes``, ``_context``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

import governed_memory as gm

from .._principal import Principal, Role
from ._accounts import (
    MIN_PASSWORD_LENGTH,
    Account,
    AccountsFileError,
    add_user,
    remove_user,
    set_password,
    set_role,
)
from ._context import AuthContext
from ._csrf import form_fields
from ._middleware import AuthMiddleware, safe_next
from ._routes import AuthPages, routes
from ._sessions import COOKIE, Session

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from .._config import ConsoleConfig

__all__ = [
    "COOKIE",
    "MIN_PASSWORD_LENGTH",
    "Account",
    "AccountsFileError",
    "Forbidden",
    "NotSignedIn",
    "add_user",
    "checked_form",
    "csrf_fields",
    "install",
    "principal",
    "remove_user",
    "require",
    "set_password",
    "set_role",
]

_CONSOLE_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


class NotSignedIn(HTTPException):
    """No valid session: answered with a redirect to ``/login`` (see :func:`install`)."""

    def __init__(self) -> None:
        super().__init__(status_code=401, detail="sign in to use the console")


class Forbidden(HTTPException):
    """A signed-in user without the role, or a form that failed its check: a 403 page."""

    def __init__(self, detail: str) -> None:
        super().__init__(status_code=403, detail=detail)


def install(
    app: Starlette, config: ConsoleConfig, *, now: Callable[[], float] = time.monotonic
) -> None:
    """Add the sign-in routes, the session/CSRF middleware and the refusal pages to ``app``.

    Sign-ins and logouts are audited through ``app.state.governance.audit``.

    Args:
        app: the console's Starlette app.
        config: the console settings.
        now: the clock of the session and rate-limit windows, in seconds (tests pin it).

    Raises:
        ConfigurationError: the accounts file or the secret key file is unsafe or broken.
    """
    context = AuthContext.from_config(config, now=now)
    if context.accounts is not None:
        context.accounts.check()
    pages = AuthPages(_CONSOLE_TEMPLATES)
    app.state.console_auth = context
    app.state.console_auth_pages = pages
    app.router.routes[0:0] = routes()
    app.add_middleware(AuthMiddleware, context=context, refuse=pages.refuse)

    async def not_signed_in(request: Request, exc: Exception) -> Response:
        target = safe_next(
            request.url.path + (f"?{request.url.query}" if request.url.query else "")
        )
        return RedirectResponse("/login?next=" + quote(target, safe="/"), status_code=303)

    async def forbidden(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return pages.refuse(request, exc.status_code, str(exc.detail))

    app.add_exception_handler(NotSignedIn, not_signed_in)
    app.add_exception_handler(Forbidden, forbidden)


def _session(request: Request) -> Session | None:
    found = request.scope.get("gm.session")
    return found if isinstance(found, Session) else None


def principal(request: Request) -> Principal:
    """The signed-in user of ``request``.

    Raises:
        NotSignedIn: no valid session (answered with a redirect to ``/login``).
    """
    session = _session(request)
    if session is None:
        raise NotSignedIn()
    return session.principal


def require(request: Request, *roles: Role) -> Principal:
    """The signed-in user, if they act in one of ``roles`` (no roles: any signed-in user).

    Raises:
        NotSignedIn: no valid session.
        Forbidden: 403, naming the roles that may use the page (and audited).
    """
    who = principal(request)
    if roles and who.role not in roles:
        needed = " or ".join(r.value for r in roles)
        AuthContext.audit(
            request,
            gm.AuditEvent.CONSOLE_ACCESS,
            "denied",
            who.actor,
            source=who.source,
            reason_code="wrong_role",
        )
        raise Forbidden(
            f"this page needs the role {needed}; {who.name} is signed in as {who.role.value}"
        )
    return who


def csrf_fields(request: Request) -> Markup:
    """The hidden ``csrf_token`` and a fresh one-time ``form_nonce`` for one form.

    Empty without a session (a page shown to a visitor who is not signed in has
    no form that could be accepted anyway).
    """
    session = _session(request)
    return form_fields(session) if session is not None else Markup("")


async def checked_form(request: Request) -> FormData:
    """The posted form, whose CSRF token and one-time nonce the middleware accepted.

    Raises:
        NotSignedIn: no valid session.
        Forbidden: the form was not checked (the middleware is not installed, or
            the route is one it leaves to itself).
    """
    principal(request)
    if request.scope.get("gm.form_checked") is not True:
        raise Forbidden("the form's CSRF check did not run; this route cannot accept forms")
    form = await request.form()
    cleanup = request.scope.get("gm.cleanup")
    if isinstance(cleanup, list):
        cleanup.append(form.close)
    return form
