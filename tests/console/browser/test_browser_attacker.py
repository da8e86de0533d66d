"""The console's refusals, walked in Chromium as an attacker would try them.

No session, the wrong role, a form without its CSRF token, a replayed form, a
forged session cookie, and a subject id made of HTML: each is refused (or
rendered inert), and the audit log shows what was tried and that nothing was done.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest
from deployment import ACCOUNTS, HOSTILE_SUBJECT, ConsoleServer, Deployment
from pages import (
    audited_events,
    flash_ok,
    form,
    on_page,
    request_row,
    sign_in,
    subject_path,
    submit,
)
from playwright.sync_api import BrowserContext, Page, expect

import governed_memory as gm

OFFICER, ADMIN, AUDITOR = ACCOUNTS["officer"], ACCOUNTS["admin"], ACCOUNTS["auditor"]
SESSION_COOKIE = "gm_session"


def _open_ids(deployment: Deployment, subject: str) -> list[str]:
    with deployment.governance() as gov:
        return [s.request.id for s in gm.request_standings(gov) if s.request.subject == subject]


@pytest.mark.parametrize("path", ["/requests", "/subjects/C-2001", "/audit", "/health"])
def test_without_a_session_every_page_leads_to_the_login_page(
    page: Page, path: str, shot: Callable[[Page, str], Path]
) -> None:
    page.goto(path)
    on_page(page, "login")
    expect(page.get_by_test_id("whoami")).to_have_count(0)
    if path == "/requests":
        shot(page, "login")


def test_a_post_without_a_session_does_nothing(
    context: BrowserContext, deployment: Deployment
) -> None:
    before = _open_ids(deployment, "C-3001")
    response = context.request.post(
        "/requests",
        form={"subject": "C-3001", "kind": "access", "received": "2026-12-01"},
        max_redirects=0,
    )
    assert response.status == 303 and "/login" in response.headers["location"]
    assert _open_ids(deployment, "C-3001") == before


def test_the_wrong_role_gets_a_403_page_naming_the_role_needed(
    page: Page, deployment: Deployment, shot: Callable[[Page, str], Path]
) -> None:
    sign_in(page, ADMIN)
    response = page.goto(subject_path("C-2001") + "/content")
    assert response is not None and response.status == 403
    on_page(page, "error")
    expect(page.locator("main")).to_contain_text("privacy-officer")
    expect(page.locator("main")).not_to_contain_text("disputes a card payment")
    shot(page, "forbidden")
    assert audited_events(deployment, ADMIN.actor)["console.access"] >= 1


def test_a_read_only_role_with_a_valid_token_still_cannot_act(
    page: Page, context: BrowserContext, deployment: Deployment
) -> None:
    """An auditor replays their own logout form's token and nonce against an officer's action."""
    sign_in(page, AUDITOR)
    logout = form(page, "logout")
    fields = {
        name: logout.locator(f"input[name={name}]").get_attribute("value") or ""
        for name in ("csrf_token", "form_nonce")
    }
    response = context.request.post(
        "/requests",
        form={**fields, "subject": "C-3005", "kind": "erasure", "received": "2026-12-01"},
        max_redirects=0,
    )
    assert response.status == 403
    assert "privacy-officer" in response.text()
    assert _open_ids(deployment, "C-3005") == []
    assert audited_events(deployment, AUDITOR.actor)["console.access"] >= 1


def test_a_form_without_its_csrf_token_is_refused(page: Page, deployment: Deployment) -> None:
    sign_in(page, OFFICER)
    page.goto("/requests")
    form(page, "open-request").locator("input[name=csrf_token]").evaluate("e => e.remove()")
    submit(page, "open-request", subject="C-3002", kind="access", received="2026-12-01")
    on_page(page, "error")
    expect(page.locator("main")).to_contain_text("csrf_token")
    assert _open_ids(deployment, "C-3002") == []


def test_a_form_with_another_sessions_token_is_refused(page: Page, deployment: Deployment) -> None:
    sign_in(page, OFFICER)
    page.goto("/requests")
    token = form(page, "open-request").locator("input[name=csrf_token]")
    token.evaluate("(e, v) => { e.value = v; }", secrets.token_urlsafe(32))
    submit(page, "open-request", subject="C-3003", kind="access", received="2026-12-01")
    on_page(page, "error")
    expect(page.locator("main")).to_contain_text("csrf_token")
    assert _open_ids(deployment, "C-3003") == []


def test_a_replayed_form_is_refused(
    page: Page, context: BrowserContext, deployment: Deployment
) -> None:
    """The same rendered form (token and one-time nonce) posted twice opens one request."""
    sign_in(page, OFFICER)
    page.goto("/requests")
    opening = form(page, "open-request")
    captured = {
        name: opening.locator(f"input[name={name}]").get_attribute("value") or ""
        for name in ("csrf_token", "form_nonce")
    }
    submit(page, "open-request", subject="C-3004", kind="access", received="2026-12-01")
    flash_ok(page)
    assert len(_open_ids(deployment, "C-3004")) == 1
    replay = context.request.post(
        "/requests",
        form={**captured, "subject": "C-3004", "kind": "access", "received": "2026-12-01"},
        max_redirects=0,
    )
    assert replay.status == 403
    assert "already submitted" in replay.text()
    assert len(_open_ids(deployment, "C-3004")) == 1


@pytest.mark.parametrize("forgery", ["random", "altered"])
def test_a_forged_session_cookie_is_no_session(
    page: Page, context: BrowserContext, console: ConsoleServer, forgery: str
) -> None:
    if forgery == "random":
        value = secrets.token_urlsafe(32)
    else:  # a real session's id with one character changed
        sign_in(page, OFFICER)
        real = next(c for c in context.cookies() if c["name"] == SESSION_COOKIE)
        value = real["value"][:-1] + ("A" if real["value"][-1] != "A" else "B")
        context.clear_cookies()
    context.add_cookies([{"name": SESSION_COOKIE, "value": value, "url": console.url}])
    page.goto("/requests")
    on_page(page, "login")


def test_a_subject_id_made_of_html_is_shown_as_text_and_runs_nothing(
    page: Page, deployment: Deployment, shot: Callable[[Page, str], Path]
) -> None:
    sign_in(page, OFFICER)
    page.goto("/requests")
    submit(page, "open-request", subject=HOSTILE_SUBJECT, kind="access", received="2026-12-01")
    flash_ok(page)
    page.goto("/requests?view=open")
    row = request_row(page, HOSTILE_SUBJECT, "access")
    expect(row.locator("[data-col=subject]")).to_have_text(HOSTILE_SUBJECT)
    for target in ["/requests?view=open", subject_path(HOSTILE_SUBJECT)]:
        page.goto(target)
        expect(page.locator("main")).to_contain_text(HOSTILE_SUBJECT)
        # Rendered inert: no element was made of the id, and neither of its scripts ran
        # (the CSP would block inline code anyway; the escaping must not rely on it).
        assert page.locator("main script, main img").count() == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"
    on_page(page, "subject")
    shot(page, "subject-html-id")
    assert audited_events(deployment, OFFICER.actor)["request.open"] >= 1
