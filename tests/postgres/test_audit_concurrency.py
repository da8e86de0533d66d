"""PgAuditStorage across hosts: concurrent appenders make one gap-free chain; kill -9 loses nothing acknowledged.

Each "host" is a separate Python process with its own connection pool, started
with the interpreter running the tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from governed_memory._audit import AuditKey, verify_storage
from governed_memory._postgres import Database, PgAuditStorage

KEY = AuditKey(bytes(range(32)))

_HOST = """
import sys, threading
from governed_memory._audit import AuditKey
from governed_memory._postgres import Database, PgAuditStorage

url, host, per_thread = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = Database(url, max_size=2)
log = PgAuditStorage(db, AuditKey(bytes(range(32))))
print("ready", flush=True)

def run(thread):
    n = 0
    while per_thread < 0 or n < per_thread:
        log.append("persist", {"host": host, "thread": thread, "n": n})
        n += 1

threads = [threading.Thread(target=run, args=(t,)) for t in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
db.close()
"""


def _host(url: str, name: str, per_thread: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _HOST, url, name, str(per_thread)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_three_hosts_of_two_threads_make_one_gap_free_chain(pg_url: str, pg_db: Database) -> None:
    per_thread = 25
    hosts = [_host(pg_url, f"h{i}", per_thread) for i in range(3)]
    for host in hosts:
        out, _ = host.communicate(timeout=60)
        assert (host.returncode, out.strip()) == (0, "ready")
    log = PgAuditStorage(pg_db, KEY)
    entries = list(log.entries())
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    written = [e for e in entries if e.event == "persist"]
    assert len(written) == 3 * 2 * per_thread
    assert {(e.attrs["host"], e.attrs["thread"], e.attrs["n"]) for e in written} == {
        (f"h{h}", t, n) for h in range(3) for t in range(2) for n in range(per_thread)
    }
    report = verify_storage(log, KEY)
    assert report.ok, report.findings


def test_a_host_killed_mid_append_leaves_a_verifiable_chain(pg_url: str, pg_db: Database) -> None:
    log = PgAuditStorage(pg_db, KEY)
    host = _host(pg_url, "victim", -1)  # appends until killed
    assert host.stdout is not None and host.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 30
    while (head := log.head()) is None or head.seq < 40:
        assert time.monotonic() < deadline, "the host appended nothing"
        time.sleep(0.02)
    os.kill(host.pid, signal.SIGKILL)
    host.communicate(timeout=10)
    assert host.returncode == -signal.SIGKILL
    # The killed host's open transaction rolled back and its advisory lock went with it:
    # the next append gets the lock and continues the chain.
    after = log.append("persist", {"host": "survivor"})
    entries = list(log.entries())
    assert [e.seq for e in entries] == list(range(1, after.seq + 1))
    assert entries[-1].hash == after.hash
    report = verify_storage(log, KEY)
    assert report.ok, report.findings
    assert not [e for e in entries if e.event == "audit.discontinuity"]


@pytest.mark.parametrize("threads", [4])
def test_threads_of_one_storage_share_the_chain(pg_db: Database, threads: int) -> None:
    import threading

    log = PgAuditStorage(pg_db, KEY)
    workers = [
        threading.Thread(target=lambda: [log.append("persist", {}) for _ in range(10)])
        for _ in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert [e.seq for e in log.entries()] == list(range(1, 10 * threads + 2))  # + the anchor
    assert verify_storage(log, KEY).ok
