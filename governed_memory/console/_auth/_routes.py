"""The sign-in routes: ``/login`` (form and post), ``/login/oidc``, ``/auth/callback``, ``/logout``.

Each writes its audit entry (``console.login`` / ``console.logout``, outcome
``ok`` or ``denied`` with a ``reason_code``) through the governance's audit
sink with the actor (``console:<name>`` / ``oidc:<name>``) as a keyed hash.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

import governed_memory as gm

from ._accounts import Account, AccountsFileError
from ._csrf import (
    LOGIN_COOKIE,
    CsrfRefusal,
    check_login_token,
    login_token,
    new_login_cookie,
)
from ._middleware import safe_next
from ._oidc import OidcRefusal
from ._sessions import COOKIE

if TYPE_CHECKING:
    from pathlib import Path

    from .._principal import Principal
    from ._context import AuthContext

__all__ = ["AuthPages", "routes"]

_COOKIE_FLAGS: dict[str, Any] = {"path": "/", "secure": True, "httponly": True}
_NO_STORE = {"Cache-Control": "no-store"}
_MAX_NAME = 200
logger = logging.getLogger("governed_memory.console")


class AuthPages:
    """Renders the sign-in page and the refusal page (the console's templates may override them).

    Args:
        console_templates: the console's template folder; a ``login.html`` or
            ``auth_error.html`` there replaces this package's own.
    """

    def __init__(self, console_templates: Path) -> None:
        env = Environment(
            loader=ChoiceLoader(
                [
                    FileSystemLoader(console_templates),
                    PackageLoader("governed_memory.console._auth", "templates"),
                ]
            ),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        self.templates = Jinja2Templates(env=env)

    def refuse(
        self, request: Request, status: int, message: str, headers: dict[str, str] | None = None
    ) -> Response:
        """The refusal page: ``<main data-page="error">`` with the message in a flash."""
        return self.templates.TemplateResponse(
            request,
            "auth_error.html",
            {"message": message, "status": status, "principal": request.scope.get("gm.principal")},
            status_code=status,
            headers={**_NO_STORE, **(headers or {})},
        )

    def login(
        self,
        request: Request,
        context: AuthContext,
        *,
        status: int = 200,
        error: str | None = None,
        username: str = "",
        headers: dict[str, str] | None = None,
    ) -> Response:
        """The sign-in form, with a pre-login cookie and its token."""
        cookie = request.cookies.get(LOGIN_COOKIE) or new_login_cookie()
        response = self.templates.TemplateResponse(
            request,
            "login.html",
            {
                "error": error,
                "username": username,
                "next": safe_next(request.query_params.get("next")),
                "login_fields": Markup(
                    '<input type="hidden" name="csrf_token" value="'
                    f'{escape(login_token(context.secret, cookie))}">'
                ),
                "local_enabled": context.accounts is not None,
                "oidc_enabled": context.oidc is not None,
            },
            status_code=status,
            headers={**_NO_STORE, **(headers or {})},
        )
        response.set_cookie(LOGIN_COOKIE, cookie, samesite="strict", **_COOKIE_FLAGS)
        return response


def _context(request: Request) -> tuple[AuthContext, AuthPages]:
    state = request.app.state
    return state.console_auth, state.console_auth_pages


def _client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _signed_in(
    request: Request,
    context: AuthContext,
    who: Principal,
    credential: object,
    target: str,
    *,
    cross_site: bool,
) -> Response:
    """Start the session and send the browser on to ``target``."""
    session_id, _ = context.sessions.create(who, credential=credential)
    context.audit(request, gm.AuditEvent.CONSOLE_LOGIN, "ok", who.actor, source=who.source)
    response: Response
    if cross_site:
        # After an OIDC callback (a cross-site navigation) a redirect would still be
        # cross-site and the browser would hold back the Strict cookie on it; a page of our
        # own that moves on (meta refresh) makes the next request same-site.
        response = HTMLResponse(
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="0;url={escape(target)}"><title>Signed in</title>'
            f'</head><body><main data-page="signed-in"><p>Signed in as {escape(who.name)}. '
            f'<a href="{escape(target)}">Continue</a></p></main></body></html>',
            headers=_NO_STORE,
        )
    else:
        response = RedirectResponse(target, status_code=303, headers=_NO_STORE)
    response.set_cookie(COOKIE, session_id, samesite="strict", **_COOKIE_FLAGS)
    response.delete_cookie(LOGIN_COOKIE, path="/", secure=True, httponly=True, samesite="strict")
    return response


async def login_form(request: Request) -> Response:
    context, pages = _context(request)
    if request.scope.get("gm.principal") is not None:
        return RedirectResponse(safe_next(request.query_params.get("next")), status_code=303)
    return pages.login(request, context)


async def login_post(request: Request) -> Response:
    context, pages = _context(request)
    async with request.form() as form:
        # No account name is longer than 64; the cap bounds what a client puts in the limiter.
        username = str(form.get("username") or "").strip()[:_MAX_NAME]
        password = str(form.get("password") or "")
        token = form.get("csrf_token")
        target = safe_next(str(form.get("next") or "/"))
    try:
        check_login_token(context.secret, request.cookies.get(LOGIN_COOKIE), token)
    except CsrfRefusal as refusal:
        return pages.refuse(request, 403, refusal.reason)
    if context.accounts is None:
        return pages.refuse(
            request,
            404,
            "local accounts are not configured here; sign in with your identity provider",
        )
    actor = f"console:{username}"
    ip = _client_ip(request)
    wait = context.limiter.attempt([f"user:{username.casefold()}", f"ip:{ip}"])
    if wait is not None:
        context.audit(
            request,
            gm.AuditEvent.CONSOLE_LOGIN,
            "denied",
            actor,
            source="local",
            reason_code="rate_limited",
        )
        return pages.login(
            request,
            context,
            status=429,
            username=username,
            error=(
                f"too many sign-in attempts for this user or from {ip}; try again in {wait} seconds"
            ),
            headers={"Retry-After": str(wait)},
        )
    try:
        account = await _authenticate(context, username, password)
    except AccountsFileError as exc:
        # The file's path and mode are for the administrator's log, not the visitor's page.
        logger.error("console: local sign-in refused: %s", exc)
        return pages.refuse(
            request,
            503,
            "local sign-in is unavailable because the accounts file is unsafe or unreadable; "
            "an administrator must fix it (the console's log names the problem)",
        )
    if account is None:
        context.audit(
            request,
            gm.AuditEvent.CONSOLE_LOGIN,
            "denied",
            actor,
            source="local",
            reason_code="bad_credentials",
        )
        return pages.login(
            request,
            context,
            status=401,
            username=username,
            error="the user name or the password is wrong; check both and try again",
        )
    return _signed_in(request, context, account.principal(), account, target, cross_site=False)


async def _authenticate(context: AuthContext, username: str, password: str) -> Account | None:
    assert context.accounts is not None
    # Argon2 takes tens of milliseconds of CPU: off the event loop.
    return await run_in_threadpool(context.accounts.authenticate, username, password)


async def oidc_start(request: Request) -> Response:
    context, pages = _context(request)
    if context.oidc is None:
        return pages.refuse(request, 404, "OpenID Connect sign-in is not configured here")
    flow_id, flow = context.pending.start()
    flow["gm_next"] = safe_next(request.query_params.get("next"))
    request.scope["session"] = flow
    redirect_uri = context.oidc.config.redirect_uri or str(request.url_for("auth_callback"))
    try:
        response = await context.oidc.begin(request, redirect_uri)
    except OidcRefusal as refusal:
        return pages.refuse(request, refusal.status, refusal.message)
    # Lax, not Strict: the provider's redirect back is a cross-site navigation.
    response.set_cookie(
        context.pending.COOKIE, flow_id, max_age=600, samesite="lax", **_COOKIE_FLAGS
    )
    return response


async def oidc_callback(request: Request) -> Response:
    context, pages = _context(request)
    if context.oidc is None:
        return pages.refuse(request, 404, "OpenID Connect sign-in is not configured here")
    ip = _client_ip(request)
    wait = context.limiter.attempt([f"ip:{ip}"])
    if wait is not None:
        return pages.refuse(
            request,
            429,
            f"too many sign-in attempts from {ip}; try again in {wait} seconds",
            headers={"Retry-After": str(wait)},
        )
    flow = context.pending.take(request.cookies.get(context.pending.COOKIE))
    if flow is None:
        context.audit(
            request,
            gm.AuditEvent.CONSOLE_LOGIN,
            "denied",
            "oidc:unknown",
            source=context.oidc.source,
            reason_code="no_flow",
        )
        return pages.refuse(
            request,
            400,
            "this sign-in was not started here, took longer than 10 minutes or was already "
            "used; start again from /login",
        )
    request.scope["session"] = flow
    try:
        who = await context.oidc.finish(request)
    except OidcRefusal as refusal:
        context.audit(
            request,
            gm.AuditEvent.CONSOLE_LOGIN,
            "denied",
            f"oidc:{refusal.who or 'unknown'}",
            source=context.oidc.source,
            reason_code=refusal.reason_code,
        )
        return pages.refuse(request, refusal.status, refusal.message)
    response = _signed_in(
        request, context, who, None, safe_next(flow.get("gm_next")), cross_site=True
    )
    response.delete_cookie(
        context.pending.COOKIE, path="/", secure=True, httponly=True, samesite="lax"
    )
    return response


async def logout(request: Request) -> Response:
    context, _ = _context(request)
    who = context.sessions.revoke(request.cookies.get(COOKIE))
    if who is not None:
        context.audit(request, gm.AuditEvent.CONSOLE_LOGOUT, "ok", who.actor, source=who.source)
    response = RedirectResponse("/login", status_code=303, headers=_NO_STORE)
    response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="strict")
    return response


def routes() -> list[Route]:
    """The routes ``install`` adds."""
    return [
        Route("/login", login_form, methods=["GET"], name="login"),
        Route("/login", login_post, methods=["POST"], name="login_post"),
        Route("/login/oidc", oidc_start, methods=["GET"], name="login_oidc"),
        Route("/auth/callback", oidc_callback, methods=["GET"], name="auth_callback"),
        Route("/logout", logout, methods=["POST"], name="logout"),
    ]
