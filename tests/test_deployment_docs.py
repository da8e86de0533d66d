"""The docs make one statement about multi-host deployments: one host, local disk, until PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_says_several_hosts_may_share_a_workspace(page: Path) -> None:
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert not re.search(r"(may|can) run [^.]* on (several|multiple) hosts", text, re.I), page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_naming_nfs_gives_the_one_host_rule(page: Path) -> None:
    text = " ".join(page.read_text(encoding="utf-8").split())
    if "NFS" not in text:
        return
    assert "several hosts sharing a workspace" in text.lower(), page.name
    assert "not supported until the PostgreSQL backend" in text, page.name
