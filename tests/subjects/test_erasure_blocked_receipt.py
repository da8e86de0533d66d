"""A refused item makes the erasure's stored receipt ``blocked`` with the reason (issue 13, build 1).

An erasure that could not reach an item (a symbolic link, an unreadable
file) stays pending, and its last run's receipt, stored with the pending
tombstone, lists each item with its path and reason; its state is
``blocked``, never ``complete``. Once fixed, the erasure completes as before.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from subjects_helpers import STORE_KINDS, readable_text
from unreadable_helpers import damage, gov_of, link_agent, populate, source, tombs

from governed_memory import FixedClock, StorageError
from governed_memory._cli import main
from governed_memory._records import ErasureReceipt, UnreachedItem
from governed_memory._subjects import erase, erasure_receipts, pending_erasure, resume_erasures


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _stored(gov: object) -> ErasureReceipt:
    [tombstone] = tombs(gov).pending()  # type: ignore[arg-type]
    assert tombstone.receipt is not None
    return ErasureReceipt.from_dict(tombstone.receipt)


def test_a_linked_agent_folder_is_stored_as_blocked_with_the_path_and_reason(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "Evil"))
    outside = link_agent(gov, tmp_path)
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    receipt = _stored(gov)
    assert receipt.state == "blocked"
    assert receipt.unreached == (UnreachedItem("Evil", "agents/Evil", "a symbolic link"),)
    assert receipt.records == 1 and receipt.agents == ["A"]  # what it did reach
    assert receipt.keys_shredded == ()
    assert erasure_receipts(gov) == []  # not complete
    found = pending_erasure(gov, receipt.id)
    assert found is not None and found.last_run == receipt
    assert found.to_dict()["last_run"]["state"] == "blocked"
    # Fixed: the real folder back, and the erasure completes.
    (workspace / "agents" / "Evil").unlink()
    shutil.move(outside, workspace / "agents" / "Evil")
    [done] = resume_erasures(gov)
    assert done.state == "complete" and done.unreached == ()
    assert "alice secret" not in readable_text(gov)


def test_an_unreadable_file_is_stored_as_blocked_unreadable_with_the_error(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov)
    damage(gov, "A")
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    receipt = _stored(gov)
    assert receipt.state == "blocked"
    [item] = receipt.unreached
    assert (item.agent, item.file) == ("A", source(gov, "A"))
    assert item.reason.startswith("unreadable: ")
    assert receipt.agents == ["B", "C"]


def test_a_link_inside_an_agent_is_stored_as_blocked(
    workspace: Path, clock: FixedClock, kind: str, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, kind)
    populate(gov, ("A", "B"))
    memory = (
        workspace / "agents" / "A" / ("MEMORY.md.gmenc" if kind == "encrypted" else "MEMORY.md")
    )
    outside = tmp_path / "outside-memory"
    shutil.move(memory, outside)
    memory.symlink_to(outside)
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    [item] = _stored(gov).unreached
    assert (item.file, item.reason) == (memory.relative_to(workspace).as_posix(), "a symbolic link")


def test_a_blocked_receipt_round_trips_and_names_its_state_once() -> None:
    receipt = ErasureReceipt.from_dict(json.loads(BLOCKED_RECEIPT))
    assert receipt.state == "blocked"
    assert receipt.unreached == (UnreachedItem("Evil", "agents/Evil", "a symbolic link"),)
    assert receipt.to_dict() == json.loads(BLOCKED_RECEIPT)


def test_a_receipt_written_before_blocked_items_reads_as_complete_with_the_same_bytes() -> None:
    """Known answer: a receipt as earlier releases stored it reads back and writes back alike."""
    data = json.loads(OLD_RECEIPT)
    receipt = ErasureReceipt.from_dict(data)
    assert receipt.state == "complete" and receipt.unreached == ()
    assert json.dumps(receipt.to_dict(), sort_keys=True) == json.dumps(data, sort_keys=True)


def test_erasures_show_and_list_show_the_blocked_items(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    gov = gov_of(workspace, clock, "plaintext")
    populate(gov, ("A", "Evil"))
    link_agent(gov, tmp_path)
    with pytest.raises(StorageError):
        erase(gov, subject="alice")
    erasure_id = _stored(gov).id
    runner = CliRunner()
    shown = runner.invoke(main, ["--workspace", str(workspace), "erasures", "show", erasure_id])
    assert shown.exit_code == 0, shown.output
    assert "blocked" in shown.output and "a symbolic link" in shown.output
    listed = runner.invoke(
        main, ["--workspace", str(workspace), "erasures", "list"], env={"COLUMNS": "400"}
    )
    assert listed.exit_code == 0, listed.output
    assert "reason pending" in listed.output and "pending (blocked)" in listed.output
    assert "agents/Evil: a" in listed.output  # the cell wraps: "symbolic link" on the next line


OLD_RECEIPT = """{"completed_at": "2026-05-01T09:00:00+02:00", "files": [{"agent": "A",
"bytes_removed": 10, "bytes_written": 5, "deleted": false, "file": "agents/A/MEMORY.md",
"records": 1, "summaries": 0}], "id": "20260501T070000000000Z-0a0b0c0d", "keys_shredded": [],
"policy_id": "p", "policy_version": "3", "reason": "art. 17", "requested_at":
"2026-05-01T09:00:00+02:00", "requested_by": "dpo", "resumed": false, "scope": {"agent": null,
"subject": "customer-42"}, "totals": {"agents": 1, "bytes_removed": 10, "bytes_written": 5,
"files": 1, "records": 1, "summaries": 0}}"""

BLOCKED_RECEIPT = (
    OLD_RECEIPT[:-1]
    + """, "state": "blocked", "unreached": [{"agent": "Evil",
"file": "agents/Evil", "reason": "a symbolic link"}]}"""
)
