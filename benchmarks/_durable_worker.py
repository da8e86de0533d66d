"""One cell of bench_durable.py: N writers (threads or processes) of one target, for a while.

Run as ``python _durable_worker.py '<json>'`` by bench_durable.py, with our
environment's python, or the openai-agents environment's for ``agents``.
The JSON names the target, the mode (``threads``/``processes``), the number
of writers, the seconds to run and a fresh scratch folder. Everything is
set up (and each writer has written once) before a barrier; then every
writer writes until the deadline. Prints ``{"ops": N, "seconds": S}``: the
writes acknowledged and the time from the barrier to the last writer's end.
"""

from __future__ import annotations

import asyncio
import base64
import json
import multiprocessing
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MESSAGE = "Please move 250 EUR from my savings to the current account today, thanks. " * 5
AUDIT_KEY = "ab" * 32
MASTER_KEY = base64.b64encode(bytes(range(32))).decode()

Writer = Callable[[], None]


def _regulated(scratch: Path, writers: int) -> Callable[[int], Writer]:
    """Durable regulated add(): policies/regulated.toml (sync = "commit"), consent granted."""
    from governed_memory import Conversation, Governance, Settings, memory_md_path
    from governed_memory._policy import load_policy

    workspace = scratch / "ws"
    policy = load_policy("regulated")
    assert policy.durability.commit and policy.encryption.enabled and policy.audit.enabled
    settings = Settings(master_key=MASTER_KEY, audit_key=AUDIT_KEY)
    setup = Governance(workspace=workspace, policy=policy, settings=settings)
    for n in range(writers):
        setup.grant(f"customer-{n}", "persist", actor="dpo@bank.example")
    shared: dict[str, Any] = {}

    def make(n: int) -> Writer:
        # One Governance per process (as shared_governance gives), one
        # conversation per writer: its own agent and customer.
        gov = shared.get("gov")
        if gov is None or shared.get("pid") != os.getpid():
            gov = shared["gov"] = Governance(workspace=workspace, policy=policy, settings=settings)
            shared["pid"] = os.getpid()
        agent = f"teller-{n}"
        conversation = Conversation(
            name=agent,
            governance=gov,
            memory_md_path=memory_md_path(agent, workspace),
            subject_id=f"customer-{n}",
        )
        return lambda: conversation.add("user", MESSAGE)  # type: ignore[func-returns-value]

    return make


def _sqlite(scratch: Path, writers: int) -> Callable[[int], Writer]:
    """SQLite, WAL, synchronous=FULL: one row per message, one transaction each."""
    path = scratch / "memory.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, agent TEXT, subject TEXT, role TEXT,"
        " content TEXT, ts TEXT)"
    )
    db.commit()
    db.close()

    def make(n: int) -> Writer:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        conn.execute("PRAGMA synchronous=FULL")
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

        def write() -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO messages (agent, subject, role, content, ts) VALUES (?, ?, ?, ?, ?)",
                (f"teller-{n}", f"customer-{n}", "user", MESSAGE, time.time()),
            )
            conn.execute("COMMIT")

        return write

    return make


def _agents(scratch: Path, writers: int) -> Callable[[int], Writer]:
    """The OpenAI Agents SDK's SQLiteSession.add_items, one item per call, one session per writer."""
    from agents import SQLiteSession

    path = scratch / "sessions.db"

    def make(n: int) -> Writer:
        session = SQLiteSession(f"teller-{n}", path)
        loop = asyncio.new_event_loop()
        item = {"role": "user", "content": MESSAGE}
        return lambda: loop.run_until_complete(session.add_items([item]))  # type: ignore[list-item]

    return make


def _floor(scratch: Path, writers: int) -> Callable[[int], Writer]:
    """The disk: append the message's bytes to a file of one's own, then fdatasync."""
    data = MESSAGE.encode()

    def make(n: int) -> Writer:
        fd = os.open(scratch / f"floor-{n}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

        def write() -> None:
            os.write(fd, data)
            os.fdatasync(fd)

        return write

    return make


TARGETS = {"regulated": _regulated, "sqlite": _sqlite, "agents": _agents, "floor": _floor}


def _run(write: Writer, barrier: Any, deadline_box: Any, out: Any) -> None:
    write()  # warm: keys, files, caches
    barrier.wait()
    deadline = deadline_box.value
    ops = 0
    while time.monotonic() < deadline:
        write()
        ops += 1
    out.put((ops, time.monotonic()))


def main(spec: dict[str, Any]) -> dict[str, float]:
    scratch = Path(spec["scratch"])
    writers, seconds = int(spec["writers"]), float(spec["seconds"])
    make = TARGETS[spec["target"]](scratch, writers)
    processes = spec["mode"] == "processes"
    ctx = multiprocessing.get_context("fork")
    deadline = ctx.Value("d", 0.0)
    results: Any = ctx.Queue() if processes else __import__("queue").Queue()

    def started() -> None:  # the barrier's action: the deadline counts from the start
        deadline.value = time.monotonic() + seconds

    barrier = (ctx.Barrier if processes else threading.Barrier)(writers + 1, action=started)
    if processes:
        workers: list[Any] = [
            ctx.Process(target=lambda n=n: _run(make(n), barrier, deadline, results))
            for n in range(writers)
        ]
    else:
        workers = [
            threading.Thread(target=_run, args=(make(n), barrier, deadline, results))
            for n in range(writers)
        ]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = deadline.value - seconds
    done = [results.get(timeout=seconds + 120) for _ in workers]
    for worker in workers:
        worker.join()
    return {"ops": sum(ops for ops, _ in done), "seconds": max(end for _, end in done) - start}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
    sys.stdout.flush()
    os._exit(0)  # the governed writers' threads hold nothing that needs tearing down
