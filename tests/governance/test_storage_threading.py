"""Every persistent part goes through ``Governance.storage``: the proof by a storage kept elsewhere.

:class:`ElsewhereStorage` is the file backend keeping everything in ANOTHER
folder than the workspace the Governance names. A governed life cycle under
the regulated policy (conversation, consent, export, rectification, erasure,
retention purge, key rotation, audit verification), through the Python API and
through the CLI, must leave the workspace folder empty: a site that built a
registry, keyring, log, journal, lock or store from the workspace path instead
of the storage would write there.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from crypto_helpers import TEST_MASTER_KEY
from sealing_helpers import TEST_MASTER_KEY_B64

from governed_memory import (
    AuditKey,
    ConsentRegistry,
    Conversation,
    FixedClock,
    Governance,
    LocalKeyProvider,
    LocalSigningKey,
    Retention,
    Settings,
    erase,
    export_subject,
    load_policy,
    memory_md_path,
    rectify,
    rotate_keys,
    subject_records,
    verify_audit_log,
)
from governed_memory._base import AGENTS_DIR, GOVERNANCE_DIR, MEMORY_FILE
from governed_memory._governance import FileStorage
from governed_memory._governance import _storage as storage_module

AUDIT_KEY = "ab" * 32
SIGNING_KEY = LocalSigningKey.generate().to_base64()


class ElsewhereStorage(FileStorage):
    """The file backend in ``folder``, whatever workspace path the Governance hands it."""

    def memory_path(self, memory_path: Path) -> Path:
        return self.workspace / AGENTS_DIR / Path(memory_path).parent.name / MEMORY_FILE


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def _governance(workspace: Path, elsewhere: Path, clock: FixedClock) -> Governance:
    return Governance(
        workspace=workspace,
        policy=load_policy("regulated"),
        settings=Settings(audit_key=AUDIT_KEY, signing_key=SIGNING_KEY),
        clock=clock,
        key_provider=LocalKeyProvider(TEST_MASTER_KEY),
        storage=ElsewhereStorage(elsewhere),
    )


def _talk(gov: Governance, agent: str = "A") -> None:
    gov.grant("alice", "persist", actor="dpo@example.org")
    conversation = Conversation(
        name=f"{agent}_conv", memory_md_path=memory_md_path(agent, gov.workspace), governance=gov
    )
    conversation.add("Human", "alice's first message", subject_id="alice")
    conversation.add("Human", "alice's address is 1 Main St", subject_id="alice")


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    return workspace, elsewhere


def test_a_governed_life_cycle_through_the_api_writes_nothing_in_the_workspace(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    workspace, elsewhere = places
    clock = FixedClock(_dt.datetime.now().replace(microsecond=0))
    gov = _governance(workspace, elsewhere, clock)
    _talk(gov)
    [record] = [r for r in subject_records(gov, "alice") if "Main St" in r.content]
    rectify(gov, subject="alice", record=record.id, text="alice's address is 2 Side St")
    export_subject(gov, "alice", tmp_path / "export", actor="dpo@example.org")
    gov.withdraw("alice", "persist", actor="dpo@example.org")
    receipt = erase(gov, subject="alice", reason="art. 17 request", actor="dpo@example.org")
    clock.advance(_dt.timedelta(days=8))  # the export's copy is past exports_max_age = 7d
    report = Retention(gov).purge()
    rotation = rotate_keys(gov.file_workspace, gov.keyring, reencrypt_data=True)
    verified = verify_audit_log(
        elsewhere / GOVERNANCE_DIR / "audit",
        AuditKey(bytes.fromhex(AUDIT_KEY)),
        workspace=elsewhere,
    )

    assert _files(workspace) == []  # every site went through the storage
    assert receipt.state == "complete" and report.failed == 0
    assert rotation.new_generations >= 1 and verified.ok, verified.findings
    stored = _files(elsewhere)
    for part in ("agents/A", ".governed_memory/consent.jsonl", ".governed_memory/keyring"):
        assert part in stored, stored
    assert any(p.startswith(".governed_memory/audit/") for p in stored)
    assert not ConsentRegistry(gov.records, sealing=gov.sealing).is_granted("alice", "persist")


def test_the_scheduler_takes_its_leadership_from_the_storage(
    places: tuple[Path, Path],
) -> None:
    from governed_memory import PurgeScheduler

    workspace, elsewhere = places
    gov = _governance(workspace, elsewhere, FixedClock(_dt.datetime(2026, 12, 1, 12)))
    scheduler = PurgeScheduler(gov, leader_retry=0.05)
    assert scheduler._try_lock()  # leads through governance.storage.leadership("scheduler")
    try:
        assert (elsewhere / GOVERNANCE_DIR / "scheduler" / "leader.lock").is_file()
    finally:
        scheduler._leader.release()
    assert _files(workspace) == []


def _cli(workspace: Path, *args: str) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "--policy", "regulated", *args],
        env={
            "GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY,
            "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
            "GOVERNED_MEMORY_SIGNING_KEY": SIGNING_KEY,
        },
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_cli_runs_every_command_on_the_storage_and_writes_nothing_in_the_workspace(
    places: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, elsewhere = places
    opened: list[Any] = []

    def elsewhere_storage(*_args: Any, **_kwargs: Any) -> ElsewhereStorage:
        storage = ElsewhereStorage(elsewhere)
        opened.append(storage)
        return storage

    # The one opener every Governance and every command gets its storage from.
    monkeypatch.setattr(storage_module, "open_storage", elsewhere_storage)
    gov = _governance(workspace, elsewhere, FixedClock(_dt.datetime.now().replace(microsecond=0)))
    _talk(gov)
    steps = [
        ("consent", "grant", "--subject", "bob", "--purpose", "persist"),
        ("consent", "status", "--subject", "alice", "--json"),
        ("agents", "--json"),
        ("show", "A", "--subject", "alice"),
        ("export", "--subject", "alice", "--out", str(tmp_path / "out")),
        ("consent", "withdraw", "--subject", "alice", "--purpose", "persist"),
        ("erase", "--subject", "alice", "--reason", "art. 17", "--yes"),
        ("purge",),
        ("keys", "status"),
        ("keys", "rotate", "--reencrypt"),
        ("audit", "verify", "--dir", str(elsewhere / GOVERNANCE_DIR / "audit")),
    ]
    outputs = {}
    for step in steps:
        code, out, err = _cli(workspace, *step)
        assert code == 0, (step, out, err)
        outputs[step[:2]] = out
    assert _files(workspace) == []
    assert opened  # the commands opened it, not the workspace
    [agent] = json.loads(outputs[("agents", "--json")])
    assert agent["name"] == "A"
    assert "granted" in outputs[("consent", "status")]
    assert ConsentRegistry(elsewhere / GOVERNANCE_DIR, sealing=gov.sealing).is_granted(
        "bob", "persist"
    )
