"""OIDC sign-in against the stub provider on 127.0.0.1 over real HTTP (_auth/_oidc.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from auth_app import audit_entries, client, make_app
from oidc_provider import OidcProvider, StubUser, running_provider
from starlette.testclient import TestClient

import governed_memory as gm

USERS = {
    "olga": StubUser("olga", ["dpo", "staff"]),
    "arne": StubUser("arne", ["it-admins"]),
    "nina": StubUser("nina", ["staff"]),
}
ROLE_MAP = {"dpo": "privacy-officer", "it-admins": "administrator", "staff": "auditor"}


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with running_provider(users=USERS) as running:
        yield running


@pytest.fixture(autouse=True)
def _reset(provider: OidcProvider) -> None:
    provider.auto_approve = "olga"
    provider.id_token_claims = {}
    provider.sign_with_other_key = False
    provider.omit_id_token = False


def _app(tmp_path: Path, provider: OidcProvider, **oidc: Any) -> tuple[TestClient, gm.Governance]:
    settings = {
        "issuer": provider.issuer,
        "client_id": provider.client_id,
        "client_secret": provider.client_secret,
        "allowed_groups": ["dpo", "it-admins"],
        **oidc,
    }
    app, gov = make_app(tmp_path, oidc=settings, role_map=ROLE_MAP)
    return client(app), gov


def _to_provider(c: TestClient) -> str:
    """GET /login/oidc and return the provider URL it redirects to."""
    response = c.get("/login/oidc?next=/officer")
    assert response.status_code == 302, response.text
    return response.headers["location"]


def _callback(authorize_url: str, **form: str) -> str:
    """What the browser does at the provider: returns the console callback path."""
    if form:
        query = {k: v[0] for k, v in parse_qs(urlsplit(authorize_url).query).items()}
        answer = httpx.post(authorize_url.split("?")[0], data={**query, **form})
    else:
        answer = httpx.get(authorize_url)
    assert answer.status_code == 302, answer.text
    back = answer.headers["location"]
    assert back.startswith("https://testserver/auth/callback?")
    return back.removeprefix("https://testserver")


def test_the_redirect_asks_for_a_code_with_pkce_state_and_nonce(
    tmp_path: Path, provider: OidcProvider
) -> None:
    c, _ = _app(tmp_path, provider)
    query = parse_qs(urlsplit(_to_provider(c)).query)
    assert query["response_type"] == ["code"]
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) == 43
    assert len(query["state"][0]) >= 20 and len(query["nonce"][0]) >= 20
    assert "openid" in query["scope"][0].split()
    flow_cookie = c.cookies["gm_oidc"]
    assert flow_cookie and "code_verifier" not in flow_cookie  # the verifier stays server-side


def test_a_user_in_an_allowed_group_signs_in_with_the_mapped_role(
    tmp_path: Path, provider: OidcProvider
) -> None:
    c, gov = _app(tmp_path, provider)
    done = c.get(_callback(_to_provider(c)))
    assert done.status_code == 200
    assert 'content="0;url=/officer"' in done.text  # a same-site page carries the Strict cookie on
    assert c.get("/").text == "olga privacy-officer oidc:olga"
    assert c.get("/officer").text == "officer page"
    entry = audit_entries(gov, "oidc:olga")[-1]
    assert entry["event"] == "console.login"
    assert entry["attrs"]["outcome"] == "ok"
    assert entry["attrs"]["source"] == f"oidc:{provider.issuer}"
    # The code was exchanged with the PKCE verifier and the client's secret.
    exchange = provider.token_requests[-1]
    assert exchange["grant_type"] == "authorization_code" and exchange["code_verifier"]


def test_the_provider_form_for_picking_a_user_works(tmp_path: Path, provider: OidcProvider) -> None:
    provider.auto_approve = None
    c, _ = _app(tmp_path, provider)
    authorize = _to_provider(c)
    page = httpx.get(authorize)
    assert 'data-testid="pick-arne"' in page.text
    c.get(_callback(authorize, user="arne"))
    assert c.get("/").text == "arne administrator oidc:arne"


def test_a_user_in_no_allowed_group_is_refused_with_a_clear_page(
    tmp_path: Path, provider: OidcProvider
) -> None:
    provider.auto_approve = "nina"
    c, gov = _app(tmp_path, provider)
    refused = c.get(_callback(_to_provider(c)))
    assert refused.status_code == 403
    assert 'data-page="error"' in refused.text
    assert "nina is in none of the groups allowed to use the console (dpo, it-admins)" in (
        refused.text
    )
    assert "gm_session" not in refused.cookies
    assert c.get("/").status_code == 303
    entry = audit_entries(gov, "oidc:nina")[-1]
    assert (entry["attrs"]["outcome"], entry["attrs"]["reason_code"]) == (
        "denied",
        "no_allowed_group",
    )


def test_without_allowed_groups_any_mapped_group_signs_in(
    tmp_path: Path, provider: OidcProvider
) -> None:
    provider.auto_approve = "nina"
    c, _ = _app(tmp_path, provider, allowed_groups=[])
    assert c.get(_callback(_to_provider(c))).status_code == 200
    assert c.get("/").text == "nina auditor oidc:nina"


def test_a_user_whose_groups_have_no_role_is_refused(
    tmp_path: Path, provider: OidcProvider
) -> None:
    provider.auto_approve = "nina"
    provider.users["nina"] = StubUser("nina", ["canteen"])
    try:
        c, _ = _app(tmp_path, provider, allowed_groups=[])
        refused = c.get(_callback(_to_provider(c)))
    finally:
        provider.users["nina"] = USERS["nina"]
    assert refused.status_code == 403
    assert "nina is in no group that has a console role" in refused.text


@pytest.mark.parametrize(
    ("knob", "value", "why"),
    [
        ("id_token_claims", {"iss": "http://127.0.0.1:1/evil"}, "Invalid claim: &#39;iss&#39;"),
        ("id_token_claims", {"aud": "another-client"}, "Invalid claim: &#39;aud&#39;"),
        ("id_token_claims", {"exp": 1_000_000_000, "iat": 999_999_000}, "token is expired"),
        ("id_token_claims", {"nonce": "replayed-nonce"}, "Invalid claim: &#39;nonce&#39;"),
        ("sign_with_other_key", True, "bad_signature"),
    ],
    ids=["wrong-issuer", "wrong-audience", "expired", "wrong-nonce", "unknown-key"],
)
def test_an_id_token_that_fails_a_check_is_refused(
    tmp_path: Path, provider: OidcProvider, knob: str, value: object, why: str
) -> None:
    setattr(provider, knob, value)
    c, gov = _app(tmp_path, provider)
    refused = c.get(_callback(_to_provider(c)))
    assert refused.status_code == 400, refused.text
    assert "ID token was refused" in refused.text
    assert why in refused.text
    assert "gm_session" not in refused.cookies
    assert c.get("/").status_code == 303
    entry = audit_entries(gov, "oidc:unknown")[-1]
    assert entry["attrs"]["reason_code"] == "bad_id_token"


def test_an_answer_without_an_id_token_is_refused(tmp_path: Path, provider: OidcProvider) -> None:
    provider.omit_id_token = True
    c, _ = _app(tmp_path, provider)
    refused = c.get(_callback(_to_provider(c)))
    assert refused.status_code == 400
    assert "without an ID token" in refused.text


def test_a_replayed_callback_is_refused(tmp_path: Path, provider: OidcProvider) -> None:
    c, _ = _app(tmp_path, provider)
    back = _callback(_to_provider(c))
    flow = c.cookies["gm_oidc"]
    assert c.get(back).status_code == 200
    replay = client(c.app)
    replay.cookies.set("gm_oidc", flow)
    refused = replay.get(back)
    assert refused.status_code == 400
    assert "already used" in refused.text


def test_a_callback_with_a_forged_state_is_refused(tmp_path: Path, provider: OidcProvider) -> None:
    c, _ = _app(tmp_path, provider)
    back = _callback(_to_provider(c))
    forged = re.sub(r"state=[^&]+", "state=forged", back)
    refused = c.get(forged)
    assert refused.status_code == 400
    assert c.get("/").status_code == 303


def test_a_callback_started_in_another_browser_is_refused(
    tmp_path: Path, provider: OidcProvider
) -> None:
    """Login CSRF: an attacker's own callback URL, opened in the victim's browser."""
    attacker, _ = _app(tmp_path, provider)
    back = _callback(_to_provider(attacker))
    victim = client(attacker.app)
    refused = victim.get(back)
    assert refused.status_code == 400
    assert "was not started here" in refused.text


def test_an_unreachable_provider_gives_a_clear_page(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app, _ = make_app(
        tmp_path,
        oidc={"issuer": f"http://127.0.0.1:{port}", "client_id": "c", "client_secret": "s"},
        role_map=ROLE_MAP,
    )
    refused = client(app).get("/login/oidc")
    assert refused.status_code == 502
    assert "could not be reached" in refused.text


def test_the_login_page_offers_the_provider_when_configured(
    tmp_path: Path, provider: OidcProvider
) -> None:
    c, _ = _app(tmp_path, provider)
    assert 'data-testid="oidc-login"' in c.get("/login").text
