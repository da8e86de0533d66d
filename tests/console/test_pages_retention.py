"""The retention page: policy, next purge, a dry-run preview for a day, the last purges."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path

from pages_client import User, flash

import governed_memory as gm

DAY = dt.timedelta(days=1)


def _archive(gov: gm.Governance) -> None:
    conv = gm.Conversation(
        name="support_conv",
        memory_md_path=gm.memory_md_path("support", gov.workspace),
        governance=gov,
    )
    conv.compact("Customer support so far.")


def test_the_page_shows_the_policy_and_the_next_purge(cweb_user: Callable[[str], User]) -> None:
    page = cweb_user("adam").get("/retention")
    assert page.status_code == 200 and 'data-page="retention"' in page.text
    assert "console-test v1" in page.text and "30 days" in page.text
    assert "every 1d" in page.text or "every" in page.text
    assert "No purge has run yet." in page.text
    # A schedule that never ran is said to be so, not "overdue" (nothing says since when).
    assert 'data-testid="never-run"' in page.text and "(overdue)" not in page.text


def test_the_preview_lists_what_a_purge_that_day_would_delete_and_changes_nothing(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    _archive(cweb_governance)
    admin = cweb_user("adam")
    assert 'data-testid="preview"' in admin.get("/retention").text
    soon = admin.get("/retention?as_of=2026-12-15")
    assert "Nothing is due on that day." in soon.text
    later = admin.get("/retention?as_of=2027-02-01")
    items = re.findall(r'<tr data-testid="plan-item">(.*?)</tr>', later.text, re.S)
    assert len(items) == 1 and "archives_max_age" in items[0] and "delete" in items[0]
    # A dry run: the archive is still there.
    assert gm.Retention(cweb_governance).plan(as_of=None) is not None
    again = admin.get("/retention?as_of=2027-02-01")
    assert len(re.findall(r'data-testid="plan-item"', again.text)) == 1


def test_a_finished_purge_is_listed(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance
) -> None:
    _archive(cweb_governance)
    clock = cweb_governance.clock
    assert isinstance(clock, gm.FixedClock)
    clock.advance(dt.timedelta(days=40))  # the archive is past archives_max_age (30d)
    report = gm.Retention(cweb_governance).purge()
    assert report.total_deleted == 1
    page = cweb_user("audrey").get("/retention")
    assert f"{report.purge_id}" in page.text and 'data-testid="purge-report"' in page.text


def test_a_bad_preview_date_is_the_one_line_error(cweb_user: Callable[[str], User]) -> None:
    page = cweb_user("adam").get("/retention?as_of=31.01.2027")
    assert page.status_code == 400
    assert flash(page.text) == [
        ("error", "preview date '31.01.2027' is not a date; write YYYY-MM-DD (e.g. 2027-01-31)")
    ]


def test_the_privacy_officer_has_no_retention_page(cweb_user: Callable[[str], User]) -> None:
    assert cweb_user("olivia").get("/retention").status_code == 403


def test_the_page_counts_the_exports_the_last_purge_could_not_delete_and_names_none(
    cweb_user: Callable[[str], User], cweb_governance: gm.Governance, tmp_path: Path
) -> None:
    """Their folders may name a person: the page gives the number, the CLI and the log the paths."""
    gov = cweb_governance
    gov.policy = gov.policy.model_copy(
        update={"retention": gov.policy.retention.model_copy(update={"exports_max_age": DAY * 7})}
    )
    _archive(gov)  # (a purge that deletes nothing leaves no receipt)
    folder = tmp_path / "alice-handed-over"
    gm.export_subject(gov, "alice", folder)
    clock = gov.clock
    assert isinstance(clock, gm.FixedClock)
    clock.advance(DAY * 40)  # the archive is past archives_max_age, the export past 7 days
    report = gm.Retention(gov).purge()
    assert report.total_deleted == 1 and len(report.unmanaged_exports) == 1
    page = cweb_user("audrey").get("/retention").text
    assert re.search(
        r'data-testid="unmanaged-exports">The last purge found 1 subject-access export ', page
    )
    assert "alice-handed-over" not in page
