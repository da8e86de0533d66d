"""Helpers of the OpenAI Agents SDK tests: a Governance per shipped policy, a private event loop.

A module of its own (not conftest.py), so that test modules import it by a
name no other test folder uses.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agents.tracing import TracingProcessor

from governed_memory import FixedClock, Governance, Settings
from governed_memory._audit import AuditKey, generate_audit_key
from governed_memory._crypto import LocalSigningKey, generate_master_key

POLICIES = Path(__file__).parents[3] / "policies"
SUBJECT = "customer-42"

_T = TypeVar("_T")


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on a loop of its own, as ``asyncio.run`` does, leaving the thread's default loop alone.

    ``asyncio.run`` resets the thread's default event loop when it ends: a
    default loop an earlier test made (litellm makes one) would be dropped
    unclosed, and its ResourceWarning would fail whichever test runs when it
    is collected.
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


@dataclass
class Setup:
    """One policy's workspace: the Governance, its settings and the audit key."""

    name: str
    gov: Governance
    settings: Settings
    audit_key: str
    workspace: Path

    def new_governance(self) -> Governance:
        """Another Governance on the same workspace and settings (a restarted process)."""
        return Governance(workspace=self.workspace, settings=self.settings, clock=self.gov.clock)

    def key(self) -> AuditKey:
        return AuditKey.from_text(self.audit_key)


def make_setup(tmp_path: Path, name: str, *, grant: bool = True) -> Setup:
    """A Governance under ``policies/<name>.toml`` (regulated: a master key, consent for SUBJECT)."""
    audit_key = generate_audit_key()
    settings = Settings(
        policy=POLICIES / f"{name}.toml",
        master_key=generate_master_key(),
        keyring_dir=tmp_path / "keyring",
        audit_key=audit_key,
        signing_key=LocalSigningKey.generate().to_base64(),  # regulated signs its receipts
    )
    clock = FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0), tick=dt.timedelta(milliseconds=1))
    gov = Governance(workspace=tmp_path / "ws", settings=settings, clock=clock)
    if grant and gov.policy.consent.required_for:
        gov.grant(SUBJECT, "persist", actor="dpo@example.org")
    return Setup(name, gov, settings, audit_key, gov.workspace)


def close_audit(gov: Governance) -> None:
    """Close the audit log's open segment (the default policy has none)."""
    close = getattr(gov.audit, "close", None)
    if close is not None:
        close()


class Collector(TracingProcessor):
    """A trace processor that keeps what it is given in the process (nothing is exported)."""

    def __init__(self) -> None:
        self.spans: list[Any] = []

    def on_trace_start(self, trace: Any) -> None: ...

    def on_trace_end(self, trace: Any) -> None: ...

    def on_span_start(self, span: Any) -> None: ...

    def on_span_end(self, span: Any) -> None:
        self.spans.append(span)

    def shutdown(self) -> None: ...

    def force_flush(self) -> None: ...
