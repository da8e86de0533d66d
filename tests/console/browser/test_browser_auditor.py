"""An auditor walks the read-only pages in Chromium: no content, no action buttons.

The auditor sees the request register (subjects, deadlines), the audit chain's
status, searches it and downloads its export, and reads retention and health; no
page shows them a message's content or a form that changes anything, and the
audit log records their views with their actor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from deployment import ACCOUNTS, MESSAGES, WAITING_REQUEST, Deployment
from pages import audited_events, on_page, request_row, sign_in, subject_path, submit
from playwright.sync_api import Page, expect

AUDITOR = ACCOUNTS["auditor"]
CONTENTS = [text for messages in MESSAGES.values() for _, text in messages]


def _no_content_and_no_actions(page: Page) -> None:
    """The page shows no message content and no form but the logout."""
    text = page.locator("main").inner_text()
    assert not [c for c in CONTENTS if c in text], "content shown to an auditor"
    forms = page.locator("form[method=post], form[method=POST]")
    actions = [
        forms.nth(i).get_attribute("data-testid")
        for i in range(forms.count())
        if forms.nth(i).get_attribute("data-testid") != "logout"
    ]
    assert actions == [], f"action forms shown to an auditor: {actions}"
    expect(page.get_by_test_id("view-content")).to_have_count(0)


def test_an_auditor_walks_requests_audit_retention_and_health_without_content_or_actions(
    page: Page, deployment: Deployment, shot: Callable[[Page, str], Path]
) -> None:
    sign_in(page, AUDITOR)

    page.goto("/requests?view=open")
    on_page(page, "requests")
    row = request_row(page, WAITING_REQUEST["subject"], WAITING_REQUEST["kind"])
    expect(row.locator("[data-col=deadline]")).not_to_be_empty()
    _no_content_and_no_actions(page)
    row.locator("a").first.click()
    on_page(page, "request")
    _no_content_and_no_actions(page)

    page.locator("a[data-nav=audit]").click()
    on_page(page, "audit")
    expect(page.get_by_test_id("chain-status")).to_contain_text("verified")
    shot(page, "audit")
    _no_content_and_no_actions(page)
    submit(page, "audit-search", operation="request.open")
    entries = page.get_by_test_id("audit-entry")
    expect(entries.first).to_be_visible()
    assert all("request.open" in entries.nth(i).inner_text() for i in range(entries.count()))
    _no_content_and_no_actions(page)
    page.goto("/audit")
    submit(page, "audit-search", subject=WAITING_REQUEST["subject"])
    expect(entries.first).to_be_visible()  # the waiting request's entries, found by its subject
    _no_content_and_no_actions(page)

    with page.expect_download() as downloading:
        page.get_by_test_id("audit-export").click()
    lines = Path(downloading.value.path()).read_text().splitlines()
    exported = [json.loads(line) for line in lines if line.strip()]
    assert exported and {"seq", "event", "hash", "mac"} <= set(exported[0])
    text = "\n".join(lines)
    assert not [c for c in CONTENTS if c in text]

    page.locator("a[data-nav=retention]").click()
    on_page(page, "retention")
    _no_content_and_no_actions(page)
    submit(page, "preview", as_of="2027-06-01")  # a dry run: a GET, open to read-only roles
    on_page(page, "retention")
    expect(page.get_by_test_id("plan")).to_be_visible()
    shot(page, "retention")
    _no_content_and_no_actions(page)

    page.locator("a[data-nav=health]").click()
    on_page(page, "health")
    shot(page, "health")
    _no_content_and_no_actions(page)

    response = page.goto(subject_path(WAITING_REQUEST["subject"]) + "/content")
    assert response is not None and response.status == 403
    expect(page.locator("main")).not_to_contain_text("disputes a card payment")

    events = audited_events(deployment, AUDITOR.actor)
    assert events["console.login"] == 1, events
    assert events["console.view"] >= 1, events  # the register and the request they read
    assert events["console.access"] >= 1, events  # the refused content view
    acted = set(events) - {"console.login", "console.view", "console.access"}
    assert acted == set(), f"an auditor changed something: {acted}"
