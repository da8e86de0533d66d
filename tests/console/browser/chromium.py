"""The distribution's Chromium, launched headless through Playwright (never a downloaded browser).

tests/system-packages.sh installs Debian's ``chromium`` (and ``chromium-driver``)
when ``/usr/bin/chromium`` is missing; ``playwright install`` is never run.
Playwright starts the browser on a fresh temporary user-data dir and removes it
when the browser closes; each :func:`new_context` is a fresh profile (no cookies).
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, BrowserContext, Playwright, Route

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",  # nothing leaves 127.0.0.1
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LOOPBACK = ("http://127.0.0.1", "https://127.0.0.1", "data:", "about:", "blob:")


def launch(playwright: Playwright) -> Browser:
    """Headless Chromium from ``/usr/bin/chromium``.

    Raises:
        FileNotFoundError: the binary is missing (the message says how to install it).
    """
    if not CHROMIUM.exists():
        raise FileNotFoundError(
            f"{CHROMIUM} is missing; run `sh tests/system-packages.sh`, which installs "
            "Debian's chromium and chromium-driver packages (never `playwright install`)"
        )
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )


def new_context(browser: Browser, base_url: str) -> BrowserContext:
    """A fresh profile on ``base_url``; any request off 127.0.0.1 is aborted."""
    context = browser.new_context(base_url=base_url, accept_downloads=True)
    context.set_default_timeout(30_000)  # how long a wait on a selector may take, never a sleep

    def off_loopback(route: Route) -> None:
        route.abort()

    context.route(lambda url: not url.startswith(LOOPBACK), off_loopback)
    return context
