"""The PostgreSQL agent store across processes: concurrent writers, a compactor, a kill -9.

Each writer is a separate Python process (its own pool, its own keyring object) on one
database, as a host of its own would be; it prints the number of each block once its
append has returned, i.e. once the append's transaction has committed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from governed_memory import FixedClock, Keyring, LocalKeyProvider, parse_memory
from governed_memory._format import render_header
from governed_memory._postgres import Database, pg_store_factory

HEADER = render_header("A_conversation", "2026-11-30T10:00:00")

WRITER = """
import sys
import time
from pathlib import Path
from governed_memory import Keyring, LocalKeyProvider, SystemClock
from governed_memory._format import render_block, render_header
from governed_memory._postgres import Database, pg_store_factory

url, keyring_dir, name, count, compact_every = sys.argv[1:6]
ring = Keyring(Path(keyring_dir), LocalKeyProvider(bytes(range(32)))) if keyring_dir else None
stores = pg_store_factory(
    Database(url), keyring=None if ring is None else (lambda: ring), clock=SystemClock()
)
header = render_header("A_conversation", "2026-11-30T10:00:00")
store = stores.open("A", lambda: header)
if name == "compactor":  # archives while the writers write (for 10 s at most)
    archived, deadline = 0, time.monotonic() + 10
    while archived < int(count) and time.monotonic() < deadline:
        if store.compact(None) is None:
            time.sleep(0.01)  # nothing new to archive yet
        else:
            archived += 1
            print(archived, flush=True)
    sys.exit(0)
for i in range(int(count)):
    body = f"{name}-{i} begins\\n" + "x" * 300 + f"\\n{name}-{i} ends"
    store.append(render_block("Human", "2026-11-30T10:00:00", body))
    print(i, flush=True)
"""


def body(name: str, i: int) -> str:
    return f"{name}-{i} begins\n" + "x" * 300 + f"\n{name}-{i} ends"


def _start(url: str, keyring: Path | None, name: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, str(keyring or ""), name, str(count), "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _everything(db: Database, keyring: Path | None) -> list[str]:
    """The contents of every record of agent A, archives oldest first, then the memory."""
    ring = Keyring(keyring, LocalKeyProvider(bytes(range(32)))) if keyring else None
    stores = pg_store_factory(
        db, keyring=None if ring is None else (lambda: ring), clock=FixedClock()
    )
    store = stores.open("A", lambda: HEADER)
    texts = [store.read_archive(a) for a in store.list_archives()]
    texts.append(store.read_memory() or "")
    return [r.content for text in texts for r in parse_memory(text).records]


def _keyring(tmp_path: Path, encrypted: bool) -> Path | None:
    if not encrypted:
        return None
    folder = tmp_path / "keyring"
    ring = Keyring(folder, LocalKeyProvider(bytes(range(32))))
    ring.current("agent", "A")  # made once here, not raced for by the writers
    return folder


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_four_writers_and_a_compactor_lose_nothing_and_never_interleave(
    pg_db: Database, pg_url: str, tmp_path: Path, encrypted: bool
) -> None:
    keyring = _keyring(tmp_path, encrypted)
    names, per_writer = [f"w{n}" for n in range(4)], 25
    procs = [_start(pg_url, keyring, name, per_writer) for name in names]
    procs.append(_start(pg_url, keyring, "compactor", 5))
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    seen = _everything(pg_db, keyring)
    expected = [body(name, i) for name in names for i in range(per_writer)]
    assert sorted(seen) == sorted(expected)  # each block once, each one whole
    for name in names:  # and each writer's blocks in the order it wrote them
        mine = [c for c in seen if c.startswith(f"{name}-")]
        assert mine == [body(name, i) for i in range(per_writer)]
    with pg_db.transaction() as conn:
        row = conn.execute("SELECT count(*) FROM governed_memory.memory_archives").fetchone()
    assert row is not None and row[0] >= 1  # the compactor did move blocks to archives


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_a_writer_killed_mid_run_keeps_every_acknowledged_block(
    pg_db: Database, pg_url: str, tmp_path: Path, encrypted: bool
) -> None:
    keyring = _keyring(tmp_path, encrypted)
    victim = _start(pg_url, keyring, "victim", 100_000)
    other = _start(pg_url, keyring, "other", 30)
    assert victim.stdout is not None and victim.stderr is not None
    acknowledged = [int(victim.stdout.readline()) for _ in range(40)]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    # Read on through the file object: readline may hold later lines in its buffer
    # already, which communicate() (reading the pipe itself) would never see.
    with victim.stdout, victim.stderr:
        acknowledged += [int(line) for line in victim.stdout.read().split()]
    assert victim.returncode == -signal.SIGKILL
    _, err = other.communicate(timeout=60)
    assert other.returncode == 0, err
    seen = _everything(pg_db, keyring)
    mine = [c for c in seen if c.startswith("victim-")]
    # Every acknowledged block, once, in order; at most the one in flight besides.
    assert mine[: len(acknowledged)] == [body("victim", i) for i in acknowledged]
    assert len(mine) - len(acknowledged) in (0, 1)
    assert [c for c in seen if c.startswith("other-")] == [body("other", i) for i in range(30)]
