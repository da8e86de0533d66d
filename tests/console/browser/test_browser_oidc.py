"""Signing in through OpenID Connect in Chromium, against the stub provider on 127.0.0.1.

The console (a subprocess) is configured with the stub's issuer and a role map;
the browser follows the real redirects: console -> provider's /authorize (pick a
test user) -> console's /auth/callback (code exchange with PKCE, ID token checked
against the provider's JWKS) -> signed in with the mapped role. A user in no
mapped group gets a clear 403 page and no session.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from chromium import new_context
from deployment import ConsoleServer, Deployment, write_console_config
from oidc_provider import OidcProvider, StubUser, running_provider  # tests/console
from pages import audited_events, on_page, sign_out
from playwright.sync_api import Browser, Page, expect

ISSUER_USERS = {
    "dana": StubUser("dana", ["privacy-team", "staff"]),
    "erin": StubUser("erin", ["internal-audit"]),
    "mallory": StubUser("mallory", ["marketing"]),
}
ROLE_MAP = {"privacy-team": "privacy-officer", "internal-audit": "auditor"}


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with running_provider(users=ISSUER_USERS, client_secret="browser-walk-secret") as stub:
        yield stub


@pytest.fixture(scope="module")
def oidc_console(deployment: Deployment, provider: OidcProvider) -> Iterator[ConsoleServer]:
    """A console that signs users in through the stub provider only."""
    oidc = {
        "issuer": provider.issuer,
        "client_id": provider.client_id,
        "client_secret": provider.client_secret,
    }
    inline = ", ".join(f"{k} = {json.dumps(v)}" for k, v in oidc.items())
    roles = ", ".join(f"{json.dumps(g)} = {json.dumps(r)}" for g, r in ROLE_MAP.items())
    config = write_console_config(
        deployment, [], name="oidc", oidc=f"{{ {inline} }}", role_map=f"{{ {roles} }}"
    )
    server = ConsoleServer(deployment, config)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def oidc_page(browser: Browser, oidc_console: ConsoleServer) -> Iterator[Page]:
    context = new_context(browser, oidc_console.url)
    try:
        yield context.new_page()
    finally:
        context.close()


def _sign_in_at_the_provider(page: Page, user: str) -> None:
    page.goto("/login")
    on_page(page, "login")
    page.get_by_test_id("oidc-login").click()
    on_page(page, "stub-authorize")  # the provider's page, on its own port
    page.get_by_test_id(f"pick-{user}").click()


@pytest.mark.parametrize(("user", "role"), [("dana", "privacy-officer"), ("erin", "auditor")])
def test_an_oidc_user_signs_in_with_the_role_their_group_maps_to(
    oidc_page: Page,
    deployment: Deployment,
    user: str,
    role: str,
    shot: Callable[[Page, str], Path],
) -> None:
    _sign_in_at_the_provider(oidc_page, user)
    whoami = oidc_page.get_by_test_id("whoami")
    expect(whoami).to_contain_text(user)
    expect(whoami).to_contain_text(role)
    on_page(oidc_page, "requests")
    if user == "dana":
        shot(oidc_page, "oidc-signed-in")
    context = oidc_page.context
    session = [c for c in context.cookies() if c["name"] == "gm_session"]
    assert len(session) == 1
    sign_out(oidc_page)
    context.add_cookies(session)  # the old cookie played back: the server ended the session
    oidc_page.goto("/requests")
    on_page(oidc_page, "login")
    events = audited_events(deployment, f"oidc:{user}")
    assert events["console.login"] >= 1 and events["console.logout"] >= 1, events


def test_an_oidc_user_in_no_allowed_group_gets_a_403_page_and_no_session(
    oidc_page: Page, deployment: Deployment, shot: Callable[[Page, str], Path]
) -> None:
    _sign_in_at_the_provider(oidc_page, "mallory")
    on_page(oidc_page, "error")
    expect(oidc_page.locator("main")).to_contain_text("group")
    shot(oidc_page, "oidc-refused")
    assert not [c for c in oidc_page.context.cookies() if c["name"] == "gm_session"]
    oidc_page.goto("/requests")
    on_page(oidc_page, "login")
    refused = [
        e["attrs"]["outcome"]
        for e in deployment.audit_entries("oidc:mallory")
        if e["event"] == "console.login"
    ]
    assert refused == ["denied"]
