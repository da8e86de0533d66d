"""A minimal console app for the access-control tests: install() plus a few probe routes.

The probe routes stand in for the pages (cweb's): ``/`` needs any signed-in
user, ``/officer`` the privacy-officer role, ``/form`` renders a form with
``csrf_fields`` and ``/action`` accepts it through ``checked_form``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

import governed_memory as gm
from governed_memory.console._auth import checked_form, csrf_fields, install, principal, require
from governed_memory.console._config import ConsoleConfig
from governed_memory.console._principal import Role

AUDIT_KEY = "5a" * 32
PASSWORD = "correct horse battery"


class FakeClock:
    """Seconds that move only when told (the sessions' and rate limits' clock)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def governance(tmp_path: Path) -> gm.Governance:
    """A workspace whose policy enables the audit log."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[policy]\nid = "bank"\nversion = "1"\n\n[audit]\nenabled = true\n')
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return gm.Governance(
        workspace=workspace, settings=gm.Settings(policy=policy, audit_key=AUDIT_KEY)
    )


async def _home(request: Request) -> Response:
    who = principal(request)
    return PlainTextResponse(f"{who.name} {who.role.value} {who.actor}")


async def _officer(request: Request) -> Response:
    require(request, Role.PRIVACY_OFFICER)
    return PlainTextResponse("officer page")


async def _form(request: Request) -> Response:
    principal(request)
    fields = csrf_fields(request)
    return HTMLResponse(f'<form method="post" action="/action">{fields}</form>')


async def _action(request: Request) -> Response:
    form = await checked_form(request)
    return PlainTextResponse(f"done {form.get('what', '')}")


def make_app(
    tmp_path: Path,
    *,
    clock: Callable[[], float] | None = None,
    users: dict[str, Role] | None = None,
    **settings: Any,
) -> tuple[Starlette, gm.Governance]:
    """The probe app over a fresh audited workspace, with local accounts for ``users``."""
    from pages_client import TEST_HASHING, write_accounts

    from governed_memory.console._config import PasswordHashing

    accounts = tmp_path / "accounts.json"
    users = users if users is not None else {"alice": Role.PRIVACY_OFFICER}
    write_accounts(accounts, users, PASSWORD)
    settings.setdefault("accounts_file", accounts)
    settings.setdefault("password_hashing", PasswordHashing(**TEST_HASHING))
    config = ConsoleConfig(**settings)
    app = Starlette(
        routes=[
            Route("/", _home),
            Route("/officer", _officer),
            Route("/form", _form),
            Route("/action", _action, methods=["POST"]),
        ]
    )
    gov = governance(tmp_path)
    app.state.governance = gov
    if clock is not None:
        install(app, config, now=clock)
    else:
        install(app, config)
    return app, gov


def client(app: Starlette, ip: str = "10.0.0.1") -> TestClient:
    """A browser: https (the cookies are Secure), no redirects followed."""
    return TestClient(
        app, base_url="https://testserver", client=(ip, 50000), follow_redirects=False
    )


def login_token(c: TestClient) -> str:
    """Open /login and return the sign-in form's csrf_token."""
    import re

    page = c.get("/login")
    assert page.status_code == 200, page.text
    match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert match, page.text
    return match.group(1)


def sign_in(c: TestClient, name: str = "alice", password: str = PASSWORD) -> Any:
    """Sign in through the form; returns the POST's response."""
    token = login_token(c)
    return c.post("/login", data={"username": name, "password": password, "csrf_token": token})


def form_fields(c: TestClient) -> dict[str, str]:
    """The hidden fields of one freshly rendered form."""
    import re

    page = c.get("/form")
    assert page.status_code == 200, page.text
    return dict(re.findall(r'name="(csrf_token|form_nonce)" value="([^"]*)"', page.text))


def audit_entries(gov: gm.Governance, actor: str) -> list[dict[str, Any]]:
    """The audit entries naming ``actor``."""
    return [e for e in gov.audit.entries_for(subject_id=actor)]  # type: ignore[attr-defined]
