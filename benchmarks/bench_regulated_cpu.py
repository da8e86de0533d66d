"""CPU per regulated Conversation.add(), next to an SQLite insert doing the same work.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_regulated_cpu.py [--adds 2000] [--rounds 7] [--dir /dev/shm]

Both sides run in this process on tmpfs (``--dir``, default ``/dev/shm``), so
an fsync costs next to nothing and what is left is CPU: the time measured is
``time.process_time()`` (user + system of this process) per message, so
other load on the machine inflates it less than wall time. Rounds alternate
(ours, SQLite, ours, ...), each on a fresh folder; medians and the spread
(min-max) are printed.

* ``regulated add()``: a Governance under ``policies/regulated.toml``
  (consent required and granted, subject isolation, AES-256-GCM at rest,
  hash-chained audit log, each entry fdatasynced), a Conversation of one
  subject with ``time_enabled=True``, 400-byte ASCII messages: per add, the
  consent gate, one encrypted frame in the subject's memory, one audit entry.
* ``regulated add(), 2 subjects``: the same, alternating two subjects through
  one Conversation (``add(subject_id=...)``): the store and keyed hash of
  each subject are looked up per add.
* ``SQLite FULL``: the yardstick: a WAL database with ``synchronous=FULL``,
  one row per message (agent, subject, role, timestamp, content) inserted
  in a transaction of its own.

The summary line checks the issue's target: CPU per regulated add() at most
3x SQLite FULL's. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from governed_memory import Conversation, Governance, Settings, load_policy, memory_md_path

MESSAGE = ("x" * 399) + "."
MASTER_KEY = base64.b64encode(bytes(range(32))).decode("ascii")
AUDIT_KEY = "ab" * 32
SUBJECTS = ("alice", "bob")


def regulated_round(folder: Path, adds: int, subjects: int) -> float:
    """CPU seconds per regulated add on a fresh workspace in ``folder``."""
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        workspace = Path(tmp)
        settings = Settings(master_key=MASTER_KEY, audit_key=AUDIT_KEY)
        governance = Governance(
            workspace=workspace, policy=load_policy("regulated"), settings=settings
        )
        who = SUBJECTS[:subjects]
        for subject in who:
            governance.grant(subject, "persist", actor="bench")
        conv = Conversation(
            name="bench",
            time_enabled=True,
            memory_md_path=memory_md_path("Bench", workspace),
            governance=governance,
            subject_id=who[0],
        )
        for i in range(20):  # warm up: descriptors, keys, the first segment
            conv.add("User", MESSAGE, subject_id=who[i % subjects])
        start = time.process_time()
        for i in range(adds):
            conv.add("User", MESSAGE, subject_id=who[i % subjects])
        return (time.process_time() - start) / adds


def sqlite_round(folder: Path, adds: int) -> float:
    """CPU seconds per one-row transaction in a WAL database, synchronous=FULL."""
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        db = sqlite3.connect(Path(tmp) / "memory.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, agent TEXT, subject TEXT, "
            "role TEXT, ts TEXT, content TEXT)"
        )
        sql = "INSERT INTO messages (agent, subject, role, ts, content) VALUES (?, ?, ?, ?, ?)"

        def insert() -> None:
            ts = dt.datetime.now().isoformat()
            db.execute("BEGIN")
            db.execute(sql, ("Bench", "alice", "User", ts, MESSAGE))
            db.execute("COMMIT")

        for _ in range(20):
            insert()
        start = time.process_time()
        for _ in range(adds):
            insert()
        elapsed = time.process_time() - start
        db.close()
        return elapsed / adds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adds", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    args = parser.parse_args()

    cases: dict[str, Callable[[], float]] = {
        "regulated add()": lambda: regulated_round(args.dir, args.adds, 1),
        "regulated add(), 2 subjects": lambda: regulated_round(args.dir, args.adds, 2),
        "SQLite FULL": lambda: sqlite_round(args.dir, args.adds),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):  # alternating: every case sees the same conditions
        for name, run in cases.items():
            times[name].append(run())

    base = statistics.median(times["SQLite FULL"])
    print(
        f"CPU per message on {args.dir} ({args.adds} adds x {args.rounds} rounds, "
        "alternating; median, min-max)"
    )
    print(f"{'case':<28} {'us/add':>8} {'min-max':>15} {'vs SQLite FULL':>15}")
    for name, values in times.items():
        med = statistics.median(values)
        spread = f"{min(values) * 1e6:.1f}-{max(values) * 1e6:.1f}"
        print(f"{name:<28} {med * 1e6:>8.1f} {spread:>15} {med / base:>14.2f}x")
    ratio = statistics.median(times["regulated add()"]) / base
    verdict = "met" if ratio <= 3 else f"missed by {ratio / 3:.2f}x"
    print()
    print(f"target: CPU per regulated add() <= 3x SQLite FULL's: {ratio:.2f}x ({verdict})")
    print(f"(at {dt.datetime.now().isoformat(timespec='seconds')})")


if __name__ == "__main__":
    main()
