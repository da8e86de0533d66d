"""The health page: scheduler leader, pending or blocked work, key ids and ages."""

from __future__ import annotations

import re
from collections.abc import Callable

from pages_client import User

import governed_memory as gm


def test_the_page_shows_the_leader_the_work_and_the_key_ids(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    page = cweb_user("adam").get("/health")
    assert page.status_code == 200 and 'data-page="health"' in page.text
    assert "no scheduler leads" in page.text
    assert 'data-testid="never-run"' in page.text and "(overdue)" not in page.text
    signer = cweb_governance.signer
    assert signer is not None and signer.key_id in page.text
    assert 'data-testid="audit-key">' in page.text
    assert "encryption at rest is off" in page.text
    assert re.search(r'data-testid="blocked-count">0<', page.text)


def test_a_blocked_erasure_is_listed_as_blocked_work(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    gm.Retention(cweb_governance).holds.place(subject="alice", reason="litigation", actor="legal")
    refused = cweb_user("olivia").submit("/subjects/alice", "erase", confirm="alice")
    assert refused.status_code == 400
    page = cweb_user("audrey").get("/health")
    assert re.search(r'data-testid="blocked-count">1<', page.text)
    assert 'data-testid="blocked-request"' in page.text


def test_the_privacy_officer_has_no_health_page(cweb_user: Callable[[str], User]) -> None:
    assert cweb_user("olivia").get("/health").status_code == 403
