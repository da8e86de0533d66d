"""The console's access control: accounts, sessions, CSRF, login rate limits and OIDC.

The seam the pages code against (docs/console-auth.md):

* :func:`install` adds ``/login``, ``/login/oidc``, ``/auth/callback`` and
  ``/logout`` and the middleware that resolves the session;
* :func:`principal` / :func:`require` give the signed-in user of a request or
  refuse it (redirect to ``/login``; 403 naming the role needed);
* :func:`csrf_fields` renders the hidden ``csrf_token`` and ``form_nonce``
  inputs of a form, and :func:`checked_form` reads a posted form and refuses
  it (403) when either is missing, wrong or already used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from markupsafe import Markup, escape
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request

from .._principal import Principal, Role

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from .._config import ConsoleConfig

__all__ = ["checked_form", "csrf_fields", "install", "principal", "require"]


class NotSignedIn(HTTPException):
    """No valid session: the app turns it into a redirect to ``/login``."""

    def __init__(self) -> None:
        super().__init__(status_code=401, detail="sign in to use the console")


def install(app: Starlette, config: ConsoleConfig) -> None:
    """Add the authentication routes and the session middleware to ``app``."""
    app.state.console_auth_config = config


def principal(request: Request) -> Principal:
    """The signed-in user of ``request``.

    Raises:
        NotSignedIn: no valid session (the app redirects to ``/login``).
    """
    found = request.scope.get("gm.principal")
    if not isinstance(found, Principal):
        raise NotSignedIn()
    return found


def require(request: Request, *roles: Role) -> Principal:
    """The signed-in user, if they hold one of ``roles``.

    Raises:
        NotSignedIn: no valid session.
        HTTPException: 403, naming the roles that may use the page.
    """
    who = principal(request)
    if roles and who.role not in roles:
        needed = " or ".join(r.value for r in roles)
        raise HTTPException(
            status_code=403,
            detail=f"this page needs the role {needed}; {who.name} is signed in as {who.role.value}",
        )
    return who


def csrf_fields(request: Request) -> Markup:
    """The hidden ``csrf_token`` and ``form_nonce`` inputs for a form of this session."""
    token = str(request.scope.get("gm.csrf_token", ""))
    return Markup(
        f'<input type="hidden" name="csrf_token" value="{escape(token)}">'
        '<input type="hidden" name="form_nonce" value="">'
    )


async def checked_form(request: Request) -> FormData:
    """The posted form, once its CSRF token and one-time nonce are checked.

    Raises:
        HTTPException: 403 when the token is missing or wrong or the nonce was used.
    """
    form = await request.form()
    expected = str(request.scope.get("gm.csrf_token", ""))
    if not expected or form.get("csrf_token") != expected:
        raise HTTPException(status_code=403, detail="the form's CSRF token is missing or wrong")
    return form
