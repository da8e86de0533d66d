"""Scheduled purges (and signed audit checkpoints) with real APScheduler: triggers, catch-up, leadership, SIGTERM."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from governed_memory import Conversation, FixedClock, Governance, Policy
from governed_memory._audit import iter_entries, verify_public
from governed_memory._crypto import LocalSigningKey
from governed_memory._errors import ConfigurationError, FormatVersionError
from governed_memory._policy import Settings
from governed_memory._policy._model import SchedulePolicy
from governed_memory._retention._purge import _PurgeLock
from governed_memory._scheduler import (
    CHECKPOINT_JOB,
    PURGE_JOB,
    PurgeScheduler,
    build_trigger,
    schedule_status,
    start_scheduler,
)

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll until ``condition`` holds (a wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def governance(workspace: Path, now: dt.datetime, **schedule: object) -> Governance:
    policy = Policy.model_validate(
        {
            "retention": {"archives_max_age": "30d"},
            "schedule": schedule or {"purge_cron": "0 3 * * *"},
        }
    )
    return Governance(workspace=workspace, policy=policy, clock=FixedClock(now))


def populate(workspace: Path) -> None:
    clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
    conv = Conversation(
        name="c", memory_md_path=workspace / "agents" / "a" / "MEMORY.md", clock=clock
    )
    for day in range(3):
        conv.add("User", f"day {day}")
        conv.compact("summary")
        clock.advance(DAY)


def archives(workspace: Path) -> list[Path]:
    return sorted(workspace.glob("agents/*/archive/history_*"))


def write_last_success(workspace: Path, when: dt.datetime) -> None:
    folder = workspace / ".governed_memory" / "scheduler"
    folder.mkdir(parents=True, exist_ok=True)
    data = {"v": 1, "last_success": when.astimezone().isoformat()}
    (folder / "state.json").write_text(json.dumps(data))


@pytest.fixture
def stoppers() -> Iterator[list[PurgeScheduler]]:
    started: list[PurgeScheduler] = []
    yield started
    for handle in started:
        handle.stop()


def test_trigger_from_cron_and_from_interval() -> None:
    cron = build_trigger(SchedulePolicy(purge_cron="0 3 * * *", timezone="Europe/Berlin"))
    start = dt.datetime(2026, 1, 1, 4, 0, tzinfo=dt.UTC)
    assert cron.get_next_fire_time(None, start).isoformat() == "2026-01-02T03:00:00+01:00"
    interval = build_trigger(SchedulePolicy(purge_interval="6h"), start=start)
    later = start + dt.timedelta(seconds=1)
    assert interval.get_next_fire_time(None, later) == start + dt.timedelta(hours=6)


def test_policy_without_schedule_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"schedule\.purge_cron"):
        build_trigger(SchedulePolicy())


@pytest.mark.parametrize(
    ("last", "now", "due"),
    [
        (None, T0, True),  # never purged by a scheduler: purge on first start
        (dt.datetime(2026, 1, 1, 3, 0), dt.datetime(2026, 1, 1, 20, 0), False),  # next is 2 Jan
        (dt.datetime(2026, 1, 1, 3, 0), dt.datetime(2026, 1, 2, 3, 0, 1), True),  # 2 Jan missed
        (dt.datetime(2026, 1, 1, 3, 0), dt.datetime(2026, 1, 9, 0, 0), True),  # a week off
    ],
)
def test_catch_up_is_due_when_a_fire_time_after_the_last_success_passed(
    workspace: Path, last: dt.datetime | None, now: dt.datetime, due: bool
) -> None:
    gov = governance(workspace, now, purge_cron="0 3 * * *", timezone="UTC")
    handle = PurgeScheduler(gov)
    trigger = build_trigger(gov.policy.schedule)
    last_aware = last.replace(tzinfo=dt.UTC) if last else None
    gov.clock = FixedClock(now.replace(tzinfo=dt.UTC))
    assert handle.catch_up_due(last_aware, trigger) is due


def test_missed_run_is_caught_up_at_start(workspace: Path, stoppers: list[PurgeScheduler]) -> None:
    populate(workspace)
    write_last_success(workspace, T0 + 30 * DAY)
    gov = governance(workspace, T0 + 40 * DAY, purge_cron="0 3 * * *")  # 10 fire times missed
    handle = start_scheduler(gov, leader_retry=0.1)
    stoppers.append(handle)
    assert wait_for(lambda: handle.runs == 1)
    assert handle.last_report is not None and handle.last_report.total_deleted == 3
    assert archives(workspace) == []
    assert handle.last_report.as_of == T0 + 40 * DAY  # the injected clock, not the wall clock
    status = schedule_status(gov)
    assert status["last_success"].startswith("2026-02-10T12:00:00")
    assert status["leader_pid"] == os.getpid() and status["overdue"] is False


def test_no_catch_up_when_the_last_run_is_recent(
    workspace: Path, stoppers: list[PurgeScheduler]
) -> None:
    populate(workspace)
    now = dt.datetime.now()  # APScheduler fires by the wall clock: keep both in step here
    write_last_success(workspace, now - dt.timedelta(hours=1))
    handle = start_scheduler(governance(workspace, now, purge_interval="1d"), leader_retry=0.1)
    stoppers.append(handle)
    assert handle.leading.wait(20)
    assert handle.next_run_time is not None
    assert handle.next_run_time > dt.datetime.now(dt.UTC) + dt.timedelta(hours=12)
    assert handle.runs == 0 and len(archives(workspace)) == 3  # the next run is a day away


def test_purge_job_never_overlaps_and_coalesces(
    workspace: Path, stoppers: list[PurgeScheduler]
) -> None:
    write_last_success(workspace, T0)
    handle = start_scheduler(governance(workspace, T0, purge_interval="1d"), leader_retry=0.1)
    stoppers.append(handle)
    assert handle.leading.wait(20)
    job = handle._scheduler.get_job(PURGE_JOB)
    assert (job.max_instances, job.coalesce, job.misfire_grace_time) == (1, True, None)


def test_a_triggered_run_purges_with_the_injected_clock(
    workspace: Path, stoppers: list[PurgeScheduler]
) -> None:
    populate(workspace)
    write_last_success(workspace, T0 + 10 * DAY)
    gov = governance(workspace, T0 + 10 * DAY + dt.timedelta(hours=1), purge_interval="1d")
    handle = start_scheduler(gov, leader_retry=0.1)
    stoppers.append(handle)
    assert handle.leading.wait(20) and handle.runs == 0
    gov.clock = FixedClock(T0 + 30 * DAY + dt.timedelta(hours=12))  # only the first is >30d old
    handle.trigger_now()
    assert wait_for(lambda: handle.runs == 1)
    assert handle.last_report is not None and handle.last_report.total_deleted == 1
    assert len(archives(workspace)) == 2


def test_failed_run_is_logged_and_not_recorded_as_success(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    populate(workspace)
    gov = governance(workspace, T0 + 40 * DAY)
    handle = PurgeScheduler(gov)
    gov_dir = workspace / ".governed_memory"
    lock = _PurgeLock(gov_dir / "purge", workspace)
    lock.acquire()  # a CLI purge is running
    try:
        assert handle.run_once() is None
    finally:
        lock.release()
    assert "another purge is running" in str(handle.last_error)
    assert "scheduled purge" in caplog.text
    assert schedule_status(gov)["last_success"] is None
    assert handle.run_once() is not None  # next fire succeeds
    assert schedule_status(gov)["last_success"] is not None


def test_one_leader_per_workspace_and_takeover_on_stop(
    workspace: Path, stoppers: list[PurgeScheduler]
) -> None:
    write_last_success(workspace, T0)
    first = start_scheduler(governance(workspace, T0, purge_interval="1d"), leader_retry=0.1)
    stoppers.append(first)
    assert first.leading.wait(20)
    second = start_scheduler(governance(workspace, T0, purge_interval="1d"), leader_retry=0.1)
    stoppers.append(second)
    time.sleep(0.5)  # several retry periods: the second must still be waiting
    assert not second.leading.is_set() and second.next_run_time is None
    first.stop()
    assert second.leading.wait(20)


def _daemon(workspace: Path, policy: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from governed_memory._cli import main; main()",
            "--workspace",
            str(workspace),
            "--policy",
            str(policy),
            "scheduler",
            "run",
            "--leader-retry",
            "0.1",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


def _wait_line(proc: subprocess.Popen[str], needle: str, timeout: float = 30.0) -> str:
    """The daemon's stderr up to the first line containing ``needle``.

    Lines are read on a helper thread, so a daemon that stays silent fails
    the test after ``timeout`` instead of blocking it forever.
    """
    assert proc.stderr is not None
    stream = proc.stderr
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True)
    reader.start()
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen += line
        if needle in line:
            proc.stderr_rest = (reader, lines)  # type: ignore[attr-defined]  # for _rest()
            return seen
    raise AssertionError(f"{needle!r} not logged within {timeout}s; got:\n{seen}")


def _rest(proc: subprocess.Popen[str]) -> str:
    """What the daemon logged after :func:`_wait_line` returned, once it has exited."""
    reader, lines = proc.stderr_rest  # type: ignore[attr-defined]
    reader.join(10)  # the stream ends when the daemon exits
    out = ""
    while not lines.empty():
        out += lines.get_nowait()
    return out


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text('[retention]\narchives_max_age = "30d"\n[schedule]\npurge_interval = "1d"\n')
    return path


def test_scheduler_run_stops_cleanly_on_sigterm(workspace: Path, policy_file: Path) -> None:
    populate(workspace)
    proc = _daemon(workspace, policy_file)
    try:
        log = _wait_line(proc, "deleted ")  # never purged: it catches up at once, logs the run
        assert "deleted 3" in log
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        rest = _rest(proc)
        assert "received SIGTERM" in rest and "scheduler stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert archives(workspace) == []


def test_a_waiting_scheduler_takes_over_when_the_leader_is_killed(
    workspace: Path, policy_file: Path, stoppers: list[PurgeScheduler]
) -> None:
    write_last_success(workspace, dt.datetime.now())
    proc = _daemon(workspace, policy_file)
    try:
        _wait_line(proc, "scheduler leads")
        waiting = start_scheduler(governance(workspace, T0, purge_interval="1d"), leader_retry=0.1)
        stoppers.append(waiting)
        time.sleep(0.3)
        assert not waiting.leading.is_set()
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert waiting.leading.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_scheduler_run_without_a_schedule_fails_with_the_fix(workspace: Path) -> None:
    from click.testing import CliRunner

    from governed_memory._cli import main

    result = CliRunner().invoke(main, ["--workspace", str(workspace), "scheduler", "run"])
    assert result.exit_code == 1
    assert "schedule.purge_cron" in result.stderr and "schedule.purge_interval" in result.stderr


def test_scheduler_status_json(workspace: Path, policy_file: Path) -> None:
    from click.testing import CliRunner

    from governed_memory._cli import main

    write_last_success(workspace, dt.datetime(2026, 1, 1, 3, 0))
    args = ["--workspace", str(workspace), "--policy", str(policy_file), "scheduler", "status"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0
    status = json.loads(result.stdout)
    assert status["schedule"] == "every 1d" and status["timezone"] == "UTC"
    assert status["last_success"].startswith("2026-01-01T03:00:00")
    assert status["overdue"] is True and status["never_run"] is False
    assert status["leader_pid"] is None
    assert "every 1d" in CliRunner().invoke(main, args).stdout


def test_a_schedule_that_never_ran_is_reported_as_such_not_as_overdue(
    workspace: Path, policy_file: Path
) -> None:
    """A new deployment: nothing says since when the schedule is in force, so not "overdue"."""
    from click.testing import CliRunner

    from governed_memory._cli import main

    args = ["--workspace", str(workspace), "--policy", str(policy_file), "scheduler", "status"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0
    status = json.loads(result.stdout)
    assert status["last_success"] is None and status["next_due"] is not None
    assert status["never_run"] is True and status["overdue"] is False
    table = CliRunner().invoke(main, args).stdout
    assert "never_run" in table and "True" in table


def test_state_of_a_newer_format_version_is_refused_with_the_fix(workspace: Path) -> None:
    folder = workspace / ".governed_memory" / "scheduler"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({"v": 2, "last_success": None}))
    gov = governance(workspace, T0)
    with pytest.raises(FormatVersionError, match=r"version 2; this release reads version 1"):
        schedule_status(gov)
    with pytest.raises(FormatVersionError, match="remove the file"):
        PurgeScheduler(gov)._state.last_success()


def test_a_run_records_its_success_in_the_state_file(workspace: Path) -> None:
    populate(workspace)
    gov = governance(workspace, T0 + 40 * DAY)
    report = PurgeScheduler(gov).run_once()
    assert report is not None
    state = workspace / ".governed_memory" / "scheduler" / "state.json"
    data = {
        "v": 1,
        "last_success": (T0 + 40 * DAY).astimezone().isoformat(),
        "purge_id": report.purge_id,
        "deleted": 3,
    }
    assert state.read_text() == json.dumps(data) + "\n"  # the bytes every release wrote
    assert schedule_status(gov)["last_success"] == data["last_success"]


def test_status_probes_the_leader_lock_without_creating_it(workspace: Path) -> None:
    gov = governance(workspace, T0)
    assert schedule_status(gov)["leader_pid"] is None
    assert not (workspace / ".governed_memory").exists()


def test_status_names_the_pid_of_the_leader_holding_the_lock(workspace: Path) -> None:
    gov = governance(workspace, T0)
    handle = PurgeScheduler(gov)
    assert handle._try_lock()
    try:
        assert schedule_status(gov)["leader_pid"] == os.getpid()
        assert not PurgeScheduler(gov)._try_lock()  # one leader per workspace
    finally:
        handle._release_lock()
    assert schedule_status(gov)["leader_pid"] is None


def test_the_due_erasure_job_runs_every_erasure_when_one_agent_is_damaged(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One unreadable agent leaves its erasure pending (logged); the other due erasures run."""
    from governed_memory._subjects import TombstoneStore, schedule_erasure

    gov = governance(workspace, T0)
    gov.clock = FixedClock(T0, tick=dt.timedelta(seconds=1))  # alice's erasure is the first due
    for agent, subject in (("A", "alice"), ("B", "bob")):
        Conversation(
            name=agent, memory_md_path=workspace / "agents" / agent / "MEMORY.md", governance=gov
        ).add("Human", f"{subject} secret", subject_id=subject)
    schedule_erasure(gov, subject="alice", grace="1d")
    schedule_erasure(gov, subject="bob", agent="B", grace="1d")
    (workspace / "agents" / "A" / "MEMORY.md").write_bytes(b"\xff damaged")
    gov.clock = FixedClock(T0 + 2 * DAY)
    handle = PurgeScheduler(gov)
    assert handle.run_once() is not None
    assert "bob secret" not in (workspace / "agents" / "B" / "MEMORY.md").read_text()
    [pending] = TombstoneStore(gov.governance_dir).pending()
    assert pending.scope.subject == "alice"
    assert "is pending" in caplog.text and "agents/A/MEMORY.md" in caplog.text


# -- the report of data-subject requests coming due -------------------------------------


def test_a_run_reports_requests_coming_due_and_overdue_as_audit_span_and_log(
    workspace: Path, stoppers: list[PurgeScheduler], caplog: pytest.LogCaptureFixture
) -> None:
    """Real APScheduler: the leader's run audits ``request.due``, emits its span, logs the id."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from governed_memory import Settings
    from governed_memory._subjects import open_request

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    now = dt.datetime(2027, 3, 2, 9, 0)
    policy = Policy.model_validate(
        {
            "schedule": {"purge_interval": "1d"},
            "requests": {"internal_deadline": "21d", "warn_within": "5d"},
            "audit": {"enabled": True},
        }
    )
    gov = Governance(
        workspace=workspace,
        policy=policy,
        settings=Settings(audit_key="ab" * 32),
        clock=FixedClock(now),
        tracer_provider=provider,
    )
    overdue = open_request(gov, subject="C-old", kind="erasure", received="2027-01-20", actor="dpo")
    late = open_request(gov, subject="C-late", kind="access", received="2027-02-05", actor="dpo")
    soon = open_request(gov, subject="C-soon", kind="access", received="2027-02-12", actor="dpo")
    open_request(gov, subject="C-new", kind="access", received="2027-03-01", actor="dpo")
    write_last_success(workspace, now - 2 * DAY)  # a missed run: caught up at once
    with caplog.at_level(logging.WARNING, logger="governed_memory.scheduler"):
        handle = start_scheduler(gov, leader_retry=0.1)
        stoppers.append(handle)
        assert wait_for(lambda: handle.runs == 1)
        handle.stop()
    spans = [s for s in exporter.get_finished_spans() if s.name == "governed_memory request.due"]
    reported = {
        s.attributes["governed_memory.request_id"]: s.attributes["governed_memory.outcome"]
        for s in spans
        if s.attributes is not None
    }
    assert reported == {overdue.id: "overdue", late.id: "late", soon.id: "due_soon"}
    entries = [e for e in gov.audit.log.entries() if e.event == "request.due"]  # type: ignore[attr-defined]
    assert {e.attrs["request_id"] for e in entries} == set(reported)
    assert all("subject.hash" in e.attrs for e in entries)
    lines = {
        r.getMessage(): r.levelno
        for r in caplog.records
        if "data-subject request" in r.getMessage()
    }
    assert len(lines) == 3
    (error,) = [m for m in lines if overdue.id in m]
    assert lines[error] == logging.ERROR and "past it" in error and "requests show" in error
    assert any(soon.id in m and lines[m] == logging.WARNING for m in lines)
    assert not any("C-" in m for m in lines)  # ids of requests, never subjects


# -- signed audit checkpoints (evidence.checkpoint_every, docs/evidence.md) ----------------

SIGNER = LocalSigningKey(bytes(range(32)))


def checkpointing(workspace: Path, *, signing: bool = True) -> Governance:
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


def _checkpoints(workspace: Path) -> list[int]:
    folder = workspace / ".governed_memory" / "audit"
    return [e.seq for e in iter_entries(folder) if e.event == "audit.checkpoint"]


def test_leader_signs_a_checkpoint_at_once_then_every_interval(
    workspace: Path, stoppers: list[PurgeScheduler]
) -> None:
    gov = checkpointing(workspace)
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
    gov = checkpointing(workspace, signing=False)
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
    with pytest.raises(ValueError, match="checkpoint_every"):
        Policy.model_validate({"evidence": {"checkpoint_every": "1d"}})
