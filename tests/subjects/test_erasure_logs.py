"""The scheduler's erasure log lines name the subject by its keyed hash, never raw (issue 13, item 7)."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pytest
from subjects_helpers import STORE_KINDS, conversation
from unreadable_helpers import gov_of

from governed_memory import FixedClock
from governed_memory._records import HoldRegistry
from governed_memory._subjects import schedule_erasure, scheduled_erasure_task

SUBJECT = "customer-4711-secret"


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _due(workspace: Path, clock: FixedClock, kind: str, *, held: bool) -> tuple[object, str]:
    gov = gov_of(workspace, clock, kind)
    conv = conversation(gov, "A")
    conv.add("Human", "a note", subject_id=SUBJECT)
    conv.store.close()  # type: ignore[union-attr]
    schedule_erasure(gov, subject=SUBJECT, grace="1d")
    if held:  # placed after scheduling: the erasure falls due blocked
        HoldRegistry(gov.governance_dir, clock=clock, sealing=gov.sealing).place(
            subject=SUBJECT, reason="case 7", actor="legal"
        )
    gov.clock = FixedClock(clock.now() + dt.timedelta(days=2))
    return gov, gov.subject_ref(SUBJECT)


def test_a_completed_scheduled_erasure_is_logged_with_the_subjects_hash(
    workspace: Path, clock: FixedClock, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    gov, ref = _due(workspace, clock, kind, held=False)
    with caplog.at_level(logging.INFO, logger="governed_memory"):
        scheduled_erasure_task(gov)  # type: ignore[arg-type]
    assert "complete" in caplog.text and ref in caplog.text
    assert SUBJECT not in caplog.text


def test_a_due_erasure_blocked_by_a_hold_is_logged_with_the_subjects_hash(
    workspace: Path, clock: FixedClock, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    gov, ref = _due(workspace, clock, kind, held=True)
    with caplog.at_level(logging.INFO, logger="governed_memory"):
        scheduled_erasure_task(gov)  # type: ignore[arg-type]
    assert "due but blocked by legal hold(s) hold-" in caplog.text and ref in caplog.text
    assert SUBJECT not in caplog.text
