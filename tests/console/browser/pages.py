"""What the browser walks do on the console's pages, by the markup names of the design.

Every step waits on a selector (Playwright's auto-waiting ``expect``), never on a
sleep: a slow machine only waits longer.
"""

from __future__ import annotations

import urllib.parse
from collections import Counter
from typing import Any

from deployment import Account, Deployment
from playwright.sync_api import Locator, Page, expect

expect.set_options(timeout=30_000)


def on_page(page: Page, name: str) -> None:
    """Wait until ``page`` shows the console page ``name`` (``<main data-page=NAME>``)."""
    expect(page.locator("main[data-page]")).to_have_attribute("data-page", name)


# The page each role lands on after sign-in (``/`` redirects there).
LANDING = {"privacy-officer": "requests", "administrator": "retention", "auditor": "requests"}


def sign_in(page: Page, account: Account) -> None:
    """Sign in through /login with ``account``'s name and password; wait for the landing page."""
    page.goto("/login")
    on_page(page, "login")
    page.fill("input[name=username]", account.name)
    page.fill("input[name=password]", account.password)
    page.click("main[data-page=login] button[type=submit]")
    whoami = page.get_by_test_id("whoami")
    expect(whoami).to_contain_text(account.name)
    expect(whoami).to_contain_text(account.role)
    on_page(page, LANDING[account.role])


def sign_out(page: Page) -> None:
    form(page, "logout").locator("[type=submit]").click()
    on_page(page, "login")


def form(page: Page, testid: str) -> Locator:
    return page.locator(f"form[data-testid={testid}]")


def submit(page: Page, testid: str, **fields: str) -> None:
    """Fill ``fields`` of the form ``testid`` (inputs, selects, textareas by name) and post it."""
    target = form(page, testid)
    for name, value in fields.items():
        control = target.locator(f"[name={name}]")
        if control.evaluate("e => e.tagName") == "SELECT":
            control.select_option(value)
        else:
            control.fill(value)
    target.locator("[type=submit]").click()


def flash_ok(page: Page) -> str:
    """The success message shown, once it is there."""
    message = page.locator("[role=alert].flash-ok")
    expect(message).to_be_visible()
    return message.inner_text()


def flash_error(page: Page) -> str:
    message = page.locator("[role=alert].flash-error")
    expect(message).to_be_visible()
    return message.inner_text()


def subject_path(subject: str) -> str:
    return "/subjects/" + urllib.parse.quote(subject, safe="")


def request_row(page: Page, subject: str, kind: str) -> Locator:
    """The row of the request list for ``subject``'s ``kind`` request (exactly one)."""
    rows = page.locator("tr[data-request-id]").filter(
        has=page.locator("[data-col=subject]", has_text=subject)
    )
    rows = rows.filter(has=page.locator("[data-col=kind]", has_text=kind))
    expect(rows).to_have_count(1)
    return rows


def audited_events(deployment: Deployment, actor: str) -> Counter[str]:
    """How many audit entries of each event name carry ``actor`` (e.g. ``console:olivia``)."""
    return Counter(entry["event"] for entry in deployment.audit_entries(actor))


def entries_about(deployment: Deployment, actor: str, subject: str) -> list[dict[str, Any]]:
    """The entries with ``actor`` about ``subject`` (its keyed hash)."""
    wanted = deployment.subject_hash(subject)
    return [
        e
        for e in deployment.audit_entries(actor)
        if e["attrs"].get("subject.hash") == wanted
        or wanted in e["attrs"].get("subject.hashes", [])
    ]
