"""The subject page: consent, holdings without content, holds, requests, receipts; its actions."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from urllib.parse import quote

from pages_client import User, audit_entries, flash

import governed_memory as gm

IBAN = "DE89 3704 0044 0532 0130 00"


def test_the_page_shows_holdings_and_consent_but_never_content(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    page = cweb_user("olivia").get("/subjects/alice")
    assert page.status_code == 200 and 'data-page="subject"' in page.text
    for section in ("consent", "holdings", "holds", "past-requests", "receipts"):
        assert f'data-testid="{section}"' in page.text, section
    holding = re.search(r'<tr data-testid="holding">(.*?)</tr>', page.text, re.S)
    assert holding and "support" in holding.group(1)
    assert '<td class="num">2</td>' in holding.group(1)  # alice's two records, not bob's
    assert "persist" in page.text and "grant" in page.text
    assert IBAN not in page.text
    [entry] = audit_entries(cweb_governance, "console:olivia", "console.view")
    assert entry["attrs"]["kind"] == "subject"
    assert entry["attrs"]["subject.hash"] == cweb_governance.audit.subject_hash("alice")  # type: ignore[attr-defined]


def test_the_content_view_is_audited_and_for_privacy_officers_only(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    officer = cweb_user("olivia")
    assert 'data-testid="view-content"' in officer.get("/subjects/alice").text
    content = officer.get("/subjects/alice/content")
    assert content.status_code == 200 and IBAN in content.text
    views = [e["attrs"] for e in audit_entries(cweb_governance, "console:olivia", "console.view")]
    assert {"kind": "content", "records": 2}.items() <= views[-1].items()
    admin = cweb_user("adam")
    page = admin.get("/subjects/alice")
    assert page.status_code == 200 and 'data-testid="view-content"' not in page.text
    refused = admin.get("/subjects/alice/content")
    assert refused.status_code == 403 and IBAN not in refused.text
    assert cweb_user("audrey").get("/subjects/alice").status_code == 403


def test_export_downloads_the_bundle_and_lists_its_receipt(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    officer = cweb_user("olivia")
    download = officer.submit("/subjects/alice", "export")
    assert download.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(download.content)).namelist()
    assert "export.json" in names and "manifest.json" in names
    export_id = download.headers["content-disposition"].split('"')[1].removesuffix(".zip")
    assert f'data-receipt-id="{export_id}"' in officer.get("/subjects/alice").text
    [entry] = audit_entries(cweb_governance, "console:olivia", "export")
    assert entry["attrs"]["export_id"] == export_id


def test_erase_needs_the_id_typed_again(cweb_user: Callable[[str], User]) -> None:
    officer = cweb_user("olivia")
    refused = officer.submit("/subjects/alice", "erase", confirm="alic")
    assert refused.status_code == 400
    assert flash(refused.text)[0][0] == "error" and "nothing was erased" in refused.text
    assert '<td class="num">2</td>' in refused.text  # still held


def test_a_hold_refuses_the_erasure_naming_it_until_released(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    admin = cweb_user("adam")
    placed = admin.submit(
        "/subjects/alice", "place-hold", reason="litigation 2026-114", until="2027-06-30"
    )
    [(kind, text)] = flash(placed.text)
    assert kind == "ok", text
    hold_id = text.removeprefix("placed hold ")
    assert "litigation 2026-114 (review by 2027-06-30)" in placed.text
    officer = cweb_user("olivia")
    refused = officer.submit("/subjects/alice", "erase", confirm="alice")
    assert refused.status_code == 400
    [(kind, text)] = flash(refused.text)
    assert kind == "error" and hold_id in text and "Nothing was erased" in text
    released = admin.submit("/subjects/alice", "release-hold", hold=hold_id)
    assert flash(released.text) == [("ok", f"released hold {hold_id}")]
    erased = officer.submit("/subjects/alice", "erase", confirm="alice", reason="ticket 7")
    [(kind, text)] = flash(erased.text)
    assert kind == "ok" and text.startswith("erased: receipt "), text
    assert "No records of this subject are held." in erased.text
    assert audit_entries(cweb_governance, "console:adam", "hold.place")
    assert audit_entries(cweb_governance, "console:adam", "hold.release")
    outcomes = {
        e["attrs"]["outcome"] for e in audit_entries(cweb_governance, "console:olivia", "erase")
    }
    assert outcomes == {"blocked", "ok"}


def test_a_bad_review_date_is_refused_without_placing_a_hold(
    cweb_user: Callable[[str], User],
) -> None:
    refused = cweb_user("adam").submit("/subjects/alice", "place-hold", reason="x", until="soon")
    assert refused.status_code == 400 and "'soon' is not a date" in flash(refused.text)[0][1]
    assert "No holds on this subject." in refused.text


def test_rectify_corrects_a_record_by_its_id(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    officer = cweb_user("olivia")
    content = officer.get("/subjects/alice/content").text
    record = re.search(r'<tr data-record-id="(rec-[0-9a-f]+)">(?:(?!</tr>).)*IBAN', content, re.S)
    assert record, content
    done = officer.submit(
        "/subjects/alice", "rectify", record=record.group(1), text="My IBAN is withheld."
    )
    [(kind, text)] = flash(done.text)
    assert kind == "ok" and text.startswith("rectified: receipt "), text
    assert IBAN not in officer.get("/subjects/alice/content").text
    assert audit_entries(cweb_governance, "console:olivia", "rectify")
    unknown = officer.submit("/subjects/alice", "rectify", record="rec-0000000000000000", text="x")
    assert unknown.status_code == 400 and "rec-0000000000000000" in flash(unknown.text)[0][1]


def test_a_subject_id_with_html_is_shown_inert(cweb_user: Callable[[str], User]) -> None:
    hostile = '<img src=x onerror="alert(1)">/../x'
    officer = cweb_user("olivia")
    page = officer.get("/subjects/" + quote(hostile, safe=""))
    assert page.status_code == 200
    assert hostile not in page.text and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    # Its forms post back to the same, still encoded, subject.
    assert 'action="/subjects/%3Cimg%20src%3Dx' in page.text


def test_an_id_the_library_refuses_is_its_one_line_error(cweb_user: Callable[[str], User]) -> None:
    page = cweb_user("olivia").get("/subjects/" + quote("a\x01b", safe=""))
    assert page.status_code == 400 and 'data-page="error"' in page.text
    [(kind, text)] = flash(page.text)
    assert kind == "error" and "subject_id" in text and "Traceback" not in page.text


def test_the_auditor_cannot_act_on_a_subject(cweb_user: Callable[[str], User]) -> None:
    auditor = cweb_user("audrey")
    fields = dict(
        re.findall(r'name="(csrf_token|form_nonce)" value="([^"]*)"', auditor.get("/requests").text)
    )
    refused = auditor.client.post("/subjects/alice/erase", data={**fields, "confirm": "alice"})
    assert refused.status_code == 403
    assert '<td class="num">2</td>' in cweb_user("olivia").get("/subjects/alice").text


def test_the_frame_finds_a_subjects_page_by_id(cweb_user: Callable[[str], User]) -> None:
    admin = cweb_user("adam")
    assert 'data-testid="find-subject"' in admin.get("/health").text
    found = admin.get("/subjects?subject=" + quote("a/b c", safe=""))
    assert found.status_code == 303 and found.headers["location"] == "/subjects/a%2Fb%20c"
    assert admin.get(found.headers["location"]).status_code == 200


def test_an_address_that_is_not_utf8_is_the_one_line_error(
    cweb_user: Callable[[str], User],
) -> None:
    page = cweb_user("olivia").get("/subjects/%ff%fe")
    assert page.status_code == 400 and 'data-page="error"' in page.text
    [(kind, text)] = flash(page.text)
    assert kind == "error" and "not percent-encoded UTF-8" in text
