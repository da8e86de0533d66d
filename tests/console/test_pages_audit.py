"""The audit page: chain status and checkpoint, search by id/operation/actor/day, export."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from pages_client import User, audit_entries, flash

import governed_memory as gm


def test_the_chain_verifies_and_the_search_finds_an_actors_entries(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    cweb_user("olivia").get("/subjects/alice")
    auditor = cweb_user("audrey")
    page = auditor.get("/audit")
    assert page.status_code == 200 and 'data-page="audit"' in page.text
    assert re.search(r'data-testid="chain-status"[^>]*>verified<', page.text)
    assert 'data-testid="audit-search"' in page.text
    found = auditor.get("/audit?actor=console:olivia&operation=console.view")
    rows = re.findall(r'<tr data-testid="audit-entry">(.*?)</tr>', found.text, re.S)
    assert len(rows) == 1 and "console.view" in rows[0] and "kind=subject" in rows[0]
    subject_hash = cweb_governance.audit.subject_hash("alice")  # type: ignore[attr-defined]
    by_subject = auditor.get("/audit?subject=alice")
    assert (
        subject_hash in by_subject.text
        and "alice"
        not in re.sub(r'name="subject" value="alice"', "", by_subject.text).split("<table>")[1]
    )


def test_a_checkpoint_is_shown_once_signed(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    signer = cweb_governance.signer
    assert signer is not None
    point = cweb_governance.audit.checkpoint(signer)  # type: ignore[attr-defined]
    page = cweb_user("adam").get("/audit")
    assert f"seq {point.seq} signed" in page.text and signer.key_id in page.text


def test_a_tampered_log_is_shown_broken(
    cweb_user: Callable[[str], User],
    cweb_governance: gm.Governance,
    cweb_backend: str,
    request: pytest.FixtureRequest,
) -> None:
    user = cweb_user("audrey")
    if cweb_backend == "file":
        segment = sorted(
            (cweb_governance.workspace / ".governed_memory" / "audit").glob("*.jsonl")
        )[0]
        lines = segment.read_bytes().splitlines(keepends=True)
        lines[1] = lines[1].replace(b'"outcome":"ok"', b'"outcome":"no"')
        segment.write_bytes(b"".join(lines))
    else:
        import psycopg

        url = request.getfixturevalue("pg_schema_url")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET session_replication_role = replica")  # past the table's trigger
            conn.execute(
                "UPDATE governed_memory.audit_entries SET line = convert_to(replace("
                'convert_from(line, \'UTF8\'), \'"outcome":"ok"\', \'"outcome":"no"\'), '
                "'UTF8') WHERE seq = 2"
            )
    page = user.get("/audit")
    assert re.search(r'data-testid="chain-status"[^>]*>broken<', page.text), page.text
    assert 'data-testid="chain-problem"' in page.text


def test_the_export_is_the_matching_entries_as_stored_and_is_audited(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    cweb_user("olivia").get("/subjects/alice")
    auditor = cweb_user("audrey")
    page = auditor.get("/audit?operation=console.view&actor=console:olivia")
    link = re.search(r'data-testid="audit-export" href="([^"]+)"', page.text)
    assert link
    download = auditor.get(link.group(1).replace("&amp;", "&"))
    assert download.headers["content-disposition"] == 'attachment; filename="audit-export.jsonl"'
    entries = [json.loads(line) for line in download.text.splitlines()]
    assert [e["event"] for e in entries] == ["console.view"]
    assert {"hash", "mac", "prev", "seq"} <= entries[0].keys()
    views = audit_entries(cweb_governance, "console:audrey", "console.view")
    assert views[-1]["attrs"]["kind"] == "audit-export"


def test_a_bad_date_is_the_one_line_error(cweb_user: Callable[[str], User]) -> None:
    page = cweb_user("audrey").get("/audit?since=yesterday")
    assert page.status_code == 400
    assert flash(page.text) == [
        ("error", "since 'yesterday' is not a date; write YYYY-MM-DD (e.g. 2026-12-01)")
    ]


def test_the_privacy_officer_has_no_audit_page(cweb_user: Callable[[str], User]) -> None:
    refused = cweb_user("olivia").get("/audit/export")
    assert refused.status_code == 403 and "administrator or auditor" in refused.text
