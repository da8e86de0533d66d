"""Purges follow lineage: a summary derived from a held subject is held, plaintext and encrypted."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS, conversation, governance

from governed_memory import FixedClock, Policy
from governed_memory._retention import Retention

RULES = Policy.model_validate({"retention": {"archives_max_age": "30d"}})


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_an_archive_whose_summary_names_a_held_subject_is_not_purged(
    workspace: Path, clock: FixedClock, kind: str
) -> None:
    """The second archive holds only T-1's record and a summary of H and T-1 (lineage)."""
    gov = governance(workspace, clock, RULES, kind=kind)
    conv = conversation(gov, "A", subject_id="T-1")
    conv.add("Human", "H evidence", subject_id="H")
    conv.add("Human", "T-1 words")
    conv.compact("[Compressed Memory Summary] H and T-1")  # archive 1: H's record
    conv.add("Human", "T-1 later")
    conv.compact("[Compressed Memory Summary] again")  # archive 2: the summary + T-1's record
    conv.store.close()  # type: ignore[union-attr]
    archive_dir = workspace / "agents" / "A" / "archive"
    assert len(list(archive_dir.iterdir())) == 2
    hold = Retention(gov).holds.place(subject="H", reason="case", actor="legal")
    clock.advance(dt.timedelta(days=40))
    plan = Retention(gov).plan()
    assert [i.held_by for i in plan.items] == [(hold.id,), (hold.id,)]
    report = Retention(gov).purge()
    assert report.held == {"archives_max_age": 2} and report.total_deleted == 0
    assert len(list(archive_dir.iterdir())) == 2
    Retention(gov).holds.release(hold_id=hold.id, actor="legal")
    assert Retention(gov).purge().deleted == {"archives_max_age": 2}
