"""Purging consent records: through the consent registry, named as plans always named them."""

from __future__ import annotations

import datetime as dt
import hashlib
import multiprocessing
import time
from pathlib import Path

from governed_memory import FixedClock, Governance, Policy
from governed_memory._base import ArtefactKind
from governed_memory._records import ConsentAction, ConsentRegistry
from governed_memory._retention import Retention

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)
POLICY = Policy.model_validate({"retention": {"consent_records_max_age": "30d"}})


def withdrawn(workspace: Path, subjects: int) -> Governance:
    """A governance at T0 + 100 days whose log holds one old withdrawal per subject."""
    clock = FixedClock(T0)
    gov = Governance(workspace=workspace, policy=POLICY, clock=clock)
    for i in range(subjects):
        gov.withdraw(f"old-{i}", "persist", actor="app")
    clock.set(T0 + 100 * DAY)
    return gov


def test_consent_records_are_named_by_a_digest_of_their_stored_line(workspace: Path) -> None:
    """The name plans and journals written by earlier releases use: ``<log>#sha256[:32]``."""
    gov = withdrawn(workspace, 2)
    lines = gov.consent.path.read_bytes().splitlines()
    found = [a for a in Retention(gov).scan().others if a.kind is ArtefactKind.CONSENT]
    assert [(a.path, a.size) for a in found] == [
        (f".governed_memory/consent.jsonl#{hashlib.sha256(line).hexdigest()[:32]}", len(line) + 1)
        for line in lines
    ]


def _grant(folder: str, count: int) -> None:
    registry = ConsentRegistry(Path(folder))
    for i in range(count):
        at = dt.datetime(2026, 4, 11)
        registry.record(
            registry.make_event(
                f"new-{i}",
                "persist",
                ConsentAction.GRANT,
                at=at,
                actor="w",
                policy_id="p",
                policy_version="1",
            )
        )


def test_a_purge_loses_no_grant_made_meanwhile_by_another_process(workspace: Path) -> None:
    gov = withdrawn(workspace, 30)
    ctx = multiprocessing.get_context("spawn")
    writer = ctx.Process(target=_grant, args=(str(gov.governance_dir), 300))
    writer.start()
    deadline = time.monotonic() + 60
    while len(gov.consent.history()) == 30 and time.monotonic() < deadline:
        time.sleep(0.005)  # until the writer is appending, so the purge overlaps it
    report = Retention(gov).purge()
    writer.join(60)
    assert writer.exitcode == 0
    assert report.deleted == {"consent_records_max_age": 30}
    events = ConsentRegistry(gov.governance_dir).history()
    assert sorted(e.subject for e in events) == sorted(f"new-{i}" for i in range(300))
