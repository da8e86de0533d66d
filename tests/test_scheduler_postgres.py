"""The scheduler on a database deployment: its state on the record place, one leader across hosts."""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from governed_memory import Conversation, FixedClock, Governance, Policy, Settings
from governed_memory._postgres import Database
from governed_memory._scheduler import PurgeScheduler, schedule_status, start_scheduler

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)


@pytest.fixture
def url(pg_schema_url: str) -> str:
    """A fresh database with the schema upgraded (what `governed-memory db upgrade` does)."""
    return pg_schema_url


@pytest.fixture
def governances() -> Iterator[list[Governance]]:
    made: list[Governance] = []
    yield made
    for gov in made:
        gov.storage.close()


def governance(made: list[Governance], url: str, workspace: Path, now: dt.datetime) -> Governance:
    policy = Policy.model_validate(
        {"retention": {"archives_max_age": "30d"}, "schedule": {"purge_interval": "1d"}}
    )
    gov = Governance(
        workspace=workspace,
        policy=policy,
        clock=FixedClock(now, tick=dt.timedelta(milliseconds=1)),
        settings=Settings(database_url=url),
    )
    made.append(gov)
    return gov


def test_a_run_keeps_its_state_in_the_database(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    writer = governance(governances, url, workspace, T0)
    conv = Conversation(
        name="c", memory_md_path=workspace / "agents" / "a" / "MEMORY.md", governance=writer
    )
    conv.add("User", "day 0")
    conv.compact("summary")
    gov = governance(governances, url, workspace, T0 + 40 * DAY)
    before = schedule_status(gov)
    assert before["last_success"] is None and before["never_run"] and not before["overdue"]
    report = PurgeScheduler(gov, tasks=()).run_once()
    assert report is not None and report.total_deleted == 1
    # Another host (another Governance, another workspace folder) reads the same state.
    other = governance(governances, url, workspace.parent / "elsewhere", T0 + 40 * DAY)
    status = schedule_status(other)
    last = dt.datetime.fromisoformat(status["last_success"])
    assert dt.timedelta(0) <= last - (T0 + 40 * DAY).astimezone() < dt.timedelta(seconds=1)
    assert status["overdue"] is False and status["never_run"] is False
    assert status["leader_pid"] is None
    assert list(workspace.iterdir()) == []  # no state.json on this host's disk


def test_leader_pid_is_the_server_pid_of_the_leading_session(
    url: str, workspace: Path, governances: list[Governance]
) -> None:
    gov = governance(governances, url, workspace, T0)
    scheduler = start_scheduler(gov, tasks=(), leader_retry=0.1)
    try:
        assert scheduler.leading.wait(20)
        pid = schedule_status(gov)["leader_pid"]
        assert isinstance(pid, int) and pid != os.getpid()
        db = Database(url)
        try:
            with db.transaction() as conn:
                row = conn.execute(
                    "SELECT application_name FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
        finally:
            db.close()
        assert row is not None and row[0] == "governed_memory"
    finally:
        scheduler.stop()
    assert schedule_status(gov)["leader_pid"] is None


DAEMON = """
import datetime as dt, logging, signal, sys, threading
from governed_memory import FixedClock, Governance, Policy, Settings
from governed_memory._scheduler import start_scheduler

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
policy = Policy.model_validate(
    {"retention": {"archives_max_age": "30d"}, "schedule": {"purge_interval": "1d"}}
)
gov = Governance(policy=policy, settings=Settings(database_url=sys.argv[1]))
scheduler = start_scheduler(gov, tasks=(), leader_retry=0.1)
threading.Event().wait()
"""


def _start(url: str, home: Path) -> subprocess.Popen[str]:
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_MEMORY_")}
    env.update(WORKSPACE_DIR=str(home / "ws"), TMPDIR=str(home))
    return subprocess.Popen(
        [sys.executable, "-c", DAEMON, url],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


class _Lines:
    """A daemon's stderr read on a thread: lines seen so far, waited for with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.lines: queue.Queue[str] = queue.Queue()
        stream = proc.stderr
        threading.Thread(target=lambda: [self.lines.put(x) for x in stream], daemon=True).start()
        self.seen = ""

    def wait(self, needle: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                self.seen += self.lines.get(timeout=left)
            except queue.Empty:
                return False
        return True


def test_two_schedulers_in_two_processes_one_leads_and_the_other_takes_over(
    url: str, tmp_path: Path, governances: list[Governance]
) -> None:
    procs = [_start(url, tmp_path / "host1"), _start(url, tmp_path / "host2")]
    try:
        logs = [_Lines(p) for p in procs]
        deadline = time.monotonic() + 30
        while not any(log.wait("scheduler leads", 0.05) for log in logs):
            assert time.monotonic() < deadline, [log.seen for log in logs]
        time.sleep(0.5)  # five retry periods: the other must still be waiting
        leaders = [i for i, log in enumerate(logs) if log.wait("scheduler leads", 0.05)]
        assert len(leaders) == 1, [log.seen for log in logs]
        leader, waiting = leaders[0], 1 - leaders[0]
        status = governance(governances, url, tmp_path / "admin", T0)
        first_pid = schedule_status(status)["leader_pid"]
        assert isinstance(first_pid, int)
        killed = time.monotonic()
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(30)
        assert logs[waiting].wait("scheduler leads", 20), logs[waiting].seen
        took = time.monotonic() - killed
        assert took < 5.0  # the server ends the session at once; a retry (0.1 s) takes over
        second_pid = schedule_status(status)["leader_pid"]
        assert isinstance(second_pid, int) and second_pid != first_pid
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()


def test_the_scheduler_status_command_reads_the_database(
    url: str, tmp_path: Path, governances: list[Governance]
) -> None:
    from click.testing import CliRunner

    from governed_memory._cli import main

    gov = governance(governances, url, tmp_path / "ws", T0 + 40 * DAY)
    PurgeScheduler(gov, tasks=()).run_once()
    policy = tmp_path / "policy.toml"
    policy.write_text('[schedule]\npurge_interval = "1d"\n')
    args = ["--workspace", str(tmp_path / "cli-ws"), "--policy", str(policy)]
    result = CliRunner().invoke(
        main, [*args, "scheduler", "status", "--json"], env={"GOVERNED_MEMORY_DATABASE_URL": url}
    )
    assert result.exit_code == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["schedule"] == "every 1d" and status["leader_pid"] is None
    assert status["last_success"] is not None  # the run recorded by the other Governance
    assert not (tmp_path / "cli-ws").exists()
