"""Array parameters sent in binary (``%b``) against their text form, on PostgreSQL.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_pg_arrays.py [--frames 500,2000] [--entries 1,14,80] [--rounds 5]

The PostgreSQL backend sends a batch as arrays: a memory's frames when it is
written whole (a compaction, a rectification, an erasure's rewrite, a
migration), the entries of an audit chaining, the tokens it removes. psycopg
writes an array's text form in Python, escaping each element; its binary form
takes one pass. This script measures what that costs, two ways in the same
run, alternating (ABAB), each measurement in a fresh interpreter:

* ``binary``: the code as it is;
* ``text``: the same code with every ``%b`` placeholder sent as ``%s`` (how
  the arrays went before), by rewriting the query text on its way to psycopg
  and to ``_postgres/_wire.py``.

Two operations, on a throw-away server (tests/pg_server.py, fsync on):

* ``rewrite``: ``rewrite_memory`` of an encrypted memory of ``--frames``
  messages (regulated policy, written by ``Conversation.add``), which deletes
  the frames and inserts them anew in one statement;
* ``chain``: ``chain_all_waiting`` of ``--entries`` audit entries waiting in
  ``audit_pending`` (the background chaining of several writers; the adds
  are made to leave their entries waiting, and the chaining is called
  directly).

``cpu`` is the process's CPU time for the operation, ``wall`` its time: the
median of five in each interpreter, then the median of the rounds. Nothing is asserted; the script prints a table and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_add import table  # the benchmarks' one table printer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
from pg_server import PgServer  # noqa: E402  (the tests' throw-away server)

MASTER_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # base64 of bytes 0..31
AUDIT_KEY = "ab" * 32
TEXT = ("lorem ipsum dolor sit amet " * 15)[:400]
WAYS = ("binary", "text")
_REPEAT = 5  # operations per interpreter: the median (the first one is cold)


def _as_text() -> None:
    """Send every ``%b`` as ``%s``: the arrays in text, as before (this process only)."""
    import psycopg

    from governed_memory._postgres import _wire

    execute = psycopg.Connection.execute

    def text_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str):
            query = query.replace("%b", "%s")
        return execute(self, query, params, **kwargs)

    numbered = _wire._numbered
    psycopg.Connection.execute = text_execute  # type: ignore[method-assign]
    _wire._numbered = lambda sql: numbered(sql.replace("%b", "%s"))  # type: ignore[assignment]


def _measure(url: str, way: str, what: str, size: int) -> dict[str, float]:
    """One measurement in this process (a child of :func:`main`)."""
    os.environ.update(
        WORKSPACE_DIR=tempfile.mkdtemp(prefix="gm-bench-arrays-"),
        GOVERNED_MEMORY_DATABASE_URL=url,
        GOVERNED_MEMORY_POLICY="regulated",
        GOVERNED_MEMORY_MASTER_KEY=MASTER_KEY,
        GOVERNED_MEMORY_AUDIT_KEY=AUDIT_KEY,
    )
    if way == "text":
        _as_text()
    from governed_memory import Conversation, Governance, memory_md_path
    from governed_memory._postgres import _audit, _memory

    if what == "chain":  # every entry left waiting, none chained behind the bench's back
        _audit.PgAuditStorage.join = lambda self, *a, **k: None  # type: ignore[method-assign]
        _audit.PgAuditStorage.chain_soon = lambda self: None  # type: ignore[method-assign]
    gov = Governance()
    gov.grant("c0", "persist", actor="bench")
    conv = Conversation(
        name="a0", governance=gov, memory_md_path=memory_md_path("a0"), subject_id="c0"
    )
    import gc

    took: list[tuple[float, float]] = []
    if what == "rewrite":
        for i in range(size):
            conv.add("user" if i % 2 == 0 else "assistant", TEXT)
        stores = [o for o in gc.get_objects() if isinstance(o, _memory.PgAgentStore)]
        store = max(stores, key=lambda o: len(o.read_memory() or ""))
        body = store.read_memory()
        assert body is not None
        for _ in range(_REPEAT):
            cpu, wall = time.process_time(), time.perf_counter()
            store.rewrite_memory(body)
            took.append((time.process_time() - cpu, time.perf_counter() - wall))
        assert store.read_memory() == body
    else:
        for _ in range(3):  # (the first add of a process may chain its entry itself)
            conv.add("user", TEXT)
        logs = [o for o in gc.get_objects() if isinstance(o, _audit.PgAuditStorage)]
        log = next(o for o in logs if o._any_waiting())
        log.chain_all_waiting()
        for _ in range(_REPEAT):
            for _ in range(size):
                conv.add("user", TEXT)
            cpu, wall = time.process_time(), time.perf_counter()
            chained = log.chain_all_waiting()
            took.append((time.process_time() - cpu, time.perf_counter() - wall))
            assert chained == size, chained
    return {
        "cpu": statistics.median(t[0] for t in took) * 1e3,
        "wall": statistics.median(t[1] for t in took) * 1e3,
    }


def _child(url: str, way: str, what: str, size: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", url, way, what, str(size)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{what} {size} ({way}) failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", default="500,2000", help="messages per rewritten memory")
    parser.add_argument("--entries", default="1,14,80", help="waiting entries per chaining")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, way, what, size = args.child
        print(json.dumps(_measure(url, way, what, int(size))))
        return
    from governed_memory._postgres import Database, upgrade_schema

    cells = [("rewrite", int(n)) for n in args.frames.split(",")]
    cells += [("chain", int(n)) for n in args.entries.split(",")]
    server = PgServer()
    with open(server.data / "postgresql.conf", "a", encoding="utf-8") as conf:
        conf.write("fsync = on\nfull_page_writes = on\nsynchronous_commit = on\n")
    server.restart()
    try:
        rows = []
        for what, size in cells:
            got: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
            for _ in range(args.rounds):
                for way in WAYS:  # alternating, each in a fresh database and interpreter
                    url = server.url(server.create_database())
                    db = Database(url, min_size=0)
                    upgrade_schema(db)
                    db.close()
                    got[way].append(_child(url, way, what, size))
            med = {
                (way, k): statistics.median(r[k] for r in got[way])
                for way in WAYS
                for k in ("cpu", "wall")
            }
            label = f"{what} {size} {'frames' if what == 'rewrite' else 'entries'}"
            rows.append(
                [
                    label,
                    f"{med['text', 'cpu']:.1f} / {med['text', 'wall']:.1f}",
                    f"{med['binary', 'cpu']:.1f} / {med['binary', 'wall']:.1f}",
                    f"{med['text', 'cpu'] / med['binary', 'cpu']:.2f}x",
                    f"{med['text', 'wall'] / med['binary', 'wall']:.2f}x",
                ]
            )
        print(
            table(
                ["operation", "text: cpu / wall ms", "binary: cpu / wall ms", "cpu", "wall"],
                rows,
            )
        )
        print(f"medians of {args.rounds} rounds; ratios: text over binary (above 1: binary faster)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
