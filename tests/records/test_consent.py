"""The consent registry: grant, withdraw, status, durability, and other processes' changes.

The registry's tests run on the plaintext log and on the sealed one (encryption at rest).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sealing_helpers import RecordMode

from governed_memory import (
    ConfigurationError,
    ConsentRegistry,
    Conversation,
    FixedClock,
    Governance,
    StorageError,
    memory_md_path,
)
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto._sealing import CONSENT_PURPOSE
from governed_memory._errors import FormatVersionError
from governed_memory._records._chain import link_of
from governed_memory._records._consent import ConsentAction, validate_subject_id
from governed_memory._records._jsonl import encode_line

CLI = [sys.executable, "-c", "from governed_memory._cli import main; main()"]

NEEDS_CONSENT = {"policy": {"id": "test", "version": "7"}, "consent": {"required_for": ["persist"]}}


def governance(workspace: Path, mode: RecordMode, clock: FixedClock | None = None) -> Governance:
    """A Governance needing consent to persist (encrypted in sealed mode)."""
    return Governance(
        workspace=workspace,
        policy=mode.policy(NEEDS_CONSENT),
        settings=mode.settings(),
        clock=clock,
    )


def registry(workspace: Path, mode: RecordMode) -> ConsentRegistry:
    """Another registry on the workspace's log (as another process would open it)."""
    return ConsentRegistry(workspace / GOVERNANCE_DIR, sealing=mode.sealing())


def plain_lines(log: Path, mode: RecordMode) -> list[bytes]:
    """The log's complete lines in plaintext (each checked to be in ``mode``'s form)."""
    return mode.read_lines(log, CONSENT_PURPOSE, "consent.jsonl")


def test_grant_then_withdraw_latest_wins(
    workspace: Path, clock: FixedClock, record_mode: RecordMode
) -> None:
    gov = governance(workspace, record_mode, clock)
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


def test_the_file_place_gives_no_write_guard_so_every_decision_reads_the_log(
    workspace: Path, record_mode: RecordMode
) -> None:
    """A guard is a database's (``granted_guard``); on files the gate reads (one ``stat``)."""
    gov = governance(workspace, record_mode)
    gov.grant("alice", "persist", actor="dpo@example.org")
    assert gov.consent.is_granted("alice", "persist")
    assert gov.consent.granted_guard("alice", "persist") is None


def test_events_carry_an_aware_time_from_the_clock(
    workspace: Path, clock: FixedClock, record_mode: RecordMode
) -> None:
    event = governance(workspace, record_mode, clock).grant("alice", "persist", actor="dpo")
    at = dt.datetime.fromisoformat(event.at)
    assert at.tzinfo is not None
    assert at.replace(tzinfo=None) == dt.datetime(2026, 11, 30, 10, 0, 0)


def test_consent_is_per_subject_and_purpose(workspace: Path, record_mode: RecordMode) -> None:
    gov = governance(workspace, record_mode)
    gov.grant("alice", "persist", actor="dpo")
    assert not gov.consent.is_granted("alice", "summarize")
    assert not gov.consent.is_granted("bob", "persist")
    assert gov.consent.subjects() == ["alice"]


def test_records_are_durable_across_registry_instances(
    workspace: Path, record_mode: RecordMode
) -> None:
    governance(workspace, record_mode).grant("alice", "persist", actor="dpo")
    fresh = registry(workspace, record_mode)
    assert fresh.is_granted("alice", "persist")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    assert json.loads(plain_lines(log, record_mode)[0])["v"] == 2  # the chained format
    assert (b"alice" in log.read_bytes()) is not record_mode.sealed


def test_governance_folder_and_log_are_private(workspace: Path, record_mode: RecordMode) -> None:
    governance(workspace, record_mode).grant("alice", "persist", actor="dpo")
    folder = workspace / GOVERNANCE_DIR
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "consent.jsonl").stat().st_mode & 0o777 == 0o600


def test_reading_creates_nothing(workspace: Path, record_mode: RecordMode) -> None:
    gov = governance(workspace, record_mode)
    assert not gov.consent.is_granted("alice", "persist")
    assert gov.consent.history() == []
    assert list(workspace.iterdir()) == []


def test_a_change_by_another_registry_is_seen_at_the_next_query(
    workspace: Path, record_mode: RecordMode
) -> None:
    reader = registry(workspace, record_mode)
    writer = governance(workspace, record_mode)
    assert not reader.is_granted("alice", "persist")
    writer.grant("alice", "persist", actor="dpo")
    assert reader.is_granted("alice", "persist")
    writer.withdraw("alice", "persist", actor="dpo")
    assert not reader.is_granted("alice", "persist")


def test_a_replaced_log_is_read_again_in_full(workspace: Path, record_mode: RecordMode) -> None:
    gov = governance(workspace, record_mode)
    gov.grant("alice", "persist", actor="dpo")
    gov.grant("bob", "persist", actor="dpo")
    reader = registry(workspace, record_mode)
    assert reader.is_granted("alice", "persist")
    alice = next(r for r in reader.records() if r.event and r.event.subject == "alice")
    registry(workspace, record_mode).remove([alice.id])  # a retention rewrite keeping bob only
    assert not reader.is_granted("alice", "persist")
    assert reader.is_granted("bob", "persist")


def test_a_torn_last_line_is_invisible_and_repaired_by_the_next_write(
    workspace: Path, record_mode: RecordMode
) -> None:
    gov = governance(workspace, record_mode)
    gov.grant("alice", "persist", actor="dpo")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    torn = record_mode.line(CONSENT_PURPOSE, "consent.jsonl", b'{"v":1,"subject":"bob"}')
    with open(log, "ab") as handle:  # a writer killed mid-line
        handle.write(torn[:30])
    reader = registry(workspace, record_mode)
    assert reader.subjects() == ["alice"]
    gov.withdraw("alice", "persist", actor="dpo")
    lines = plain_lines(log, record_mode)
    assert len(lines) == 2 and all(json.loads(line)["subject"] == "alice" for line in lines)
    assert log.read_bytes().count(b"\n") == 2
    assert not reader.is_granted("alice", "persist")


def test_a_damaged_line_is_reported(workspace: Path, record_mode: RecordMode) -> None:
    governance(workspace, record_mode).grant("alice", "persist", actor="dpo")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    with open(log, "a") as handle:
        handle.write("not json\n")
    with pytest.raises(StorageError, match="damaged"):
        registry(workspace, record_mode).is_granted("alice", "persist")


def test_a_newer_format_version_names_both_versions(
    workspace: Path, record_mode: RecordMode
) -> None:
    folder = workspace / GOVERNANCE_DIR
    folder.mkdir()
    line = record_mode.line(CONSENT_PURPOSE, "consent.jsonl", b'{"v": 9, "subject": "a"}')
    (folder / "consent.jsonl").write_bytes(line + b"\n")
    with pytest.raises(FormatVersionError, match=r"version 9.*version 1"):
        registry(workspace, record_mode).subjects()


@pytest.mark.parametrize("subject", ["", "   ", "a\nb", "x" * 257, 42])
def test_invalid_subject_ids_are_refused(subject: object) -> None:
    with pytest.raises(ConfigurationError, match="subject_id"):
        validate_subject_id(subject)


def test_unknown_purpose_and_bad_actor_are_refused(
    workspace: Path, record_mode: RecordMode
) -> None:
    gov = governance(workspace, record_mode)
    with pytest.raises(ConfigurationError, match="'marketing' is not defined"):
        gov.grant("alice", "marketing", actor="dpo")
    with pytest.raises(ConfigurationError, match="actor"):
        gov.grant("alice", "persist", actor="")
    assert not (workspace / GOVERNANCE_DIR).exists()


def test_a_policy_defined_purpose_can_be_recorded(workspace: Path, record_mode: RecordMode) -> None:
    policy = record_mode.policy({"consent": {"purposes": ["persist", "summarize", "analytics"]}})
    gov = Governance(workspace=workspace, policy=policy, settings=record_mode.settings())
    gov.grant("alice", "analytics", actor="dpo")
    assert gov.consent.is_granted("alice", "analytics")


def _grant_many(folder: str, worker: int, mode: RecordMode) -> None:
    registry = ConsentRegistry(Path(folder), sealing=mode.sealing())
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


def test_concurrent_writers_in_several_processes_lose_nothing(
    workspace: Path, record_mode: RecordMode
) -> None:
    folder = workspace / GOVERNANCE_DIR
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_grant_many, args=(str(folder), w, record_mode)) for w in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    reader = registry(workspace, record_mode)
    assert len(reader.history()) == 120
    assert len(reader.subjects()) == 120


def test_withdrawal_in_another_process_stops_writes_of_a_live_conversation(
    workspace: Path, record_mode: RecordMode
) -> None:
    """Process A holds a Conversation; process B (the CLI) withdraws; A's next add stays in memory."""
    policy_file = workspace.parent / "needs-consent.toml"
    encryption = "[encryption]\nenabled = true\n" if record_mode.sealed else ""
    policy_file.write_text(
        f'[policy]\nid = "test"\n[consent]\nrequired_for = ["persist"]\n{encryption}'
    )
    gov = Governance(workspace=workspace, settings=record_mode.settings(policy=policy_file))
    env = {
        **os.environ,
        "WORKSPACE_DIR": str(workspace),
        "GOVERNED_MEMORY_POLICY": str(policy_file),
        **record_mode.env(),
    }

    def cli(*args: str) -> None:
        done = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    cli("consent", "grant", "--subject", "alice", "--purpose", "persist", "--actor", "dpo")
    path = memory_md_path("Teller", workspace)
    conversation = Conversation(memory_md_path=path, governance=gov, subject_id="alice")
    store = conversation.store
    assert store is not None

    def stored() -> str:  # through the store: decrypted in sealed mode
        return store.read_memory() or ""

    conversation.add("Human", "stored while consent stands")
    assert "stored while consent stands" in stored()

    cli("consent", "withdraw", "--subject", "alice", "--purpose", "persist", "--actor", "alice")
    before = store.memory_path.read_bytes()
    conversation.add("Human", "after the withdrawal")
    assert store.memory_path.read_bytes() == before
    assert conversation.conversation_history[-1]["content"] == "after the withdrawal"

    cli("consent", "grant", "--subject", "alice", "--purpose", "persist", "--actor", "dpo")
    conversation.add("Human", "consent given again")
    assert "consent given again" in stored()
    assert "after the withdrawal" not in stored()


def test_a_log_rewritten_in_place_is_not_mistaken_for_an_append(
    workspace: Path, record_mode: RecordMode
) -> None:
    """Same inode and a larger size after a rewrite (an inode number reused): read it all."""
    gov = governance(workspace, record_mode)
    gov.grant("alice", "persist", actor="dpo")
    reader = registry(workspace, record_mode)
    assert reader.is_granted("alice", "persist")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    [first] = plain_lines(log, record_mode)
    bob = first.replace(b'"alice"', b'"bob"').replace(b'"dpo"', b'"someone-else"')
    carol = {**json.loads(bob), "subject": "carol", "seq": 2, "prev": link_of(bob).hex()}
    lines = [bob, encode_line(carol)]  # chained as a writer would have
    stored = [record_mode.line(CONSENT_PURPOSE, "consent.jsonl", line) for line in lines]
    with open(log, "wb") as handle:  # same inode, new content, longer than before
        handle.write(b"".join(line + b"\n" for line in stored))
    assert not reader.is_granted("alice", "persist")
    assert reader.subjects() == ["bob", "carol"]


# -- what retention and the key operations use: records, remove, rewrite ------


def test_records_name_each_stored_line_by_a_digest_of_its_bytes(
    workspace: Path, record_mode: RecordMode
) -> None:
    gov = governance(workspace, record_mode)
    gov.grant("alice", "persist", actor="dpo")
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    with open(log, "ab") as handle:
        handle.write(b"not a record\n")
    stored = log.read_bytes().splitlines()
    found = registry(workspace, record_mode).records()
    assert [(r.id, r.size) for r in found] == [
        (hashlib.sha256(line).hexdigest()[:32], len(line) + 1) for line in stored
    ]
    assert found[0].event is not None and found[0].event.subject == "alice"
    assert found[1].event is None  # unreadable: listed, never parsed into an event


def test_remove_drops_the_named_records_and_keeps_what_keep_asks_for(
    workspace: Path, record_mode: RecordMode
) -> None:
    gov = governance(workspace, record_mode)
    for subject in ("alice", "bob", "carol"):
        gov.grant(subject, "persist", actor="dpo")
    reader = registry(workspace, record_mode)
    alice, bob, carol = reader.records()
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    carol_line = log.read_bytes().splitlines()[2]
    done = reader.remove(
        {alice.id, bob.id, "0" * 32}, keep=lambda e: e is not None and e.subject == "bob"
    )
    assert done.removed == {alice.id} and done.kept == {bob.id}  # the unknown id: neither
    assert [r.id for r in reader.records()] == [bob.id, carol.id]
    assert log.read_bytes().splitlines()[1] == carol_line  # the others keep their bytes
    assert reader.subjects() == ["bob", "carol"]


def test_rewrite_converts_every_line_and_says_whether_the_file_changed(
    workspace: Path, record_mode: RecordMode
) -> None:
    governance(workspace, record_mode).grant("alice", "persist", actor="dpo")
    reader = registry(workspace, record_mode)
    log = workspace / GOVERNANCE_DIR / "consent.jsonl"
    before = log.read_bytes()
    assert reader.rewrite(lambda line: line) is False
    assert reader.rewrite(lambda line: line + b" ") is True
    assert log.read_bytes() == before[:-1] + b" \n"


def _remove_one_by_one(folder: str, mode: RecordMode, ids: list[str]) -> None:
    registry = ConsentRegistry(Path(folder), sealing=mode.sealing())
    for record_id in ids:
        assert registry.remove([record_id]).removed == {record_id}


def test_removing_in_one_process_loses_no_grant_of_another(
    workspace: Path, record_mode: RecordMode
) -> None:
    """Each remove is a rewrite of the whole log: under the writers' lock, no append is lost."""
    gov = governance(workspace, record_mode)
    for i in range(40):
        gov.withdraw(f"old-{i}", "persist", actor="dpo")
    folder = workspace / GOVERNANCE_DIR
    ids = [r.id for r in registry(workspace, record_mode).records()]
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_remove_one_by_one, args=(str(folder), record_mode, ids)),
        ctx.Process(target=_grant_many, args=(str(folder), 0, record_mode)),
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    events = registry(workspace, record_mode).history()
    assert sorted(e.subject for e in events) == sorted(f"s0-{i}" for i in range(40))
