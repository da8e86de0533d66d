"""A signed-in console user for the page tests: reads pages and submits their forms.

:class:`User` drives the console as a browser does: it opens a page, finds
the form by its ``data-testid``, keeps the hidden fields the page put there
(``csrf_token``, the one-time ``form_nonce``), fills in the rest and posts it
to the form's ``action``. So every test goes through the real sign-in, CSRF
and nonce checks of ``_auth``.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

PASSWORD = "correct horse battery staple"

# OWASP's floor for Argon2id, the cheapest cost the console accepts: the tests sign in
# hundreds of times (the default costs three times as much per hash).
TEST_HASHING = {"time_cost": 2, "memory_kib": 19456, "parallelism": 1}

_ACCOUNTS_FILES: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}


def write_accounts(path: Path, users: Mapping[str, str], password: str = PASSWORD) -> None:
    """Write the local accounts file ``path`` (mode 0600): ``users`` (name -> role), one password.

    ``add_user`` writes it once per process and set of users, at TEST_HASHING; later
    calls copy those bytes. Every page test gets a file of its own, yet three or
    more Argon2 hashes per test were a fifth of the console tests' time, and what
    the hashes are is no page's business (tests/console/test_auth_accounts.py
    tests ``add_user``).
    """
    from governed_memory.console._auth import add_user
    from governed_memory.console._config import PasswordHashing
    from governed_memory.console._principal import Role

    roles = tuple((name, Role(role).value) for name, role in users.items())
    key = (password, roles)
    if key not in _ACCOUNTS_FILES:
        hashing = PasswordHashing(**TEST_HASHING)
        with tempfile.TemporaryDirectory() as tmp:
            made = Path(tmp) / "accounts.json"
            for name, role in roles:
                add_user(made, name, role, password, hashing=hashing)
            _ACCOUNTS_FILES[key] = made.read_bytes()
    # Replaces a file already there, as add_user replaces its accounts (a "restart").
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(_ACCOUNTS_FILES[key])


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, dict[str, Any]] = {}
        self._current: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self._current = {"action": a.get("action") or "", "fields": {}}
            self.forms[a.get("data-testid") or f"form-{len(self.forms)}"] = self._current
        elif tag == "input" and self._current is not None and a.get("type") == "hidden":
            self._current["fields"][a.get("name") or ""] = a.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


def forms(html: str) -> dict[str, dict[str, Any]]:
    """The forms of a page by ``data-testid``: their action and hidden fields."""
    parser = _Forms()
    parser.feed(html)
    return parser.forms


class User:
    """One signed-in browser session of the console."""

    def __init__(self, client: TestClient, name: str) -> None:
        self.client = client
        self.name = name

    def get(self, url: str) -> Any:
        return self.client.get(url)

    def submit(self, page: str, testid: str, **fields: str) -> Any:
        """Open ``page``, fill in the form ``testid`` with ``fields`` and post it."""
        shown = self.client.get(page)
        assert shown.status_code == 200, shown.text
        found = forms(shown.text)
        assert testid in found, f"no form {testid!r} on {page}: {sorted(found)}"
        form = found[testid]
        return self.client.post(form["action"], data={**form["fields"], **fields})


def sign_in(client: TestClient, name: str) -> User:
    """Sign ``name`` in through the login form."""
    page = client.get("/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token, page.text
    done = client.post(
        "/login", data={"username": name, "password": PASSWORD, "csrf_token": token.group(1)}
    )
    assert done.status_code == 303, done.text  # on to where the user was going
    return User(client, name)


def flash(html: str) -> list[tuple[str, str]]:
    """The page's messages: (ok|error, text)."""
    import html as _html

    return [
        (kind, _html.unescape(text).strip())
        for kind, text in re.findall(
            r'<div role="alert" class="flash flash-(ok|error)">(.*?)</div>', html, re.S
        )
    ]


def audit_entries(gov: Any, actor: str, event: str | None = None) -> list[dict[str, Any]]:
    """The audit entries naming ``actor`` (as actor or subject), of ``event`` when given."""
    found: list[dict[str, Any]] = gov.audit.entries_for(subject_id=actor)
    return [e for e in found if event is None or e["event"] == event]
