"""The requests pages: lists with deadlines, open, verify, extend, close with the receipt verified."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pages_client import User, audit_entries, flash

import governed_memory as gm


def _open(
    officer: User, subject: str = "alice", kind: str = "access", received: str = "2026-11-20"
) -> str:
    done = officer.submit(
        "/requests", "open-request", subject=subject, kind=kind, received=received, channel="email"
    )
    assert done.status_code == 200, done.text
    match = re.search(r'<h1>Request <span class="id">([^<]+)</span>', done.text)
    assert match, done.text
    return match.group(1)


def test_an_opened_request_is_listed_with_its_deadline_and_days_left(
    cweb_user: Callable[[str], User],
) -> None:
    officer = cweb_user("olivia")
    request_id = _open(officer)
    page = officer.get("/requests?view=open")
    assert page.status_code == 200 and 'data-page="requests"' in page.text
    row = re.search(rf'<tr data-request-id="{request_id}">(.*?)</tr>', page.text, re.S)
    assert row, page.text
    cells = dict(re.findall(r'data-col="([a-z-]+)"[^>]*>(.*?)</td>', row.group(1), re.S))
    assert ">alice<" in cells["subject"]
    assert cells["kind"] == "access" and cells["received"] == "2026-11-20"
    # Received 2026-11-20: due a month later (Art. 12(3)); the clock says 2026-12-01.
    assert cells["deadline"].startswith("2026-12-20")
    assert cells["days-left"] == "19"
    assert "open" in cells["state"]


def test_the_views_split_the_register_by_state(cweb_user: Callable[[str], User]) -> None:
    officer = cweb_user("olivia")
    late = _open(officer, received="2026-10-01")  # due 2026-11-01: a month overdue
    soon = _open(officer, received="2026-11-03")  # due 2026-12-03: two days left
    assert late in officer.get("/requests?view=overdue").text
    assert soon not in officer.get("/requests?view=overdue").text
    assert soon in officer.get("/requests?view=due-soon").text
    assert late not in officer.get("/requests?view=closed").text


def test_verify_extend_and_close_with_a_receipt_that_verifies(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    officer = cweb_user("olivia")
    request_id = _open(officer)
    page = f"/requests/{request_id}"
    verified = officer.submit(page, "verify", method="id document")
    assert flash(verified.text) == [("ok", "identity verification recorded")]
    assert "verified" in verified.text and "id document" in verified.text
    extended = officer.submit(page, "extend", months="2", reason="many systems to search")
    assert flash(extended.text) == [("ok", "time limit extended")], extended.text
    assert 'data-testid="due">2027-02-20<' in extended.text
    exported = officer.submit("/subjects/alice", "export")
    assert exported.headers["content-type"] == "application/zip"
    receipt = exported.headers["content-disposition"].split('"')[1].removesuffix(".zip")
    closed = officer.submit(page, "close", receipt=receipt, outcome="answered")
    assert flash(closed.text) == [("ok", "request closed")], closed.text
    assert re.search(r'data-testid="receipt-status" class="status-verified">verified<', closed.text)
    # Every step is in the audit log under the officer's actor.
    for event in ("request.open", "request.verify", "request.extend", "export", "request.close"):
        assert audit_entries(cweb_governance, "console:olivia", event), event
    assert closed.text.count('data-testid="close"') == 0  # a closed request offers no actions


def test_a_refused_action_shows_the_librarys_message(cweb_user: Callable[[str], User]) -> None:
    officer = cweb_user("olivia")
    request_id = _open(officer)
    refused = officer.submit(f"/requests/{request_id}", "close", receipt="", outcome="answered")
    assert refused.status_code == 400
    [(kind, text)] = flash(refused.text)
    assert (kind == "error" and "give --receipt" in text) or "receipt" in text
    bad_date = officer.submit(
        "/requests", "open-request", subject="bob", kind="access", received="31/12/2026"
    )
    assert bad_date.status_code == 400
    [(kind, text)] = flash(bad_date.text)
    assert kind == "error" and "31/12/2026" in text
    assert "Traceback" not in bad_date.text


def test_an_unknown_request_is_a_page_naming_it(cweb_user: Callable[[str], User]) -> None:
    page = cweb_user("olivia").get("/requests/req-19990101-000000")
    assert page.status_code == 404 and 'data-page="error"' in page.text
    assert flash(page.text) == [
        (
            "error",
            "no request 'req-19990101-000000' in the register; open the list of requests and pick one",
        )
    ]


def test_an_unknown_view_is_refused_with_the_views_named(cweb_user: Callable[[str], User]) -> None:
    page = cweb_user("olivia").get("/requests?view=<script>")
    assert page.status_code == 400 and "<script>" not in page.text
    assert "open, due-soon, overdue, closed" in page.text


def test_viewing_the_register_is_audited_with_the_viewer(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    auditor = cweb_user("audrey")
    assert auditor.get("/requests").status_code == 200
    [entry] = audit_entries(cweb_governance, "console:audrey", "console.view")
    assert entry["attrs"]["kind"] == "requests"


def test_the_auditor_reads_the_register_but_cannot_act(cweb_user: Callable[[str], User]) -> None:
    request_id = _open(cweb_user("olivia"))
    auditor = cweb_user("audrey")
    listed = auditor.get("/requests")
    assert request_id in listed.text and 'data-testid="open-request"' not in listed.text
    shown = auditor.get(f"/requests/{request_id}")
    assert shown.status_code == 200 and 'data-testid="verify"' not in shown.text
    # A form crafted by hand with the auditor's own valid CSRF fields is still refused.
    fields = re.findall(r'name="(csrf_token|form_nonce)" value="([^"]*)"', listed.text)
    refused = auditor.client.post(
        f"/requests/{request_id}/verify", data={**dict(fields), "method": "forged"}
    )
    assert refused.status_code == 403 and "privacy-officer" in refused.text


def test_the_administrator_has_no_access_to_the_register(cweb_user: Callable[[str], User]) -> None:
    admin = cweb_user("adam")
    refused = admin.get("/requests")
    assert refused.status_code == 403 and 'data-page="error"' in refused.text
    assert 'data-nav="requests"' not in refused.text


def test_no_session_is_sent_to_the_sign_in_page(cweb_anonymous: Any) -> None:
    page = cweb_anonymous.get("/requests")
    assert page.status_code == 303 and page.headers["location"].startswith("/login")
