"""What every page shares: the frame, security headers on every response, error pages."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from pages_client import User, flash
from starlette.applications import Starlette
from starlette.testclient import TestClient

HEADERS = {
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'; "
    "base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


@pytest.fixture
def cweb_backend() -> str:
    """The frame (headers, navigation, error pages) reads no storage: over files only.

    Every page that reads the deployment is tested over both backends in its own file.
    """
    return "file"


def _secured(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    for name, value in HEADERS.items():
        assert headers.get(name) == value, (name, headers.get(name))


@pytest.mark.parametrize(
    "path", ["/requests", "/requests/nope", "/no-such-page", "/audit", "/static/console.css"]
)
def test_every_response_carries_the_security_headers(
    cweb_user: Callable[[str], User], path: str
) -> None:
    response = cweb_user("olivia").get(path)
    _secured(response)
    if not path.startswith("/static/"):
        assert response.headers["cache-control"] == "no-store"


def test_the_sign_in_redirect_and_page_carry_them_too(cweb_anonymous: TestClient) -> None:
    _secured(cweb_anonymous.get("/requests"))
    _secured(cweb_anonymous.get("/login"))


def test_the_frame_names_the_user_and_offers_only_their_pages(
    cweb_user: Callable[[str], User],
) -> None:
    page = cweb_user("audrey").get("/requests").text
    assert re.search(r'<span data-testid="whoami">audrey \(auditor\)</span>', page)
    assert '<form method="post" action="/logout" data-testid="logout"' in page
    assert set(re.findall(r'data-nav="([a-z]+)"', page)) == {
        "requests",
        "retention",
        "audit",
        "health",
    }
    admin = cweb_user("adam").get("/retention").text
    assert set(re.findall(r'data-nav="([a-z]+)"', admin)) == {"retention", "audit", "health"}


def test_home_sends_each_role_to_its_first_page(cweb_user: Callable[[str], User]) -> None:
    assert cweb_user("olivia").get("/").headers["location"] == "/requests"
    assert cweb_user("adam").get("/").headers["location"] == "/retention"


def test_an_unknown_page_is_the_error_page(cweb_user: Callable[[str], User]) -> None:
    page = cweb_user("olivia").get("/no-such-page")
    assert page.status_code == 404 and 'data-page="error"' in page.text
    assert flash(page.text) == [("error", "no such page; use the links above")]


def test_an_unexpected_failure_is_a_plain_500_page_without_a_traceback(
    cweb_app: Starlette, cweb_user: Callable[[str], User], monkeypatch: pytest.MonkeyPatch
) -> None:
    import governed_memory as gm

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("secret internal detail /var/lib/x")

    user = cweb_user("olivia")
    monkeypatch.setattr(gm, "request_standings", broken)
    quiet = TestClient(
        cweb_app,
        base_url="https://testserver",
        follow_redirects=False,
        raise_server_exceptions=False,
        cookies=user.client.cookies,
    )
    page = quiet.get("/requests")
    assert page.status_code == 500 and 'data-page="error"' in page.text
    assert "secret internal detail" not in page.text and "Traceback" not in page.text
    _secured(page)
