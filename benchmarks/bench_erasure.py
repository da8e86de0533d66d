"""Erasure and export of one data subject across many agents, next to SQLite and to the I/O floor.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_erasure.py                          # 100, 300 and 1,000 agents
    python benchmarks/bench_erasure.py --agents 100 --rounds 3  # a quick look
    python benchmarks/bench_erasure.py --json

Workspace (written directly in the on-disk format: building it through
Conversation would take far longer than the erasure): ``--agents`` agents,
each serving ``--subjects`` data subjects (the target among them), each
subject with ``--files`` files (archives and an active memory) of
``--records`` records of ~300 bytes; every file after the first starts with
a compaction summary. Two layouts of the same records:

* ``subject`` (``[memory] isolation = "subject"``): each subject's records in
  their own memory, ``agents/<a>/subjects/<p>/``, the summaries' lineage the
  subject alone; the agent's own MEMORY.md holds two records naming no
  subject. Each agent's ``subjects/`` has the lineage index the library
  leaves after its first walk of the agent (no memory holds another
  subject's data).
* ``agent`` (the default isolation): the same records, every subject's
  mixed in the agent's MEMORY.md and archives, the summaries' lineage every
  subject of the file before.

Methods, each timed on a fresh hard-linked copy of the workspace (an
erasure replaces files by rename and unlinks, never writes one in place;
the script checks the template is intact at the end), in rotating order
within each round, median and spread (min-max) over ``--rounds``:

* ``library``: ``erase(workspace, subject=...)`` / ``export_subject(...)``.
* ``sqlite``: one table of the same records (the same bytes, a subject
  column with an index, a lineage table for summaries), WAL,
  ``synchronous=FULL``: ``DELETE`` of the subject's rows plus replacing the
  summaries derived from them by a marker, one transaction / ``SELECT`` of
  the same rows.
* ``floor``: the minimal file work with no parsing: the files the erasure
  changes rewritten (new bytes precomputed, each written to a temporary
  file, fsynced and renamed, one fsync per folder at the end) or, for the
  subject's own memory, unlinked with its folders (one fsync per parent);
  for export, reading the files that hold the subject's data (under the
  agent layout: every file, as nothing says where they are) and writing the
  export's bytes in four fsynced files.

The page cache is warm (the workspace was just written). Summary lines
check the issue's targets: erasure of a subject in 1,000 agents (subject
isolation) at most 3x the SQLite DELETE; export at most 1.5x its floor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from governed_memory import erase, export_subject
from governed_memory._format._records import render_block, render_header
from governed_memory._stores import plain_partition_name

TARGET = "cust-target"
LINEAGE_INDEX = ".gm-lineage.json"
MARKER = "[Summary removed for erasure: earlier context is missing]"


def _subjects(count: int) -> list[str]:
    return [TARGET] + [f"cust-{i:04d}" for i in range(count - 1)]


def _text(n: int, subject: str) -> str:
    return (f"message {n} from {subject}: " + "lorem ipsum dolor sit amet " * 12)[:300]


def _stamp(f: int) -> str:
    return f"2026-11-{1 + f % 28:02d}T10:00:00"


def _file_name(f: int, files: int) -> str | None:
    return None if f == files - 1 else f"history_2026-11-{1 + f % 28:02d}_10-00-{f:02d}.md"


Row = tuple[str, str, str | None, str, list[str]]
"""(agent, file, subject or None, raw block, lineage) of one record."""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)


def build(
    root: Path, layout: str, agents: int, subjects: int, files: int, records: int
) -> list[Row]:
    """Write the workspace in ``layout``; return every record as a row (for SQLite)."""
    rows: list[Row] = []
    names = _subjects(subjects)
    n = 0
    for a in range(agents):
        agent = f"agent-{a:04d}"
        folder = root / "agents" / agent
        header = render_header(f"{agent}_conv", _stamp(0))
        per_file: list[dict[str, list[tuple[str | None, str, list[str]]]]] = []
        for f in range(files):
            blocks: dict[str, list[tuple[str | None, str, list[str]]]] = {}
            for s in names:
                mine = blocks.setdefault(s, [])
                if f:
                    lineage = [s] if layout == "subject" else sorted(names)
                    text = f"[Compressed Memory Summary] summary {f} of {s} in {agent}"
                    meta = (
                        {"subject": s, "lineage": lineage}
                        if layout == "subject"
                        else {"lineage": lineage}
                    )
                    mine.append(
                        (
                            None if layout == "agent" else s,
                            render_block("System", _stamp(f), text, meta),
                            lineage,
                        )
                    )
                for _ in range(records):
                    n += 1
                    block = render_block("Human", _stamp(f), _text(n, s), {"subject": s})
                    mine.append((s, block, []))
            per_file.append(blocks)
        if layout == "subject":
            shared = "".join(
                render_block("Human", _stamp(0), f"note {i} of {agent}") for i in range(2)
            )
            _write(folder / "MEMORY.md", header + shared)
            for s in names:
                sub = folder / "subjects" / plain_partition_name(s)
                for f, blocks in enumerate(per_file):
                    name = _file_name(f, files)
                    path = sub / "MEMORY.md" if name is None else sub / "archive" / name
                    _write(path, header + "".join(b for _, b, _ in blocks[s]))
                    rows += [
                        (agent, str(path.relative_to(root)), subj, b, lin)
                        for subj, b, lin in blocks[s]
                    ]
            index = {"format": "governed-memory-lineage-index", "version": 1, "mixed": []}
            _write(folder / "subjects" / LINEAGE_INDEX, json.dumps(index))
        else:
            for f, blocks in enumerate(per_file):
                name = _file_name(f, files)
                path = folder / "MEMORY.md" if name is None else folder / "archive" / name
                summaries = [x for s in names for x in blocks[s] if x[2]]
                plain = [x for s in names for x in blocks[s] if not x[2]]
                ordered = summaries + plain
                _write(path, header + "".join(b for _, b, _ in ordered))
                rows += [
                    (agent, str(path.relative_to(root)), subj, b, lin) for subj, b, lin in ordered
                ]
    return rows


# -- SQLite ---------------------------------------------------------------


def build_sqlite(path: Path, rows: list[Row]) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(
        "CREATE TABLE records (id INTEGER PRIMARY KEY, agent TEXT, file TEXT, subject TEXT, "
        "body TEXT);"
        "CREATE INDEX records_subject ON records(subject);"
        "CREATE TABLE lineage (record INTEGER, subject TEXT);"
        "CREATE INDEX lineage_subject ON lineage(subject);"
    )
    with db:
        for i, (agent, file, subject, body, lineage) in enumerate(rows):
            is_summary = bool(lineage)
            db.execute(
                "INSERT INTO records VALUES (?, ?, ?, ?, ?)",
                (i, agent, file, None if is_summary else subject, body),
            )
            db.executemany("INSERT INTO lineage VALUES (?, ?)", [(i, s) for s in lineage])
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _sqlite(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


def sqlite_delete(path: Path) -> float:
    db = _sqlite(path)
    start = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    db.execute("DELETE FROM records WHERE subject = ?", (TARGET,))
    db.execute(
        "UPDATE records SET body = ? WHERE id IN (SELECT record FROM lineage WHERE subject = ?)",
        (MARKER, TARGET),
    )
    db.execute("DELETE FROM lineage WHERE subject = ?", (TARGET,))
    db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed


def sqlite_select(path: Path) -> float:
    db = _sqlite(path)
    start = time.perf_counter()
    found = db.execute(
        "SELECT agent, file, body FROM records WHERE subject = ?", (TARGET,)
    ).fetchall()
    found += db.execute(
        "SELECT agent, file, body FROM records WHERE id IN "
        "(SELECT record FROM lineage WHERE subject = ?)",
        (TARGET,),
    ).fetchall()
    elapsed = time.perf_counter() - start
    db.close()
    assert found
    return elapsed


# -- the floor --------------------------------------------------------------


class Plan:
    """What the minimal erasure and export touch, worked out before timing."""

    def __init__(self, root: Path, layout: str) -> None:
        self.rewrites: list[tuple[str, bytes]] = []  # (relative path, new bytes)
        self.deletes: list[str] = []  # relative subject folders
        self.reads: list[str] = []  # files an export must read
        needle = json.dumps(TARGET)
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix == ".md"):
            rel = str(path.relative_to(root))
            if layout == "agent":
                self.reads.append(rel)
            text = path.read_text(encoding="utf-8")
            if needle not in text:
                if layout == "subject" and "/subjects/" not in rel:
                    self.reads.append(rel)  # the agent's own memory: read, names no subject
                continue
            if layout == "subject":
                self.reads.append(rel)
                folder = str(Path(rel).parents[0 if path.name == "MEMORY.md" else 1])
                if folder not in self.deletes:
                    self.deletes.append(folder)
                continue
            kept = [b for b in text.split("### ") if needle not in b]
            self.rewrites.append((rel, "### ".join(kept).encode("utf-8")))


def floor_erase(root: Path, plan: Plan) -> float:
    start = time.perf_counter()
    dirs: set[str] = set()
    for rel, data in plan.rewrites:
        path = root / rel
        path.read_bytes()
        tmp = path.parent / f".gm-tmp-floor-{path.name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, path)
        dirs.add(str(path.parent))
    for rel in plan.deletes:
        folder = root / rel
        for file in folder.rglob("*"):
            if file.is_file():
                file.read_bytes()  # counted for the receipt
        shutil.rmtree(folder)
        dirs.add(str(folder.parent))
    for d in sorted(dirs):
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)
    return time.perf_counter() - start


def floor_export(root: Path, plan: Plan, out: Path, sizes: list[int]) -> float:
    start = time.perf_counter()
    for rel in plan.reads:
        (root / rel).read_bytes()
    out.mkdir()
    for i, size in enumerate(sizes):
        fd = os.open(out / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"x" * size)
        os.fsync(fd)
        os.close(fd)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
    elapsed = time.perf_counter() - start
    shutil.rmtree(out)
    return elapsed


# -- the library --------------------------------------------------------------


def library_erase(root: Path) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    receipt = erase(root, subject=TARGET, reason="benchmark")
    elapsed = time.perf_counter() - start
    return elapsed, receipt.to_dict()["totals"]


def library_export(root: Path, out: Path) -> tuple[float, list[int]]:
    start = time.perf_counter()
    export_subject(root, TARGET, out)
    elapsed = time.perf_counter() - start
    sizes = [p.stat().st_size for p in sorted(out.iterdir())]
    shutil.rmtree(out)
    return elapsed, sizes


def _link_copy(template: Path, scratch: Path) -> None:
    shutil.copytree(template, scratch, copy_function=os.link)


def _fingerprint(root: Path, pattern: str = "*.md") -> tuple[int, int]:
    files = [p for p in root.rglob(pattern) if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def measure(args: argparse.Namespace, work: Path, layout: str, agents: int) -> dict[str, Any]:
    template = work / f"ws-{layout}-{agents}"
    rows = build(template, layout, agents, args.subjects, args.files, args.records)
    db_template = work / f"db-{layout}-{agents}.sqlite"
    build_sqlite(db_template, rows)
    plan = Plan(template, layout)
    before = _fingerprint(template)
    workspace_bytes = _fingerprint(template, "*")[1]
    subject_bytes = sum(len(b.encode()) for _, _, s, b, lin in rows if s == TARGET or TARGET in lin)
    scratch = work / "scratch"
    times: dict[str, list[float]] = {k: [] for k in ("erase", "sqlite-delete", "floor-erase")}
    times |= {k: [] for k in ("export", "sqlite-select", "floor-export")}
    totals: dict[str, Any] = {}
    sizes: list[int] = []

    def run_erase() -> None:
        _link_copy(template, scratch)
        seconds, found = library_erase(scratch)
        totals.update(found)
        times["erase"].append(seconds)
        shutil.rmtree(scratch)

    def run_sqlite() -> None:
        db = work / "scratch.sqlite"
        shutil.copyfile(db_template, db)
        times["sqlite-delete"].append(sqlite_delete(db))
        times["sqlite-select"].append(sqlite_select(db_template))
        db.unlink()
        for extra in (work / "scratch.sqlite-wal", work / "scratch.sqlite-shm"):
            extra.unlink(missing_ok=True)

    def run_floor() -> None:
        _link_copy(template, scratch)
        times["floor-erase"].append(floor_erase(scratch, plan))
        shutil.rmtree(scratch)
        times["floor-export"].append(floor_export(template, plan, work / "floor-out", sizes))

    def run_export() -> None:
        seconds, found = library_export(template, work / "export-out")
        sizes[:] = found
        times["export"].append(seconds)

    steps: list[Callable[[], None]] = [run_erase, run_sqlite, run_export, run_floor]
    run_export()  # the floor's export writes what the library's does: learn the sizes
    times["export"].clear()
    for r in range(args.rounds):
        for step in steps[r % len(steps) :] + steps[: r % len(steps)]:
            step()
    # The data files must be intact (an export adds its receipt to the governance folder).
    assert _fingerprint(template, "*.md") == before, "a run changed the template's files"
    shutil.rmtree(template)
    db_template.unlink()
    return {
        "layout": layout,
        "agents": agents,
        "files": before[0],
        "workspace_bytes": workspace_bytes,
        "subject_bytes": subject_bytes,
        "totals": totals,
        "times": times,
    }


def _cell(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med * 1e3:9.1f} ({min(values) * 1e3:.0f}-{max(values) * 1e3:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default="100,300,1000", help="comma-separated agent counts")
    parser.add_argument("--subjects", type=int, default=9, help="data subjects per agent")
    parser.add_argument("--files", type=int, default=3, help="files per memory (archives + 1)")
    parser.add_argument("--records", type=int, default=8, help="records per subject per file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layouts", default="subject,agent")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gm-bench-erasure-", dir=os.environ.get("TMPDIR")))
    results = []
    try:
        for layout in args.layouts.split(","):
            for agents in (int(a) for a in args.agents.split(",")):
                results.append(measure(args, work, layout, agents))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"erasure and export of one subject: {args.subjects} subjects per agent, "
        f"{args.files} files per memory, {args.records} records per subject and file; "
        f"median (min-max) of {args.rounds} rounds, ms"
    )
    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.system()}\n"
    )
    header = (
        f"{'layout':<8}{'agents':>7}{'MB':>6}{'subj MB':>8}{'rewritten MB':>13} | "
        f"{'erase':>18}{'sqlite DELETE':>18}{'floor':>18}{'x sqlite':>9}{'x floor':>8} | "
        f"{'export':>18}{'sqlite SELECT':>18}{'floor':>18}{'x floor':>8}"
    )
    print(header)
    print("-" * len(header))
    summary = {}
    for r in results:
        t = r["times"]
        med = {k: statistics.median(v) for k, v in t.items()}
        x_sql = med["erase"] / med["sqlite-delete"]
        x_floor = med["erase"] / med["floor-erase"]
        x_export = med["export"] / med["floor-export"]
        summary[(r["layout"], r["agents"])] = (x_sql, x_floor, x_export)
        print(
            f"{r['layout']:<8}{r['agents']:>7}{r['workspace_bytes'] / 1e6:>6.1f}"
            f"{r['subject_bytes'] / 1e6:>8.2f}{r['totals'].get('bytes_written', 0) / 1e6:>13.2f} | "
            f"{_cell(t['erase'])}{_cell(t['sqlite-delete'])}{_cell(t['floor-erase'])}"
            f"{x_sql:>9.1f}{x_floor:>8.2f} | "
            f"{_cell(t['export'])}{_cell(t['sqlite-select'])}{_cell(t['floor-export'])}{x_export:>8.2f}"
        )
    print()
    biggest = max(int(a) for a in args.agents.split(","))
    if ("subject", biggest) in summary:
        x_sql, _, x_export = summary[("subject", biggest)]
        verdict = "met" if x_sql <= 3 else f"MISSED by {x_sql / 3:.1f}x"
        print(
            f"target: erasure in {biggest} agents (subject isolation) <= 3x SQLite DELETE: "
            f"{x_sql:.1f}x, {verdict}"
        )
    for (layout, agents), (_, _, x_export) in summary.items():
        if agents == biggest:
            verdict = "met" if x_export <= 1.5 else f"MISSED by {x_export / 1.5:.2f}x"
            print(
                f"target: export in {agents} agents ({layout} isolation) <= 1.5x its floor: "
                f"{x_export:.2f}x, {verdict}"
            )


if __name__ == "__main__":
    sys.exit(main())
