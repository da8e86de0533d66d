"""Rectification survives kill -9 at any durable write: old or new state, and a re-run completes."""

from __future__ import annotations

from pathlib import Path

import pytest
from rectify_helpers import NEW, OLD, OLD_NEEDLE, everything_on_disk, memories_text, workspace_with
from subjects_helpers import STORE_KINDS, killed_at_call

from governed_memory import (
    FixedClock,
    Governance,
    rectification_receipts,
    rectify,
    resume_rectifications,
    subject_records,
)
from governed_memory._records import RectificationStore


def _rectify_in_child_and_kill(gov: Governance, record: str, function: str, nth: int) -> bool:
    """Fork; the child rectifies and is killed at the ``nth`` call of ``os.<function>``."""
    return killed_at_call(
        function, nth, lambda: rectify(gov, subject="alice", record=record, text=NEW)
    )


def _contents(gov: Governance, record: str) -> list[str]:
    return [r.content for r in subject_records(gov, "alice") if r.id == record]


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize(
    ("function", "nth"),
    [("fsync", n) for n in range(1, 14)] + [("replace", n) for n in range(1, 5)],
)
def test_kill_9_at_any_durable_write_then_the_same_command_completes(
    workspace: Path, clock: FixedClock, kind: str, function: str, nth: int
) -> None:
    gov = workspace_with(workspace, clock, kind=kind)
    [record] = [r.id for r in subject_records(gov, "alice") if r.content == OLD]
    _rectify_in_child_and_kill(gov, record, function, nth)
    # Each file holds the old or the new content, never a mix or a torn file.
    assert _contents(gov, record) in ([OLD], [NEW])
    # The person's request is simply run again: it finishes what the killed run began.
    receipt = rectify(gov, subject="alice", record=record, text=NEW)
    assert _contents(gov, record) == [NEW]
    assert rectification_receipts(gov) == [receipt]
    assert receipt.records == 1 and receipt.summaries_marked == 1
    assert RectificationStore(gov.governance_dir, sealing=gov.sealing).pending() == []
    assert OLD_NEEDLE not in everything_on_disk(gov)  # temporary copies included
    assert "bob asks" in memories_text(gov)


def test_resume_finishes_an_interrupted_rectification_with_exact_counts(
    workspace: Path, clock: FixedClock
) -> None:
    gov = workspace_with(workspace, clock)
    [record] = [r.id for r in subject_records(gov, "alice") if r.content == OLD]
    assert _rectify_in_child_and_kill(gov, record, "replace", 3)  # after the first file
    [pending] = RectificationStore(gov.governance_dir).pending()
    assert pending.text == NEW  # kept until the work is done
    [receipt] = resume_rectifications(gov)
    assert receipt.id == pending.id and receipt.resumed
    assert receipt.records == 1 and receipt.summaries_marked == 1
    stored = RectificationStore(gov.governance_dir).get(receipt.id)
    assert stored is not None and stored.text is None and stored.old_texts == ()
