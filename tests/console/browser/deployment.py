"""A prepared deployment for the browser tests, and the real console server run over it.

:class:`Deployment` is one host's environment (the regulated policy; master, audit
and signing keys from the environment as a host gets them; the file backend in a
workspace folder, or PostgreSQL when ``database_url`` is given) with a few agents
holding subjects' messages, consent, and an open request. :class:`ConsoleServer`
runs ``governed-memory console`` from the virtualenv as a subprocess on a free
127.0.0.1 port over it, waits until it answers, and stops it and its children.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import governed_memory as gm

MASTER_KEY_B64 = base64.b64encode(bytes(range(32))).decode("ascii")
AUDIT_KEY_HEX = "ab" * 32
SETUP_ACTOR = "setup@bank.example"

# A subject id that is HTML: every page must show it as text and run none of it.
HOSTILE_SUBJECT = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'

# Subjects and what the agents hold about them. Each walk uses its own subjects, so
# the walks of one module can share a server in any order.
MESSAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "Support": (
        ("C-1001", "C-1001 asks to close savings account 4471"),
        ("C-1001", "C-1001 moved to Elm Street 4"),
        ("C-1002", "C-1002 asks what we hold about her loan"),
        ("C-2001", "C-2001 disputes a card payment of 120 EUR"),
        (HOSTILE_SUBJECT, "a message from the subject whose id is HTML"),
    ),
    "Advisor": (
        ("C-1001", "C-1001 wants a mortgage quote"),
        ("C-1002", "C-1002 pays her loan early"),
    ),
}
# The request that was waiting when the console started (the auditor sees it).
WAITING_REQUEST = {"subject": "C-2001", "kind": "access", "received": "2026-11-20"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployment:
    """One host's environment and workspace; ``database_url`` selects PostgreSQL."""

    root: Path
    database_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    waiting_request: str = ""  # the id of the request open before the console started

    def __post_init__(self) -> None:
        self.workspace = self.root / "ws"
        self.env = {
            "WORKSPACE_DIR": str(self.workspace),
            "GOVERNED_MEMORY_POLICY": "regulated",
            "GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY_HEX,
            "GOVERNED_MEMORY_MASTER_KEY": MASTER_KEY_B64,
            "GOVERNED_MEMORY_SIGNING_KEY": gm.LocalSigningKey.generate().to_base64(),
        }
        if self.database_url is not None:
            self.env["GOVERNED_MEMORY_DATABASE_URL"] = self.database_url

    @property
    def backend(self) -> str:
        return "postgres" if self.database_url is not None else "files"

    @contextlib.contextmanager
    def governance(self) -> Iterator[gm.Governance]:
        """A Governance of this deployment, built from its environment as a host builds it."""
        with pytest.MonkeyPatch.context() as mp:
            for name in list(os.environ):
                if name.startswith("GOVERNED_MEMORY_") or name == "WORKSPACE_DIR":
                    mp.delenv(name)
            for name, value in self.env.items():
                mp.setenv(name, value)
            gov = gm.Governance()
            try:
                yield gov
            finally:
                gov.storage.close()

    def prepare(self) -> None:
        """Consent, the agents' messages and a waiting request (``waiting_request``)."""
        if self.database_url is not None:
            from governed_memory._postgres import Database, upgrade_schema

            db = Database(self.database_url)
            try:
                upgrade_schema(db)
            finally:
                db.close()
        with self.governance() as gov:
            subjects = {s for messages in MESSAGES.values() for s, _ in messages}
            for subject in sorted(subjects):
                for purpose in ("persist", "summarize"):
                    gov.grant(subject, purpose, actor=SETUP_ACTOR)
            for agent, messages in MESSAGES.items():
                conversation = gm.Conversation(
                    name=f"{agent}_conv",
                    memory_md_path=gm.memory_md_path(agent, gov.workspace),
                    governance=gov,
                )
                for subject, text in messages:
                    conversation.add("Human", text, subject_id=subject)
            request = gm.open_request(gov, actor=SETUP_ACTOR, **WAITING_REQUEST)
        self.waiting_request = request.id

    def audit_entries(self, actor: str) -> list[dict[str, Any]]:
        """The audit entries whose actor is ``actor`` (its keyed hash), oldest first."""
        with self.governance() as gov:
            trail = gov.audit
            assert isinstance(trail, gm.AuditTrail), f"audit is off: {trail!r}"
            wanted = trail.subject_hash(actor)
            return [
                entry
                for entry in trail.entries_for(subject_id=actor)
                if entry.get("attrs", {}).get("actor.hash") == wanted
            ]

    def subject_hash(self, subject: str) -> str:
        """The keyed hash the audit log records for ``subject``."""
        with self.governance() as gov:
            trail = gov.audit
            assert isinstance(trail, gm.AuditTrail)
            return trail.subject_hash(subject)


@dataclass
class Account:
    """A local console account the tests sign in with."""

    name: str
    password: str
    role: str

    @property
    def actor(self) -> str:
        return f"console:{self.name}"


ACCOUNTS = {
    "officer": Account("olivia", "officer-pass-4471", "privacy-officer"),
    "admin": Account("adam", "admin-pass-4472", "administrator"),
    "auditor": Account("audrey", "auditor-pass-4473", "auditor"),
}


def write_console_config(
    deployment: Deployment, accounts: Iterable[Account], name: str = "console", **settings: str
) -> Path:
    """Write ``<root>/<name>/console.toml`` with ``accounts`` as local users; its path.

    ``settings`` are further top-level keys as TOML text, e.g. ``oidc='{...}'``. Without
    accounts the console has no local sign-in (OIDC only).
    """
    from pages_client import TEST_HASHING

    from governed_memory.console._auth import add_user
    from governed_memory.console._config import PasswordHashing
    from governed_memory.console._principal import Role

    folder = deployment.root / name
    folder.mkdir(exist_ok=True)
    lines = [
        # Every walk signs in from 127.0.0.1; the login limit is tested on its own (test_auth_*).
        'login_rate = "1000/minute"',
        *(f"{key} = {value}" for key, value in settings.items()),
    ]
    accounts = list(accounts)
    if accounts:
        accounts_file = folder / "accounts.json"
        hashing = PasswordHashing(**TEST_HASHING)
        for account in accounts:
            add_user(
                accounts_file, account.name, Role(account.role), account.password, hashing=hashing
            )
        lines.insert(0, f"accounts_file = {json.dumps(str(accounts_file))}")
        # The cheapest cost the console accepts (see pages_client.TEST_HASHING); a table,
        # so it goes after the top-level keys.
        lines += ["[password_hashing]", *(f"{k} = {v}" for k, v in TEST_HASHING.items())]
    config = folder / "console.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def cli() -> list[str]:
    """The installed ``governed-memory`` entry point of this virtualenv."""
    script = Path(sys.executable).with_name("governed-memory")
    assert script.exists(), f"{script} is missing; run `pip install -e '.[dev]'`"
    return [str(script)]


class ConsoleServer:
    """``governed-memory console`` as a subprocess over ``deployment``."""

    def __init__(
        self, deployment: Deployment, config: Path, *, extra_env: dict[str, str] | None = None
    ) -> None:
        self.deployment = deployment
        self.config = config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = deployment.root / f"console-{self.port}.log"
        self._extra_env = extra_env or {}
        self._process: subprocess.Popen[bytes] | None = None

    def environment(self) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GOVERNED_MEMORY_", "OTEL_", "PG")) and k != "WORKSPACE_DIR"
        }
        return {**base, **self.deployment.env, **self._extra_env}

    def start(self) -> None:
        command = [
            *cli(),
            "console",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--config",
            str(self.config),
        ]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                env=self.environment(),
                cwd=self.deployment.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() ends its children too
            )
        # A test run interrupted past its fixtures' teardown (Ctrl-C) still stops it.
        atexit.register(self.stop)
        self._wait_until_serving()

    def _wait_until_serving(self) -> None:
        # A bounded wait for the port to answer, not a timed assertion: a slow machine
        # only waits longer; a server that exits fails at once with its own output.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise AssertionError(
                    f"governed-memory console exited with {self._process.returncode}:\n"
                    + self.output()
                )
            try:
                with urllib.request.urlopen(f"{self.url}/login", timeout=5) as response:
                    if response.status == 200:
                        return
            except urllib.error.HTTPError:
                return  # it answers HTTP: serving
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError(f"governed-memory console did not answer in 120 s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
