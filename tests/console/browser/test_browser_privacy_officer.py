"""A privacy officer answers an access and an erasure request end to end, in Chromium.

Each walk runs over the file backend and over PostgreSQL (the ``deployment``
fixture's ids) and ends by reading the audit log: every action and every view of
personal data carries the officer's actor.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from deployment import ACCOUNTS, Deployment
from pages import (
    audited_events,
    entries_about,
    flash_error,
    flash_ok,
    form,
    on_page,
    request_row,
    sign_in,
    subject_path,
    submit,
)
from playwright.sync_api import Page, expect

import governed_memory as gm

OFFICER = ACCOUNTS["officer"]


def _bundle_files(download: Path) -> dict[str, bytes]:
    """The files of a downloaded export bundle (a zip or a tar archive), by name."""
    data = download.read_bytes()
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            return {Path(n).name: bundle.read(n) for n in bundle.namelist() if not n.endswith("/")}
    with tarfile.open(fileobj=io.BytesIO(data)) as bundle:
        return {
            Path(m.name).name: bundle.extractfile(m).read()  # type: ignore[union-attr]
            for m in bundle.getmembers()
            if m.isfile()
        }


def _open_request(page: Page, subject: str, kind: str, reference: str) -> str:
    """Enter a request through the requests page's form; returns its id."""
    page.goto("/requests?view=open")
    on_page(page, "requests")
    submit(
        page,
        "open-request",
        subject=subject,
        kind=kind,
        received="2026-12-01",
        channel="email",
        reference=reference,
    )
    flash_ok(page)
    page.goto("/requests?view=open")
    row = request_row(page, subject, kind)
    expect(row.locator("[data-col=deadline]")).not_to_be_empty()
    expect(row.locator("[data-col=days-left]")).to_have_text(re.compile(r"^-?\d+$"))
    request_id = row.get_attribute("data-request-id")
    assert request_id
    return request_id


def _verify(page: Page, request_id: str) -> None:
    page.goto(f"/requests/{request_id}")
    on_page(page, "request")
    submit(page, "verify", method="passport checked at the branch")
    flash_ok(page)


def _close_with_receipt(page: Page, request_id: str, receipt: str) -> None:
    page.goto(f"/requests/{request_id}")
    on_page(page, "request")
    submit(page, "close", receipt=receipt)
    flash_ok(page)
    expect(page.get_by_test_id("receipt-status")).to_have_text("verified")


def _receipt(page: Page, subject: str, kind: str) -> str:
    """The id of the one ``kind`` receipt (export, erasure) listed on ``subject``'s page."""
    page.goto(subject_path(subject))
    on_page(page, "subject")
    rows = page.get_by_test_id("receipts").locator("tr[data-receipt-id]")
    rows = rows.filter(has=page.locator("td", has_text=kind))
    expect(rows).to_have_count(1)
    receipt = rows.get_attribute("data-receipt-id")
    assert receipt
    return receipt


def test_an_access_request_from_arrival_to_closing(
    page: Page, deployment: Deployment, shot: Callable[[Page, str], Path]
) -> None:
    """Open, verify, export and download the bundle, view content (audited), close: verified."""
    subject = "C-1002"
    sign_in(page, OFFICER)
    shot(page, "requests")
    request_id = _open_request(page, subject, "access", "T-1002")
    _verify(page, request_id)
    shot(page, "request")

    page.goto(subject_path(subject))
    on_page(page, "subject")
    holdings = page.get_by_test_id("holdings")
    expect(holdings).to_contain_text("Support")
    expect(holdings).to_contain_text("Advisor")
    expect(page.locator("main")).not_to_contain_text("pays her loan early")  # no content
    shot(page, "subject")

    with page.expect_download() as downloading:
        form(page, "export").locator("[type=submit]").click()
    download = downloading.value
    files = _bundle_files(Path(download.path()))
    document = json.loads(files["export.json"])
    texts = sorted(r["content"] for r in document["records"])
    assert texts == ["C-1002 asks what we hold about her loan", "C-1002 pays her loan early"]

    page.goto(subject_path(subject))
    page.get_by_test_id("view-content").click()
    expect(page.locator("main")).to_contain_text("C-1002 pays her loan early")

    receipt = _receipt(page, subject, "export")
    _close_with_receipt(page, request_id, receipt)
    shot(page, "request-closed")

    events = audited_events(deployment, OFFICER.actor)
    for event in ("request.open", "request.verify", "export", "request.close"):
        assert events[event] >= 1, (event, events)
    about = entries_about(deployment, OFFICER.actor, subject)
    assert {"request.open", "request.verify", "export", "request.close"} <= {
        e["event"] for e in about
    }
    # Each page that showed the subject is a view with the officer as actor, and the
    # view of the records' content is one of them.
    views = [e["attrs"]["kind"] for e in about if e["event"] == "console.view"]
    assert {"request", "subject", "content"} <= set(views), views


def test_an_erasure_request_from_arrival_to_closing(
    page: Page, deployment: Deployment, shot: Callable[[Page, str], Path]
) -> None:
    """Open, verify, erase (a wrong confirmation is refused), close with the receipt: verified."""
    subject = "C-1001"
    sign_in(page, OFFICER)
    request_id = _open_request(page, subject, "erasure", "T-1001")
    _verify(page, request_id)

    page.goto(subject_path(subject))
    on_page(page, "subject")
    submit(page, "erase", confirm="C-100")  # one character short: refused
    assert "C-100" in flash_error(page)

    # A legal hold refuses the erasure, naming the hold; released, the erasure runs.
    page.goto(subject_path(subject))
    submit(page, "place-hold", reason="litigation 2026-114")
    flash_ok(page)
    page.goto(subject_path(subject))
    hold = page.get_by_test_id("holds").locator("tr[data-hold-id]")
    expect(hold).to_have_count(1)
    hold_id = hold.get_attribute("data-hold-id")
    assert hold_id
    submit(page, "erase", confirm=subject)
    assert hold_id in flash_error(page)
    page.goto(subject_path(subject))
    submit(page, "release-hold", hold=hold_id)
    flash_ok(page)

    page.goto(subject_path(subject))
    submit(page, "erase", confirm=subject)
    flash_ok(page)

    page.goto(subject_path(subject))
    page.get_by_test_id("view-content").click()
    expect(page.locator("main")).not_to_contain_text("savings account 4471")

    receipt = _receipt(page, subject, "erasure")
    _close_with_receipt(page, request_id, receipt)

    with deployment.governance() as gov:
        assert gm.subject_records(gov, subject) == []
    events = audited_events(deployment, OFFICER.actor)
    for event in ("request.open", "request.verify", "erase", "request.close"):
        assert events[event] >= 1, (event, events)
    about = entries_about(deployment, OFFICER.actor, subject)
    assert {"request.open", "request.verify", "erase", "request.close"} <= {
        e["event"] for e in about
    }
    # The mistyped confirmation reached no erasure; the held one was refused, then it ran.
    erased = [e["attrs"]["outcome"] for e in about if e["event"] == "erase"]
    assert erased == ["blocked", "ok"], erased
    assert {"hold.place", "hold.release"} <= {e["event"] for e in about}
