"""Fixtures of the console's browser tests: the distribution's Chromium and a real console.

* ``browser``: one headless Chromium per test process (each xdist worker), the
  distribution's ``/usr/bin/chromium`` driven by Playwright (never a downloaded
  browser: tests/system-packages.sh installs the package). ``browser.new_context()``
  gives every test fresh cookies; Playwright starts Chromium on a fresh temporary
  user-data dir and removes it at exit.
* ``console``: ``governed-memory console`` as a subprocess over a prepared
  deployment, once per module and backend: the file backend and PostgreSQL (a
  fresh database of the suite's throw-away server). Walks in one module share it
  and so use subjects of their own.
* ``shot(page, name)`` saves a full-page screenshot to test-artifacts/console/
  (gitignored) for a reviewer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from deployment import ACCOUNTS, ConsoleServer, Deployment, write_console_config
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

if TYPE_CHECKING:
    from pg_server import PgServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",  # no request leaves 127.0.0.1
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "console"
BACKENDS = ("files", "postgres")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """This test process's headless Chromium (the distribution's binary)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing; run `sh tests/system-packages.sh`, which installs "
            "Debian's chromium and chromium-driver packages (never `playwright install`)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


def new_context(browser: Browser, base_url: str) -> BrowserContext:
    """A fresh browser profile (no cookies) on ``base_url`` that fails any request off 127.0.0.1."""
    context = browser.new_context(base_url=base_url, accept_downloads=True)
    context.set_default_timeout(30_000)  # waiting for a selector, never a sleep

    def only_loopback(route: object) -> None:
        route.abort()  # type: ignore[attr-defined]

    context.route(lambda url: not url.startswith(("http://127.0.0.1", "data:", "about:")), only_loopback)
    return context


@pytest.fixture(scope="module", params=BACKENDS)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Deployment:
    """A prepared deployment on the file backend or on PostgreSQL (ids ``files``/``postgres``)."""
    root = tmp_path_factory.mktemp(f"console-{request.param}")
    url = None
    if request.param == "postgres":
        server: PgServer = request.getfixturevalue("pg_server")
        url = server.url(server.create_database())
    deployment = Deployment(root, database_url=url)
    deployment.waiting_request = deployment.prepare()  # type: ignore[attr-defined]
    return deployment


@pytest.fixture(scope="module")
def console(deployment: Deployment) -> Iterator[ConsoleServer]:
    """The console served over ``deployment`` with the local accounts of ACCOUNTS."""
    config = write_console_config(deployment, ACCOUNTS.values())
    server = ConsoleServer(deployment, config)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def context(browser: Browser, console: ConsoleServer) -> Iterator[BrowserContext]:
    """A fresh browser profile pointed at the module's console."""
    ctx = new_context(browser, console.url)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Callable[[Page, str], Path]:
    """Save a full-page screenshot as test-artifacts/console/<backend>-<name>.png."""

    def save(page: Page, name: str) -> Path:
        backend = request.node.callspec.params.get("deployment", "")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{backend}-{name}.png" if backend else ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
