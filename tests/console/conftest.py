"""Fixtures of the console tests (cweb_*: the pages' deployment, app and signed-in users)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pages_client import TEST_HASHING, User, sign_in, write_accounts
from starlette.applications import Starlette
from starlette.testclient import TestClient

import governed_memory as gm

CWEB_AUDIT_KEY = "c3" * 32
CWEB_NOW = dt.datetime(2026, 12, 1, 9, 0)  # naive local time, as the system clock gives
CWEB_USERS = {"olivia": "privacy-officer", "adam": "administrator", "audrey": "auditor"}


def _policy() -> gm.Policy:
    return gm.Policy.model_validate(
        {
            "policy": {"id": "console-test", "version": "1"},
            "audit": {"enabled": True},
            "retention": {"archives_max_age": "30d"},
            "schedule": {"purge_interval": "1d"},
        }
    )


@pytest.fixture(params=["file", "postgres"])
def cweb_backend(request: pytest.FixtureRequest) -> str:
    """Each page test runs over the file backend and over PostgreSQL."""
    return str(request.param)


@pytest.fixture
def cweb_governance(
    cweb_backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[gm.Governance]:
    """An audited deployment with a signing key, a fixed clock and alice's records in 'support'."""
    settings: dict[str, object] = {"audit_key": CWEB_AUDIT_KEY}
    if cweb_backend == "postgres":
        settings["database_url"] = request.getfixturevalue("pg_schema_url")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    gov = gm.Governance(
        workspace=workspace,
        policy=_policy(),
        settings=gm.Settings(**settings),  # type: ignore[arg-type]
        clock=gm.FixedClock(CWEB_NOW, tick=dt.timedelta(milliseconds=1)),
        signing_key=gm.LocalSigningKey.generate(),
    )
    gov.grant("alice", "persist", actor="alice")
    conv = gm.Conversation(
        name="support_conv", memory_md_path=gm.memory_md_path("support", workspace), governance=gov
    )
    conv.add("Human", "My IBAN is DE89 3704 0044 0532 0130 00.", subject_id="alice")
    conv.add("AI", "Thank you, noted.", subject_id="alice")
    conv.add("Human", "What are the opening hours?", subject_id="bob")
    try:
        yield gov
    finally:
        gov.storage.close()


@pytest.fixture
def cweb_app(cweb_governance: gm.Governance, tmp_path: Path) -> Starlette:
    """The console over the deployment, with one local account per role."""
    from governed_memory.console._app import create_app
    from governed_memory.console._config import ConsoleConfig, PasswordHashing

    accounts = tmp_path / "console-accounts.json"
    write_accounts(accounts, CWEB_USERS)
    config = ConsoleConfig(accounts_file=accounts, password_hashing=PasswordHashing(**TEST_HASHING))
    return create_app(config, cweb_governance)


@pytest.fixture
def cweb_user(cweb_app: Starlette) -> Iterator[Callable[[str], User]]:
    """Sign a user in (olivia: privacy officer, adam: administrator, audrey: auditor)."""
    clients: list[TestClient] = []

    def make(name: str) -> User:
        c = TestClient(cweb_app, base_url="https://testserver", follow_redirects=False)
        clients.append(c)
        return sign_in(c, name)

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def cweb_anonymous(cweb_app: Starlette) -> Iterator[TestClient]:
    """A browser with no session."""
    with TestClient(cweb_app, base_url="https://testserver", follow_redirects=False) as c:
        yield c
