"""Workspaces to migrate, built by real Governance calls, and the two ends over them.

A workspace gets consent granted and withdrawn, a legal hold, an erasure with its
receipt, an archive after compaction and subject memories (isolation), with the
audit log on; plaintext or encrypted (the canary ``CANARY-7f3a`` in its memories).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from subjects_helpers import governance
from subjects_helpers import subject_block as block

from governed_memory import FixedClock, Governance
from governed_memory._audit import AuditKey
from governed_memory._format import render_header
from governed_memory._migrate import StorageEnd, database_end, workspace_end
from governed_memory._policy._model import DEFAULT_POLICY, Policy
from governed_memory._records._holds import HoldRegistry
from governed_memory._retention import JournalFolder
from governed_memory._stores import isolate_subjects
from governed_memory._subjects import erase

AUDIT_KEY_HEX = "11" * 32
CANARY = "CANARY-7f3a"
CLOCK = dt.datetime(2026, 11, 30, 10, 0, 0)


def policy() -> Policy:
    """The default policy with the audit log on."""
    data = DEFAULT_POLICY.model_dump(exclude={"source"}, mode="json")
    data["audit"] = {"enabled": True}
    return Policy.model_validate(data)


def build_workspace(workspace: Path, kind: str, monkeypatch: Any) -> Governance:
    """A workspace with every kind of stored item, written through Governance."""
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", AUDIT_KEY_HEX)
    gov = governance(workspace, FixedClock(CLOCK), policy(), kind=kind)
    gov.grant("alice", "persist", actor="test")
    gov.grant("carol", "persist", actor="test")
    gov.withdraw("carol", "persist", actor="test")
    store = gov.store_factory(
        workspace / "agents" / "A" / "MEMORY.md",
        lambda: render_header("A_conv", "2026-11-30T10:00:00"),
    )
    store.append(block(f"alice archived {CANARY}", "alice"))
    store.append(block(f"a note {CANARY}"))
    assert store.compact(None) is not None
    store.append(block(f"alice moved {CANARY}", "alice"))
    store.append(block("bob one", "bob"))
    isolate_subjects(store)
    alice = store.subject_store("alice")
    alice.compact(block(f"alice summary {CANARY}", "alice", ("alice",)))
    alice.append(block(f"alice two {CANARY}", "alice"))
    for s in (store, alice):
        s.close()
    HoldRegistry(gov.governance_dir, clock=gov.clock, sealing=gov.sealing).place(
        subject="dave", reason="case 12", actor="legal"
    )
    assert erase(gov, subject="bob").state == "complete"
    return gov


def audit_key() -> AuditKey:
    return AuditKey.from_text(AUDIT_KEY_HEX)


def sibling(workspace: Path, gov: Governance) -> Governance:
    """A Governance on ``workspace`` with ``gov``'s policy and master key (a destination folder)."""
    provider = gov.keyring.provider if gov.policy.encryption.enabled else None
    return Governance(
        workspace=workspace, policy=gov.policy, clock=gov.clock, key_provider=provider
    )


def files(workspace: Path, gov: Governance, kind: str) -> StorageEnd:
    """The end of ``workspace`` (``gov``'s), as migrate-storage opens it."""
    assert gov.workspace == workspace and gov.policy.encryption.enabled == (kind == "encrypted")
    return workspace_end(gov, audit_key(), JournalFolder(gov.governance_dir / "purge"))


def database(db: Any, gov: Governance, kind: str) -> StorageEnd:
    """The end of ``db``, its stores sealing under ``gov``'s master key, as migrate-storage opens it."""
    assert gov.policy.encryption.enabled == (kind == "encrypted")
    return database_end(gov, db, audit_key())


def tree(workspace: Path, *, kind: str) -> dict[str, bytes]:
    """Every file's bytes under ``workspace``, but what is no stored item.

    Lock files, the audit writers' hint (``audit.tail``), the lineage index (a
    cache the next walk rebuilds), the migration marker, and, when encrypted,
    the memories' ciphertext (re-sealed by the destination: compared as text).
    """
    out = {}
    for path in sorted(workspace.rglob("*")):
        name = path.relative_to(workspace).as_posix()
        if not path.is_file() or name.endswith((".lock", "audit.tail", ".gm-lineage.json")):
            continue
        if name.endswith(".gm-migration.json") or name.endswith("/lock"):
            continue
        if kind == "encrypted" and name.endswith(".gmenc"):
            continue
        out[name] = path.read_bytes()
    return out
