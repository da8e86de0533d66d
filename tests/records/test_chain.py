"""The record chain of the consent log: replayed, swapped and deleted lines are refused.

Every test runs on the plaintext log and on the sealed one (encryption at rest):
the attacks copy, move or delete whole stored lines, which needs no key.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing_helpers import RecordMode

from governed_memory import (
    ConsentRegistry,
    Conversation,
    Governance,
    StorageError,
    memory_md_path,
)
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto._sealing import CONSENT_PURPOSE
from governed_memory._records import _place
from governed_memory._records._chain import Run, merge_runs
from governed_memory._records._consent import ConsentAction

ACTIONS = {"grant": ConsentAction.GRANT, "withdraw": ConsentAction.WITHDRAW}
CTX = "consent.jsonl"
BROKEN = (
    r"consent log .*consent\.jsonl line {line} breaks the chain of records: .*{why}"
    r".*restore consent\.jsonl"
)


def registry(workspace: Path, mode: RecordMode) -> ConsentRegistry:
    return ConsentRegistry(workspace / GOVERNANCE_DIR, sealing=mode.sealing())


def record(reg: ConsentRegistry, subject: str, action: str) -> None:
    reg.record(
        reg.make_event(
            subject,
            "persist",
            ACTIONS[action],
            at=dt.datetime(2026, 5, 1, 9),
            actor="dpo",
            policy_id="p",
            policy_version="1",
        )
    )


def log_lines_path(workspace: Path) -> Path:
    return workspace / GOVERNANCE_DIR / CTX


def log_lines(workspace: Path) -> list[bytes]:
    return (workspace / GOVERNANCE_DIR / "consent.jsonl").read_bytes().splitlines()


def write_lines(workspace: Path, lines: list[bytes]) -> None:
    (workspace / GOVERNANCE_DIR / "consent.jsonl").write_bytes(b"".join(x + b"\n" for x in lines))


def granted_then_withdrawn(workspace: Path, mode: RecordMode) -> ConsentRegistry:
    reg = registry(workspace, mode)
    record(reg, "alice", "grant")
    record(reg, "bob", "grant")
    record(reg, "alice", "withdraw")
    assert not reg.is_granted("alice", "persist")
    return reg


def test_an_old_grant_replayed_after_a_withdrawal_is_refused(
    workspace: Path, record_mode: RecordMode
) -> None:
    """The attack of issue 13: the copy would be the newest line, so it would read as granted."""
    granted_then_withdrawn(workspace, record_mode)
    lines = log_lines(workspace)
    write_lines(workspace, [*lines, lines[0]])
    reader = registry(workspace, record_mode)
    with pytest.raises(StorageError, match=BROKEN.format(line=4, why="copied again")):
        reader.is_granted("alice", "persist")
    with pytest.raises(StorageError, match="breaks the chain"):
        reader.status("alice")  # every query fails closed, none reads the copy as granted


def test_two_swapped_lines_are_refused(workspace: Path, record_mode: RecordMode) -> None:
    granted_then_withdrawn(workspace, record_mode)
    first, second, third = log_lines(workspace)
    write_lines(workspace, [first, third, second])  # the withdrawal moved before a grant
    with pytest.raises(StorageError, match=BROKEN.format(line=2, why="")):
        registry(workspace, record_mode).is_granted("alice", "persist")


def test_the_swap_is_also_seen_by_a_reader_that_read_the_log_before(
    workspace: Path, record_mode: RecordMode
) -> None:
    reader = granted_then_withdrawn(workspace, record_mode)
    first, second, third = log_lines(workspace)
    write_lines(workspace, [third, second, first])
    with pytest.raises(StorageError, match=BROKEN.format(line=1, why="")):
        reader.is_granted("alice", "persist")


def test_a_line_deleted_from_the_middle_is_refused(
    workspace: Path, record_mode: RecordMode
) -> None:
    granted_then_withdrawn(workspace, record_mode)
    first, _, third = log_lines(workspace)
    write_lines(workspace, [first, third])
    with pytest.raises(StorageError, match=BROKEN.format(line=2, why="deleted")):
        registry(workspace, record_mode).history()


def test_a_line_appended_by_another_process_that_repeats_a_number_is_refused(
    workspace: Path, record_mode: RecordMode
) -> None:
    """A reader holding the log in its cache checks appended lines too."""
    reader = granted_then_withdrawn(workspace, record_mode)
    lines = log_lines(workspace)
    with open(workspace / GOVERNANCE_DIR / "consent.jsonl", "ab") as handle:
        handle.write(lines[1] + b"\n")
    with pytest.raises(StorageError, match=BROKEN.format(line=4, why="")):
        reader.is_granted("bob", "persist")


def test_an_unchained_line_after_chained_ones_is_refused(
    workspace: Path, record_mode: RecordMode
) -> None:
    """A version 1 line (written before the chain) replayed after an upgrade."""
    granted_then_withdrawn(workspace, record_mode)
    old = json.loads(record_mode.read_lines(log_lines_path(workspace), CONSENT_PURPOSE, CTX)[0])
    old = {k: v for k, v in old.items() if k not in ("seq", "prev")} | {"v": 1}
    plain = json.dumps(old, sort_keys=True, separators=(",", ":")).encode()
    write_lines(workspace, [*log_lines(workspace), record_mode.line(CONSENT_PURPOSE, CTX, plain)])
    with pytest.raises(StorageError, match=BROKEN.format(line=4, why="unchained")):
        registry(workspace, record_mode).is_granted("alice", "persist")


def test_an_edited_middle_line_is_refused_in_plaintext(workspace: Path) -> None:
    """Plaintext has no key: the edit shows because the next line names the original."""
    reg = ConsentRegistry(workspace / GOVERNANCE_DIR)
    record(reg, "alice", "withdraw")
    record(reg, "bob", "grant")
    first, second = log_lines(workspace)
    write_lines(workspace, [first.replace(b'"withdraw"', b'"grant"'), second])
    with pytest.raises(StorageError, match=BROKEN.format(line=2, why="edited")):
        ConsentRegistry(workspace / GOVERNANCE_DIR).is_granted("alice", "persist")


def test_a_torn_last_line_is_not_tampering_and_the_next_record_continues_the_chain(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = granted_then_withdrawn(workspace, record_mode)
    lines = log_lines(workspace)
    with open(log_lines_path(workspace), "ab") as handle:
        handle.write(lines[0][:25])  # a writer killed mid-line
    assert not registry(workspace, record_mode).is_granted("alice", "persist")
    record(reg, "alice", "grant")
    fresh = registry(workspace, record_mode)
    assert fresh.is_granted("alice", "persist")
    plain = record_mode.read_lines(log_lines_path(workspace), CONSENT_PURPOSE, CTX)
    assert [json.loads(x)["seq"] for x in plain] == [1, 2, 3, 4]


def test_removed_records_leave_a_note_and_the_chain_still_reads(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = granted_then_withdrawn(workspace, record_mode)
    record(reg, "carol", "grant")
    alice_grant, bob, alice_withdraw, carol = registry(workspace, record_mode).records()
    kept = log_lines(workspace)
    done = reg.remove([alice_grant.id, alice_withdraw.id])
    assert done.removed == {alice_grant.id, alice_withdraw.id}
    reader = registry(workspace, record_mode)
    assert [r.id for r in reader.records()] == [bob.id, carol.id]  # the note is no record
    assert log_lines(workspace)[:2] == [kept[1], kept[3]]  # kept lines keep their bytes
    assert reader.subjects() == ["bob", "carol"]
    reg.remove([carol.id])  # the last record: the next one still gets a fresh number
    record(reg, "dave", "grant")
    plain = record_mode.read_lines(log_lines_path(workspace), CONSENT_PURPOSE, CTX)
    assert [json.loads(x).get("seq") for x in plain] == [2, None, 5]
    assert json.loads(plain[1])["removed"] == [
        [1, 1, json.loads(plain[1])["removed"][0][2]],
        [3, 4, json.loads(plain[2])["prev"]],
    ]
    assert registry(workspace, record_mode).subjects() == ["bob", "dave"]


def test_a_replay_stays_visible_after_a_removal(workspace: Path, record_mode: RecordMode) -> None:
    reg = granted_then_withdrawn(workspace, record_mode)
    lines = log_lines(workspace)
    write_lines(workspace, [lines[0], lines[2], lines[1]])  # swapped
    bob = next(r for r in reg.records() if r.event and r.event.subject == "bob")
    reg.remove([])  # nothing named: nothing changes
    assert log_lines(workspace) == [lines[0], lines[2], lines[1]]
    with pytest.raises(StorageError, match="breaks the chain"):
        registry(workspace, record_mode).is_granted("alice", "persist")
    assert bob.event is not None


def test_removing_every_record_then_recording_again(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = granted_then_withdrawn(workspace, record_mode)
    reg.remove([r.id for r in reg.records()])
    fresh = registry(workspace, record_mode)
    assert fresh.history() == []
    record(fresh, "erin", "grant")
    assert registry(workspace, record_mode).is_granted("erin", "persist")


def test_adjacent_runs_are_merged_and_keep_the_later_link() -> None:
    a, b, c = Run(1, 2, b"a" * 16), Run(3, 3, b"b" * 16), Run(6, 7, b"c" * 16)
    assert merge_runs([c, b, a]) == [Run(1, 3, b"b" * 16), c]


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), max_size=12))
def test_lines_read_back_from_the_end_in_chunks_are_the_lines_reversed(
    lines: list[bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """How an append finds the end of the chain without reading a long log in full."""
    data = b"".join(line + b"\n" for line in lines)
    path = tmp_path_factory.mktemp("lines") / "log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        with patch.object(_place, "_CHUNK", 7):
            found = list(_place._reversed_lines(fd, len(data)))
    finally:
        os.close(fd)
    assert [x for x in found if x] == [x for x in reversed(lines) if x]
    assert len(found) == len(lines) + (1 if data else 0)  # the empty rest after the last newline


def test_an_append_to_a_long_log_chains_onto_its_last_record(
    workspace: Path, record_mode: RecordMode
) -> None:
    reg = registry(workspace, record_mode)
    for i in range(300):  # more than one 64 KiB chunk when sealed
        record(reg, f"subject-{i}", "grant")
    record(reg, "last", "withdraw")
    plain = record_mode.read_lines(log_lines_path(workspace), CONSENT_PURPOSE, CTX)
    assert [json.loads(x)["seq"] for x in plain] == list(range(1, 302))
    assert registry(workspace, record_mode).subjects()[-1] == "subject-99"


def test_a_conversation_persists_nothing_on_a_tampered_log(
    workspace: Path, record_mode: RecordMode
) -> None:
    """Fail closed end to end: the replayed grant does not let a message reach the memory."""
    gov = Governance(
        workspace=workspace,
        policy=record_mode.policy(
            {"policy": {"id": "t", "version": "1"}, "consent": {"required_for": ["persist"]}}
        ),
        settings=record_mode.settings(),
    )
    gov.grant("alice", "persist", actor="dpo")
    conversation = Conversation(
        memory_md_path=memory_md_path("Teller", workspace), governance=gov, subject_id="alice"
    )
    conversation.add("Human", "stored while consent stands")
    gov.withdraw("alice", "persist", actor="alice")
    store = conversation.store
    assert store is not None
    before = store.memory_path.read_bytes()
    lines = log_lines(workspace)
    write_lines(workspace, [*lines, lines[0]])  # the old grant replayed after the withdrawal
    with pytest.raises(StorageError, match="breaks the chain"):
        conversation.add("Human", "must not be stored")
    assert store.memory_path.read_bytes() == before
