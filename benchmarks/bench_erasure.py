"""Erasure of one data subject across many agents: time, and bytes rewritten per byte erased.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_erasure.py                     # 1,000 agents x 10 archives
    python benchmarks/bench_erasure.py --agents 200 --archives 5 --rounds 1

Workspace: ``--agents`` agent folders, each with ``--archives`` archives and
a MEMORY.md. Every file holds ``--records`` records of ~300 bytes from 20
subjects plus one compaction summary whose lineage names the subjects of the
file before it. The workspace is written directly in the on-disk format
(building it through Conversation would take far longer than the erasure).

Scenarios (each on a fresh copy of the workspace, ``--rounds`` times,
median reported):

* ``everywhere``: the subject has records in every file of every agent
  (the worst case: every file is rewritten).
* ``10% of agents``: the subject talked to one agent in ten (most files are
  only read).
* ``export``: the subject access export of the ``everywhere`` subject.

Columns: wall time; files rewritten; bytes of the subject's records and the
summaries derived from them (what had to go); bytes rewritten (the size of
the files written back); their ratio (write amplification: the price of
rewriting whole files atomically instead of editing in place). The page
cache is warm (the workspace was just written); each rewrite is fsynced.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from governed_memory import erase, export_subject
from governed_memory._base._fsutil import ensure_private_dir
from governed_memory._format._records import render_block, render_header

SUBJECTS = [f"cust-{i:04d}" for i in range(20)]
TARGET = "cust-target"


def _text(n: int, subject: str) -> str:
    base = f"message {n} from {subject}: " + "lorem ipsum dolor sit amet " * 10
    return base[:300]


def build(root: Path, agents: int, archives: int, records: int, share: float) -> None:
    """Write the workspace; the target subject is in every file of ``share`` of the agents."""
    n = 0
    every = max(1, round(1 / share)) if share > 0 else 0
    for a in range(agents):
        folder = root / "agents" / f"agent-{a:04d}"
        ensure_private_dir(folder / "archive")
        has_target = every and a % every == 0
        lineage: list[str] = []
        for f in range(archives + 1):
            stamp = f"2026-11-{1 + f % 28:02d}T10:00:00"
            parts = [render_header(f"agent-{a:04d}_conv", stamp)]
            if f:
                parts.append(
                    render_block(
                        "System",
                        stamp,
                        f"[Compressed Memory Summary] summary {f} of agent {a}",
                        {"lineage": sorted(set(lineage))},
                    )
                )
            lineage = []
            for r in range(records):
                subject = TARGET if has_target and r % 10 == 0 else SUBJECTS[(a + r) % 20]
                lineage.append(subject)
                n += 1
                parts.append(render_block("Human", stamp, _text(n, subject), {"subject": subject}))
            body = "".join(parts)
            if f < archives:
                path = folder / "archive" / f"history_2026-11-{1 + f % 28:02d}_10-00-{f:02d}.md"
            else:
                path = folder / "MEMORY.md"
            path.write_text(body, encoding="utf-8")
            path.chmod(0o600)


def run_erasure(template: Path, scratch: Path) -> dict[str, float]:
    shutil.copytree(template, scratch)
    start = time.perf_counter()
    receipt = erase(scratch, subject=TARGET, reason="benchmark")
    elapsed = time.perf_counter() - start
    data = receipt.to_dict()["totals"]
    shutil.rmtree(scratch)
    return {
        "seconds": elapsed,
        "files": data["files"],
        "removed": data["bytes_removed"],
        "written": data["bytes_written"],
        "records": data["records"],
        "summaries": data["summaries"],
    }


def run_export(template: Path, scratch: Path) -> dict[str, float]:
    start = time.perf_counter()
    result = export_subject(template, TARGET, scratch)
    elapsed = time.perf_counter() - start
    size = sum(p.stat().st_size for p in scratch.iterdir())
    shutil.rmtree(scratch)
    return {"seconds": elapsed, "records": result.records, "written": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--archives", type=int, default=10)
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gm-bench-erasure-"))
    results: dict[str, dict[str, float]] = {}
    try:
        for label, share in (("everywhere", 1.0), ("10% of agents", 0.1)):
            template = work / f"ws-{share}"
            build(template, args.agents, args.archives, args.records, share)
            size = sum(p.stat().st_size for p in template.rglob("*") if p.is_file())
            rounds = [run_erasure(template, work / "scratch") for _ in range(args.rounds)]
            row = dict(rounds[0])
            row["seconds"] = statistics.median(r["seconds"] for r in rounds)
            row["workspace"] = size
            results[label] = row
            if share == 1.0:
                exports = [run_export(template, work / "export") for _ in range(args.rounds)]
                erow = dict(exports[0])
                erow["seconds"] = statistics.median(r["seconds"] for r in exports)
                erow["workspace"] = size
                results["export"] = erow
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps(results, indent=2))
        return
    files = args.agents * (args.archives + 1)
    print(
        f"erasure of one subject: {args.agents} agents x ({args.archives} archives + MEMORY.md) "
        f"= {files} files, {args.records} records each; median of {args.rounds}"
    )
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}\n")
    header = (
        f"{'scenario':<15} {'workspace MB':>12} {'time s':>8} {'files/s':>9} {'files rewritten':>16} "
        f"{'records':>8} {'summaries':>10} {'subject bytes':>14} {'bytes rewritten':>16} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for label, r in results.items():
        if label == "export":
            continue
        ratio = r["written"] / r["removed"] if r["removed"] else float("nan")
        print(
            f"{label:<15} {r['workspace'] / 1e6:>12.1f} {r['seconds']:>8.2f} {files / r['seconds']:>9.0f} "
            f"{r['files']:>16.0f} {r['records']:>8.0f} {r['summaries']:>10.0f} "
            f"{r['removed']:>14,.0f} {r['written']:>16,.0f} {ratio:>7.1f}"
        )
    e = results["export"]
    print(
        f"\nexport of the same subject (everywhere): {e['seconds']:.2f} s, "
        f"{e['records']:.0f} records, {e['written'] / 1e6:.1f} MB written"
    )


if __name__ == "__main__":
    sys.exit(main())
