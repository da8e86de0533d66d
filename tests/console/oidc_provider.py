"""A small OpenID Connect provider on 127.0.0.1, for the console's sign-in tests.

It implements what the console's authlib client uses: discovery
(``/.well-known/openid-configuration``), ``/jwks`` (an RSA key made at start),
``/authorize`` (authorization code flow; PKCE S256 required; a tiny form to
pick a test user, or straight back for ``auto_approve``), ``/token`` (client
secret, code verifier and redirect URI checked; an RS256 ID token with
``iss``, ``aud``, ``exp``, ``iat``, ``nonce`` and the groups) and
``/userinfo``. Knobs break one thing at a time for the refusal tests:
``id_token_claims`` overrides claims (a wrong ``iss``, ``aud``, ``nonce`` or
an ``exp`` in the past) and ``sign_with_other_key`` signs with a key the JWKS
does not publish.

In a test: ``with running_provider(users=...) as provider: provider.issuer``.
From a shell (the browser tests)::

    python tests/console/oidc_provider.py --port 9400 --client-id console \\
        --client-secret s3cret --user alice=privacy,staff --user bob=nobody \\
        [--auto-approve alice]

prints ``issuer=http://127.0.0.1:9400`` once it serves.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import html
import json
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import uvicorn
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_b64(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@dataclass
class StubUser:
    """A user the provider can sign in."""

    name: str
    groups: list[str]

    @property
    def email(self) -> str:
        return f"{self.name}@example.test"


@dataclass
class OidcProvider:
    """The provider's state and knobs (see the module docstring)."""

    client_id: str = "console"
    client_secret: str = "stub-client-secret"
    users: dict[str, StubUser] = field(default_factory=dict)
    auto_approve: str | None = None
    issuer: str = ""
    id_token_claims: dict[str, Any] = field(default_factory=dict)
    sign_with_other_key: bool = False
    omit_id_token: bool = False

    def __post_init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = secrets.token_hex(8)
        self._codes: dict[str, dict[str, Any]] = {}
        self._tokens: dict[str, str] = {}
        self.token_requests: list[dict[str, str]] = []
        self.app = Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self.discovery),
                Route("/jwks", self.jwks),
                Route("/authorize", self.authorize, methods=["GET", "POST"]),
                Route("/token", self.token, methods=["POST"]),
                Route("/userinfo", self.userinfo),
            ]
        )

    # -- endpoints ------------------------------------------------------

    async def discovery(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "userinfo_endpoint": f"{self.issuer}/userinfo",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "scopes_supported": ["openid", "profile", "email"],
            }
        )

    async def jwks(self, request: Request) -> Response:
        numbers = self._key.public_key().public_numbers()
        return JSONResponse(
            {
                "keys": [
                    {
                        "kty": "RSA",
                        "use": "sig",
                        "alg": "RS256",
                        "kid": self.kid,
                        "n": _int_b64(numbers.n),
                        "e": _int_b64(numbers.e),
                    }
                ]
            }
        )

    async def authorize(self, request: Request) -> Response:
        params = dict(request.query_params)
        if request.method == "POST":
            async with request.form() as form:
                params = {k: str(v) for k, v in form.items()}
        problem = self._check_authorize(params)
        if problem:
            return HTMLResponse(f"<p>refused: {html.escape(problem)}</p>", status_code=400)
        user = params.get("user") or self.auto_approve
        if user is None:
            return self._pick_user_form(params)
        if user not in self.users:
            return HTMLResponse(f"<p>no such test user {html.escape(user)}</p>", status_code=400)
        code = secrets.token_urlsafe(24)
        self._codes[code] = {**params, "user": user, "at": time.time()}
        back = {"code": code, "state": params["state"]}
        return RedirectResponse(f"{params['redirect_uri']}?{urlencode(back)}", status_code=302)

    def _check_authorize(self, params: dict[str, str]) -> str | None:
        if params.get("client_id") != self.client_id:
            return "unknown client_id"
        if params.get("response_type") != "code":
            return "response_type must be code"
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return "PKCE with S256 is required"
        if not params.get("state") or not params.get("nonce"):
            return "state and nonce are required"
        if "openid" not in params.get("scope", "").split():
            return "scope must include openid"
        if not params.get("redirect_uri"):
            return "redirect_uri is required"
        return None

    def _pick_user_form(self, params: dict[str, str]) -> Response:
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in params.items()
        )
        buttons = "".join(
            f'<button type="submit" name="user" value="{html.escape(u)}" '
            f'data-testid="pick-{html.escape(u)}">{html.escape(u)}</button>'
            for u in self.users
        )
        return HTMLResponse(
            f'<!doctype html><title>Stub provider</title><main data-page="stub-authorize">'
            f'<form method="post" action="/authorize">{hidden}{buttons}</form></main>'
        )

    async def token(self, request: Request) -> Response:
        async with request.form() as form:
            data = {k: str(v) for k, v in form.items()}
        self.token_requests.append(data)
        client_id, secret = data.get("client_id"), data.get("client_secret")
        auth = request.headers.get("authorization", "")
        if auth.startswith("Basic "):
            from urllib.parse import unquote

            pair = base64.b64decode(auth[6:]).decode()
            client_id, _, secret = (unquote(p) for p in pair.partition(":"))
        if client_id != self.client_id or secret != self.client_secret:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        grant = self._codes.pop(data.get("code", ""), None)
        if grant is None or data.get("grant_type") != "authorization_code":
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if data.get("redirect_uri") != grant["redirect_uri"]:
            return JSONResponse(
                {"error": "invalid_grant", "error_description": "redirect_uri"}, 400
            )
        verifier = data.get("code_verifier", "")
        if _b64(hashlib.sha256(verifier.encode()).digest()) != grant["code_challenge"]:
            return JSONResponse(
                {"error": "invalid_grant", "error_description": "PKCE verifier mismatch"}, 400
            )
        user = self.users[grant["user"]]
        access = secrets.token_urlsafe(24)
        self._tokens[access] = user.name
        body: dict[str, Any] = {"access_token": access, "token_type": "Bearer", "expires_in": 300}
        if not self.omit_id_token:
            body["id_token"] = self._id_token(user, grant["nonce"], access)
        return JSONResponse(body)

    async def userinfo(self, request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        name = self._tokens.get(auth.removeprefix("Bearer ").strip())
        if name is None:
            return JSONResponse({"error": "invalid_token"}, status_code=401)
        user = self.users[name]
        return JSONResponse(
            {"sub": user.name, "preferred_username": user.name, "groups": user.groups}
        )

    # -- tokens ---------------------------------------------------------

    def _id_token(self, user: StubUser, nonce: str, access_token: str) -> str:
        now = int(time.time())
        digest = hashlib.sha256(access_token.encode()).digest()
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": user.name,
            "aud": self.client_id,
            "exp": now + 300,
            "iat": now,
            "nonce": nonce,
            "at_hash": _b64(digest[:16]),
            "preferred_username": user.name,
            "email": user.email,
            "groups": user.groups,
        }
        claims.update(self.id_token_claims)
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        key = self._other_key if self.sign_with_other_key else self._key
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def public_pem(self) -> bytes:
        return self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@contextlib.contextmanager
def running_provider(port: int = 0, **kwargs: Any) -> Iterator[OidcProvider]:
    """Serve an :class:`OidcProvider` on 127.0.0.1 in a thread for the ``with`` block."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    provider = OidcProvider(**kwargs)
    provider.issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        provider.app, log_level="warning", lifespan="off", ws="none", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the stub OpenID provider did not start")
            time.sleep(0.01)
        yield provider
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--client-id", default="console")
    parser.add_argument("--client-secret", default="stub-client-secret")
    parser.add_argument("--user", action="append", default=[], help="NAME=GROUP,GROUP (repeatable)")
    parser.add_argument("--auto-approve", default=None, help="sign this user in without a form")
    args = parser.parse_args(argv)
    users = {}
    for spec in args.user:
        name, _, groups = spec.partition("=")
        users[name] = StubUser(name, [g for g in groups.split(",") if g])
    with running_provider(
        port=args.port,
        client_id=args.client_id,
        client_secret=args.client_secret,
        users=users,
        auto_approve=args.auto_approve,
    ) as provider:
        print(f"issuer={provider.issuer}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
