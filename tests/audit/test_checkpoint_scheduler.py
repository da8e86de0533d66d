"""The scheduler signs audit checkpoints at ``evidence.checkpoint_every`` (real APScheduler)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from governed_memory import Governance, Policy
from governed_memory._audit import iter_entries, verify_public
from governed_memory._crypto import LocalSigningKey
from governed_memory._policy import Settings
from governed_memory._scheduler import CHECKPOINT_JOB, PurgeScheduler, start_scheduler

SIGNER = LocalSigningKey(bytes(range(32)))


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def governance(workspace: Path, *, signing: bool = True) -> Governance:
    policy = Policy.model_validate(
        {
            "schedule": {"purge_interval": "1d"},
            "audit": {"enabled": True},
            "evidence": {"checkpoint_every": "1h"},
        }
    )
    gov = Governance(
        workspace=workspace,
        policy=policy,
        settings=Settings(audit_key="ab" * 32),
        signing_key=SIGNER if signing else None,
    )
    gov.audit.record("persist", agent="a", subject_id=None, outcome="ok")
    return gov


@pytest.fixture
def stoppers() -> Iterator[list[PurgeScheduler]]:
    started: list[PurgeScheduler] = []
    yield started
    for handle in started:
        handle.stop()


def _checkpoints(workspace: Path) -> list[int]:
    folder = workspace / ".governed_memory" / "audit"
    return [e.seq for e in iter_entries(folder) if e.event == "audit.checkpoint"]


def test_leader_signs_a_checkpoint_at_once_then_every_interval(
    workspace: Path, stoppers: list[PurgeScheduler]
) -> None:
    gov = governance(workspace)
    handle = start_scheduler(gov, leader_retry=0.1, tasks=())
    stoppers.append(handle)
    assert wait_for(lambda: len(_checkpoints(workspace)) == 1)
    job = handle._scheduler.get_job(CHECKPOINT_JOB)
    assert job.trigger.interval == dt.timedelta(hours=1)
    assert (job.max_instances, job.coalesce) == (1, True)
    handle.stop()
    report = verify_public(workspace / ".governed_memory" / "audit", SIGNER.public_key)
    assert report.ok and report.pinned_through is not None


def test_without_a_signing_key_the_run_logs_the_fix(
    workspace: Path, stoppers: list[PurgeScheduler], caplog: pytest.LogCaptureFixture
) -> None:
    gov = governance(workspace, signing=False)
    with caplog.at_level(logging.ERROR, logger="governed_memory.scheduler"):
        handle = start_scheduler(gov, leader_retry=0.1, tasks=())
        stoppers.append(handle)
        assert wait_for(lambda: "signing-keygen" in caplog.text)
    assert _checkpoints(workspace) == []


def test_no_checkpoint_job_without_checkpoint_every(
    workspace: Path, stoppers: list[PurgeScheduler]
) -> None:
    policy = Policy.model_validate({"schedule": {"purge_interval": "1d"}})
    handle = start_scheduler(Governance(workspace=workspace, policy=policy), leader_retry=0.1)
    stoppers.append(handle)
    assert handle.leading.wait(20)
    assert handle._scheduler.get_job(CHECKPOINT_JOB) is None


def test_checkpoint_every_without_audit_is_a_contradiction() -> None:
    from governed_memory._errors import PolicyError

    with pytest.raises((PolicyError, ValueError), match="checkpoint_every"):
        Policy.model_validate({"evidence": {"checkpoint_every": "1d"}})
