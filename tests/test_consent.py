"""The consent registry: grant, withdraw, status, durability, and other processes' changes."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governed_memory import (
    ConfigurationError,
    ConsentRegistry,
    Conversation,
    FixedClock,
    Governance,
    Policy,
    Settings,
    StorageError,
    memory_md_path,
)
from governed_memory._consent import ConsentAction, validate_subject_id
from governed_memory._errors import FormatVersionError
from governed_memory._workspace import GOVERNANCE_DIR

CLI = [sys.executable, "-c", "from governed_memory._cli import main; main()"]

NEEDS_CONSENT = Policy.model_validate(
    {"policy": {"id": "test", "version": "7"}, "consent": {"required_for": ["persist"]}}
)


def governance(workspace: Path, clock: FixedClock | None = None) -> Governance:
    return Governance(workspace=workspace, policy=NEEDS_CONSENT, settings=Settings(), clock=clock)


def test_grant_then_withdraw_latest_wins(workspace: Path, clock: FixedClock) -> None:
    gov = governance(workspace, clock)
    assert not gov.consent.is_granted("alice", "persist")
    granted = gov.grant("alice", "persist", actor="dpo@example.org")
    assert gov.consent.is_granted("alice", "persist")
    withdrawn = gov.withdraw("alice", "persist", actor="alice")
    assert not gov.consent.is_granted("alice", "persist")
    assert [e.action for e in gov.consent.history("alice")] == [
        ConsentAction.GRANT,
        ConsentAction.WITHDRAW,
    ]
    assert gov.consent.status("alice") == {"persist": withdrawn}
    assert granted.policy_id == "test" and granted.policy_version == "7"
    assert granted.actor == "dpo@example.org"


def test_events_carry_an_aware_time_from_the_clock(workspace: Path, clock: FixedClock) -> None:
    event = governance(workspace, clock).grant("alice", "persist", actor="dpo")
    at = dt.datetime.fromisoformat(event.at)
    assert at.tzinfo is not None
    assert at.replace(tzinfo=None) == dt.datetime(2026, 11, 30, 10, 0, 0)


def test_consent_is_per_subject_and_purpose(workspace: Path) -> None:
    gov = governance(workspace)
    gov.grant("alice", "persist", actor="dpo")
    assert not gov.consent.is_granted("alice", "summarize")
    assert not gov.consent.is_granted("bob", "persist")
    assert gov.consent.subjects() == ["alice"]


def test_records_are_durable_across_registry_instances(workspace: Path) -> None:
    governance(workspace).grant("alice", "persist", actor="dpo")
    fresh = ConsentRegistry(workspace / GOVERNANCE_DIR)
    assert fresh.is_granted("alice", "persist")
    log = (workspace / GOVERNANCE_DIR / "consent.jsonl").read_text()
    assert json.loads(log.splitlines()[0])["v"] == 1


def test_governance_folder_and_log_are_private(workspace: Path) -> None:
    governance(workspace).grant("alice", "persist", actor="dpo")
    folder = workspace / GOVERNANCE_DIR
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "consent.jsonl").stat().st_mode & 0o777 == 0o600


def test_reading_creates_nothing(workspace: Path) -> None:
    gov = governance(workspace)
    assert not gov.consent.is_granted("alice", "persist")
    assert gov.consent.history() == []
    assert list(workspace.iterdir()) == []


def test_a_change_by_another_registry_is_seen_at_the_next_query(workspace: Path) -> None:
    reader = ConsentRegistry(workspace / GOVERNANCE_DIR)
    writer = governance(workspace)
    assert not reader.is_granted("alice", "persist")
    writer.grant("alice", "persist", actor="dpo")
    assert reader.is_granted("alice", "persist")
    writer.withdraw("alice", "persist", actor="dpo")
    assert not reader.is_granted("alice", "persist")


def test_a_replaced_log_is_read_again_in_full(workspace: Path) -> None:
    gov = governance(workspace)
    gov.grant("alice", "persist", actor="dpo")
    gov.grant("bob", "persist", actor="dpo")
    reader = ConsentRegistry(workspace / GOVERNANCE_DIR)
    assert reader.is_granted("alice", "persist")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    replacement = log.with_name("new.jsonl")
    replacement.write_text(lines[1])  # a retention rewrite keeping bob only
    os.replace(replacement, log)
    assert not reader.is_granted("alice", "persist")
    assert reader.is_granted("bob", "persist")


def test_a_torn_last_line_is_invisible_and_repaired_by_the_next_write(workspace: Path) -> None:
    gov = governance(workspace)
    gov.grant("alice", "persist", actor="dpo")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    with open(log, "ab") as handle:  # a writer killed mid-line
        handle.write(b'{"v":1,"subject":"bob","purpose":"pers')
    reader = ConsentRegistry(workspace / GOVERNANCE_DIR)
    assert reader.subjects() == ["alice"]
    gov.withdraw("alice", "persist", actor="dpo")
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["subject"] == "alice" for line in lines)
    assert not reader.is_granted("alice", "persist")


def test_a_damaged_line_is_reported(workspace: Path) -> None:
    governance(workspace).grant("alice", "persist", actor="dpo")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    with open(log, "a") as handle:
        handle.write("not json\n")
    with pytest.raises(StorageError, match="damaged"):
        ConsentRegistry(workspace / GOVERNANCE_DIR).is_granted("alice", "persist")


def test_a_newer_format_version_names_both_versions(workspace: Path) -> None:
    folder = workspace / GOVERNANCE_DIR
    folder.mkdir()
    (folder / "consent.jsonl").write_text(json.dumps({"v": 9, "subject": "a"}) + "\n")
    with pytest.raises(FormatVersionError, match=r"version 9.*version 1"):
        ConsentRegistry(folder).subjects()


@pytest.mark.parametrize("subject", ["", "   ", "a\nb", "x" * 257, 42])
def test_invalid_subject_ids_are_refused(subject: object) -> None:
    with pytest.raises(ConfigurationError, match="subject_id"):
        validate_subject_id(subject)


def test_unknown_purpose_and_bad_actor_are_refused(workspace: Path) -> None:
    gov = governance(workspace)
    with pytest.raises(ConfigurationError, match="'marketing' is not defined"):
        gov.grant("alice", "marketing", actor="dpo")
    with pytest.raises(ConfigurationError, match="actor"):
        gov.grant("alice", "persist", actor="")
    assert not (workspace / GOVERNANCE_DIR).exists()


def test_a_policy_defined_purpose_can_be_recorded(workspace: Path) -> None:
    policy = Policy.model_validate({"consent": {"purposes": ["persist", "summarize", "analytics"]}})
    gov = Governance(workspace=workspace, policy=policy, settings=Settings())
    gov.grant("alice", "analytics", actor="dpo")
    assert gov.consent.is_granted("alice", "analytics")


def _grant_many(folder: str, worker: int) -> None:
    registry = ConsentRegistry(Path(folder))
    for i in range(40):
        event = registry.make_event(
            f"s{worker}-{i}",
            "persist",
            ConsentAction.GRANT,
            at=dt.datetime(2026, 1, 1),
            actor="w",
            policy_id="p",
            policy_version="1",
        )
        registry.record(event)


def test_concurrent_writers_in_several_processes_lose_nothing(workspace: Path) -> None:
    folder = workspace / GOVERNANCE_DIR
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_grant_many, args=(str(folder), w)) for w in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    registry = ConsentRegistry(folder)
    assert len(registry.history()) == 120
    assert len(registry.subjects()) == 120


def test_withdrawal_in_another_process_stops_writes_of_a_live_conversation(
    workspace: Path,
) -> None:
    """Process A holds a Conversation; process B (the CLI) withdraws; A's next add stays in memory."""
    policy_file = workspace.parent / "needs-consent.toml"
    policy_file.write_text('[policy]\nid = "test"\n[consent]\nrequired_for = ["persist"]\n')
    gov = Governance(workspace=workspace, settings=Settings(policy=policy_file))
    env = {
        **os.environ,
        "WORKSPACE_DIR": str(workspace),
        "GOVERNED_MEMORY_POLICY": str(policy_file),
    }

    def cli(*args: str) -> None:
        done = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    cli("consent", "grant", "--subject", "alice", "--purpose", "persist", "--actor", "dpo")
    path = memory_md_path("Teller", workspace)
    conversation = Conversation(memory_md_path=path, governance=gov, subject_id="alice")
    conversation.add("Human", "stored while consent stands")
    assert "stored while consent stands" in path.read_text()

    cli("consent", "withdraw", "--subject", "alice", "--purpose", "persist", "--actor", "alice")
    before = path.read_bytes()
    conversation.add("Human", "after the withdrawal")
    assert path.read_bytes() == before
    assert conversation.conversation_history[-1]["content"] == "after the withdrawal"

    cli("consent", "grant", "--subject", "alice", "--purpose", "persist", "--actor", "dpo")
    conversation.add("Human", "consent given again")
    assert "consent given again" in path.read_text()
    assert "after the withdrawal" not in path.read_text()


def test_a_log_rewritten_in_place_is_not_mistaken_for_an_append(workspace: Path) -> None:
    """Same inode and a larger size after a rewrite (an inode number reused): read it all."""
    gov = governance(workspace)
    gov.grant("alice", "persist", actor="dpo")
    reader = ConsentRegistry(workspace / GOVERNANCE_DIR)
    assert reader.is_granted("alice", "persist")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    first = log.read_text()
    bob = first.replace('"alice"', '"bob"').replace('"dpo"', '"someone-else"')
    with open(log, "w") as handle:  # same inode, new content, longer than before
        handle.write(bob + bob.replace('"bob"', '"carol"'))
    assert not reader.is_granted("alice", "persist")
    assert reader.subjects() == ["bob", "carol"]
