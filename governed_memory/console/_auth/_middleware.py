"""The middleware in front of every console route: resolve the session, guard every write.

For each HTTP request it looks up the ``gm_session`` cookie (an unknown,
expired, forged or altered id is no session) and puts the session and its
:class:`Principal` in the ASGI scope. A session of a local account whose
entry in the accounts file changed since sign-in (removed, new role, new
password) is revoked there and then.

Every state-changing request (POST, PUT, PATCH, DELETE) other than the
sign-in form itself must come with a session and as a form whose
``csrf_token`` and one-time ``form_nonce`` are right (see ``_csrf``): the
middleware reads the body (at most ``MAX_FORM_BYTES``), checks both, and
hands the body on unchanged, so a page that forgets to call
``checked_form`` is still protected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

import governed_memory as gm

from ._accounts import Account, AccountsFileError
from ._csrf import CsrfRefusal, check_form
from ._sessions import COOKIE

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ._context import AuthContext

__all__ = ["MAX_FORM_BYTES", "MAX_LOGIN_BYTES", "AuthMiddleware", "safe_next"]

MAX_FORM_BYTES = 1024 * 1024
MAX_LOGIN_BYTES = 16 * 1024
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Checked by their own routes: the sign-in form has no session yet (it has its own token).
_OWN_CHECKS = frozenset({"/login"})


def safe_next(path: str | None) -> str:
    """A same-site path to return to after sign-in (anything else becomes ``/``)."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")):
        return "/"
    if any(c in path for c in "\r\n\\") or "://" in path:
        return "/"
    if path.split("?")[0].rstrip("/") in {"/logout", "/login", "/auth/callback"}:
        return "/"  # nowhere to come back to
    return path


class AuthMiddleware:
    """Pure ASGI middleware: session lookup and the CSRF guard (see the module docstring)."""

    def __init__(self, app: ASGIApp, context: AuthContext, refuse: Any) -> None:
        self.app = app
        self.context = context
        # refuse(request, status, message) -> Response: the console's error page.
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        session = self.context.sessions.get(request.cookies.get(COOKIE))
        if session is not None and not self._credential_holds(session.credential):
            self.context.sessions.revoke(request.cookies.get(COOKIE))
            session = None
        scope["gm.session"] = session
        scope["gm.principal"] = session.principal if session else None
        if scope["method"] not in UNSAFE_METHODS:
            await self.app(scope, receive, send)
            return
        if scope["path"] in _OWN_CHECKS:
            # Its own token check, but the same bound on what an anonymous client may send.
            login_body = await self._read_body(receive, MAX_LOGIN_BYTES)
            if login_body is None:
                await _too_large(MAX_LOGIN_BYTES)(scope, receive, send)
                return
            await self.app(scope, _replayer(login_body, receive)(), send)
            return
        if session is None:
            target = "/login?next=" + quote(safe_next(scope["path"]), safe="/")
            await RedirectResponse(target, status_code=303)(scope, receive, send)
            return
        body = await self._read_body(receive, MAX_FORM_BYTES)
        if body is None:
            await _too_large(MAX_FORM_BYTES)(scope, receive, send)
            return
        replay = _replayer(body, receive)
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in {"application/x-www-form-urlencoded", "multipart/form-data"}:
            response: Response = self.refuse(
                request,
                403,
                "a state-changing request must be a form posted from the console's own pages",
            )
            await response(scope, receive, send)
            return
        async with Request(scope, replay()).form() as form:
            token, nonce = form.get("csrf_token"), form.get("form_nonce")
        try:
            check_form(session, token, nonce)
        except CsrfRefusal as refusal:
            who = session.principal
            self.context.audit(
                request,
                gm.AuditEvent.CONSOLE_CSRF,
                "denied",
                who.actor,
                source=who.source,
                reason_code=refusal.code,
            )
            await self.refuse(request, 403, refusal.reason)(scope, receive, send)
            return
        scope["gm.form_checked"] = True
        # checked_form registers the forms it read here; closed once the response is sent
        # (an uploaded file's temporary file would otherwise wait for the garbage collector).
        cleanup: list[Any] = []
        scope["gm.cleanup"] = cleanup
        try:
            await self.app(scope, replay(), send)
        finally:
            for close in cleanup:
                await close()

    def _credential_holds(self, credential: object) -> bool:
        if not isinstance(credential, Account):
            return True
        accounts = self.context.accounts
        if accounts is None:
            return False
        try:
            return accounts.still_valid(credential)
        except AccountsFileError:
            return False  # an unsafe or broken file: fail closed

    @staticmethod
    async def _read_body(receive: Receive, limit: int) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _too_large(limit: int) -> Response:
    return PlainTextResponse(f"the form is larger than {limit} bytes; send less", status_code=413)


def _replayer(body: bytes, original: Receive) -> Any:
    """A factory of ``receive`` callables that each give ``body`` once, then the real messages.

    After the body, the original ``receive`` is awaited, so a streaming response
    still learns of a real client disconnect (and only of a real one).
    """

    def make() -> Receive:
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await original()

        return receive

    return make
