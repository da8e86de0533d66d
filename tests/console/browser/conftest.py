"""Fixtures of the console's browser tests: the distribution's Chromium and a real console.

* ``browser``: one headless Chromium per test module (in each xdist worker), the
  distribution's ``/usr/bin/chromium`` driven by Playwright (never a downloaded
  browser: tests/system-packages.sh installs the package). ``browser.new_context()``
  gives every test fresh cookies; Playwright starts Chromium on a fresh temporary
  user-data dir and removes it at exit. Not once per process: while Playwright's
  sync API is open it keeps an event loop running on the thread, and every later
  test of that worker that runs a loop of its own (the OpenAI Agents adapter's)
  would fail with "Cannot run the event loop while another loop is running".
* ``console``: ``governed-memory console`` as a subprocess over a prepared
  deployment, once per module and backend: the file backend and PostgreSQL (a
  fresh database of the suite's throw-away server). Walks in one module share it
  and so use subjects of their own.
* ``shot(page, name)`` saves a full-page screenshot to test-artifacts/console/
  (gitignored) for a reviewer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# tests/console, where the stub OpenID provider (oidc_provider.py) lives.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chromium import launch, new_context
from deployment import ACCOUNTS, ConsoleServer, Deployment, write_console_config
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

if TYPE_CHECKING:
    from pg_server import PgServer

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "console"
BACKENDS = ("files", "postgres")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """This module's headless Chromium (the distribution's binary), closed after it."""
    with sync_playwright() as playwright:
        try:
            launched = launch(playwright)
        except FileNotFoundError as exc:
            pytest.fail(str(exc))
        try:
            yield launched
        finally:
            launched.close()


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
    deployment.prepare()
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
