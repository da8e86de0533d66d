"""Take the screenshots of docs/console.md: one PNG per page, from a real console in Chromium.

Run once from the repository root when a page changes, and commit the PNGs::

    .venv/bin/python tests/console/browser/screenshots.py docs/images/console

It prepares a throw-away deployment (file backend, the browser tests' agents and
subjects), starts ``governed-memory console`` over it, signs in with the role
each page is for, and saves ``<page>.png``. Nothing is left running or on disk
but the PNGs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from chromium import launch, new_context
from deployment import ACCOUNTS, ConsoleServer, Deployment, write_console_config
from pages import on_page, sign_in, subject_path
from playwright.sync_api import Browser, Page, sync_playwright

VIEWPORT = {"width": 1280, "height": 860}


def _page(browser: Browser, url: str) -> Page:
    context = new_context(browser, url)
    page = context.new_page()
    page.set_viewport_size(VIEWPORT)
    return page


def take(out: Path) -> list[Path]:
    """Save the console's pages as PNGs in ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="gm-console-shots-") as tmp:
        deployment = Deployment(Path(tmp))
        deployment.prepare()
        server = ConsoleServer(deployment, write_console_config(deployment, ACCOUNTS.values()))
        server.start()
        try:
            with sync_playwright() as playwright:
                browser = launch(playwright)
                try:
                    saved += _walk(browser, server, deployment, out)
                finally:
                    browser.close()
        finally:
            server.stop()
    return saved


def _save(page: Page, out: Path, name: str) -> Path:
    # The first screen of each page (not the full page): what a reader needs, in a small PNG.
    path = out / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def _walk(browser: Browser, server: ConsoleServer, deployment: Deployment, out: Path) -> list[Path]:
    saved = []
    page = _page(browser, server.url)
    page.goto("/login")
    on_page(page, "login")
    saved.append(_save(page, out, "login"))

    sign_in(page, ACCOUNTS["officer"])
    page.goto("/requests?view=open")
    on_page(page, "requests")
    saved.append(_save(page, out, "requests"))
    page.goto(f"/requests/{deployment.waiting_request}")
    on_page(page, "request")
    saved.append(_save(page, out, "request"))
    page.goto(subject_path("C-1002"))
    on_page(page, "subject")
    saved.append(_save(page, out, "subject"))

    admin = _page(browser, server.url)
    sign_in(admin, ACCOUNTS["admin"])
    for name in ("retention", "health"):
        admin.goto(f"/{name}")
        on_page(admin, name)
        saved.append(_save(admin, out, name))

    auditor = _page(browser, server.url)
    sign_in(auditor, ACCOUNTS["auditor"])
    auditor.goto("/audit")
    on_page(auditor, "audit")
    saved.append(_save(auditor, out, "audit"))
    return saved


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/images/console")
    for path in take(target):
        print(path)
