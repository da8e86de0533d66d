"""Cross-site request forgery: a per-session token and a one-time nonce in every form.

Every ``<form method="post">`` carries two hidden fields (:func:`form_fields`):

* ``csrf_token``: the session's secret token, compared in constant time
  (:func:`hmac.compare_digest`) with the session's on every POST, PUT, PATCH and
  DELETE. A page of another site cannot read it, so it cannot forge a form;
  the ``SameSite=Strict`` cookie is a second, independent guard.
* ``form_nonce``: issued for that one rendered form and spent when it is
  posted, so a replayed form (a resubmission, a captured request played
  again) is refused even within the session.

The sign-in form has no session yet: its token is an HMAC, under the
console's secret key, of a random pre-login cookie (``gm_login``), the
"double submit" pattern with a keyed token (OWASP CSRF cheat sheet).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from markupsafe import Markup, escape

from ._sessions import Session

__all__ = [
    "LOGIN_COOKIE",
    "CsrfRefusal",
    "check_form",
    "check_login_token",
    "form_fields",
    "login_token",
    "new_login_cookie",
]

LOGIN_COOKIE = "gm_login"


class CsrfRefusal(Exception):
    """A state-changing request without a valid token or nonce; ``reason`` says which."""

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code  # the audit entry's reason_code


def form_fields(session: Session) -> Markup:
    """The hidden ``csrf_token`` and a new ``form_nonce`` input for one form of ``session``."""
    return Markup(
        f'<input type="hidden" name="csrf_token" value="{escape(session.csrf_token)}">'
        f'<input type="hidden" name="form_nonce" value="{escape(session.issue_form())}">'
    )


def check_form(session: Session, token: object, nonce: object) -> None:
    """Accept a posted form of ``session`` once, or raise.

    Raises:
        CsrfRefusal: the token is missing or wrong, or the nonce is missing, unknown or spent.
    """
    if not isinstance(token, str) or not token:
        raise CsrfRefusal(
            "the form has no csrf_token; reload the page and submit the form from it",
            "missing_token",
        )
    if not hmac.compare_digest(token.encode("utf-8", "surrogatepass"), session.csrf_token.encode()):
        raise CsrfRefusal(
            "the form's csrf_token does not belong to this session; reload the page and submit "
            "the form again",
            "wrong_token",
        )
    if not isinstance(nonce, str) or not nonce:
        raise CsrfRefusal(
            "the form has no form_nonce; reload the page and submit the form again",
            "missing_nonce",
        )
    if not session.use_form(nonce):
        raise CsrfRefusal(
            "this form was already submitted (or is too old); reload the page to get a fresh "
            "form before doing it again",
            "replayed_form",
        )


def new_login_cookie() -> str:
    """A random value for the pre-login cookie."""
    return secrets.token_urlsafe(32)


def login_token(secret: bytes, cookie: str) -> str:
    """The sign-in form's token for the pre-login cookie ``cookie``."""
    return hmac.new(secret, b"gm-login\x00" + cookie.encode(), hashlib.sha256).hexdigest()


def check_login_token(secret: bytes, cookie: str | None, token: object) -> None:
    """Accept the sign-in form's token, or raise :class:`CsrfRefusal`."""
    if not cookie or not isinstance(token, str) or not token:
        raise CsrfRefusal(
            "the sign-in form has no valid csrf_token (cookies may be blocked); open /login and "
            "sign in from that page",
            "missing_token",
        )
    expected = login_token(secret, cookie)
    if not hmac.compare_digest(token.encode("utf-8", "surrogatepass"), expected.encode()):
        raise CsrfRefusal(
            "the sign-in form's csrf_token does not match; open /login again and sign in from it",
            "wrong_token",
        )
