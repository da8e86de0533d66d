"""A retention purge over a large workspace, against ``find -delete`` as the yardstick.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_purge.py [--agents 10000] [--archives 10] [--small-agents 2000]

For each scale, two identical trees are generated in a temporary folder:
``--agents`` agent folders, each with a MEMORY.md and ``--archives`` small
archives named in 2020 (so a 30-day rule expires all of them). Then, in the
same run:

* ``find <tree> -name 'history_*' -delete`` over the first tree (the yardstick:
  no plan, no journal, no locks, no checks);
* ``governed-memory``'s purge (``Retention.purge``: scan, plan, journal with
  fsync, per-agent store lock, identity re-check before each unlink, folder
  fsync, receipt) over the second tree, in a child process so its peak RSS
  (``resource.getrusage``) is its own; a child that only imports the library
  and builds the Governance gives the baseline RSS;
* before the purge, a dry run (scan + plan, nothing deleted) over the second
  tree, for the cost of planning alone (it also warms the page cache for
  the purge, as a real admin's dry run before a purge would).

Target: the purge within 2x of ``find``, with peak memory that does not grow
with the number of archives (compare the two scales). Nothing touches the
network.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARCHIVE_BODY = (
    b"# Agent Memory\n\n**Conversation:** bench\n**Created:** 2020-01-01T00:00:00\n\n---\n\n"
    b"## Interaction Log\n\n### User \xe2\x80\x94 2020-01-01T00:00:00\n\nhello\n\n---\n\n"
)
POLICY = '[retention]\narchives_max_age = "30d"\n'


def generate(root: Path, agents: int, archives: int) -> int:
    """Write the tree; return the number of archives."""
    count = 0
    for a in range(agents):
        folder = root / "agents" / f"agent-{a:05d}"
        (folder / "archive").mkdir(parents=True)
        (folder / "MEMORY.md").write_bytes(ARCHIVE_BODY)
        for i in range(archives):
            name = f"history_2020-01-{1 + i // 24:02d}_{i % 24:02d}-00-00.md"
            fd = os.open(folder / "archive" / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, ARCHIVE_BODY)
            os.close(fd)
            count += 1
    return count


CHILD = """
import json, resource, sys, time
from pathlib import Path
from governed_memory import Governance
from governed_memory._policy._model import load_policy
from governed_memory._retention import Retention
workspace, policy, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
governance = Governance(workspace=workspace, policy=load_policy(policy))
start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
deleted = 0
if mode == "purge":
    deleted = Retention(governance).purge().total_deleted
elif mode == "plan":
    deleted = len(Retention(governance).plan().deletions)
elapsed = time.perf_counter() - start
end = resource.getrusage(resource.RUSAGE_SELF)
used = end.ru_utime - cpu.ru_utime + end.ru_stime - cpu.ru_stime
print(json.dumps({"seconds": elapsed, "cpu": used, "deleted": deleted, "rss_kib": end.ru_maxrss}))
"""


def child(workspace: Path, policy: Path, mode: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(workspace), str(policy), mode],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def find_delete(root: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of ``find -delete``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(["find", str(root), "-name", "history_*", "-delete"], check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def one_scale(base: Path, agents: int, archives: int) -> dict[str, float]:
    policy = base / "policy.toml"
    policy.write_text(POLICY)
    trees = [base / name for name in ("find", "purge")]
    total = 0
    for tree in trees:
        total = generate(tree, agents, archives)
    os.sync()  # start every contender from a clean page cache state
    yardstick, yardstick_cpu = find_delete(trees[0])
    left = sum(1 for _ in trees[0].glob("agents/*/archive/history_*"))
    assert left == 0, f"find left {left} archives"
    baseline = child(trees[1], policy, "none")
    plan = child(trees[1], policy, "plan")  # a dry run changes nothing: same tree next
    assert plan["deleted"] == total, plan
    purge = child(trees[1], policy, "purge")
    assert purge["deleted"] == total, purge
    left = sum(1 for _ in trees[1].glob("agents/*/archive/history_*"))
    assert left == 0, f"purge left {left} archives"
    for tree in trees:
        shutil.rmtree(tree)
    return {
        "agents": agents,
        "archives": total,
        "find": yardstick,
        "find_cpu": yardstick_cpu,
        "purge": purge["seconds"],
        "purge_cpu": purge["cpu"],
        "plan": plan["seconds"],
        "ratio": purge["seconds"] / yardstick,
        "rss_base": baseline["rss_kib"] / 1024,
        "rss_purge": purge["rss_kib"] / 1024,
        "rss_plan": plan["rss_kib"] / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--archives", type=int, default=10, help="archives per agent")
    parser.add_argument(
        "--small-agents", type=int, default=2_000, help="a smaller scale, to show memory is flat"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gm-bench-purge-") as tmp:
        for agents in sorted({args.small_agents, args.agents}):
            if agents <= 0:
                continue
            base = Path(tmp) / str(agents)
            base.mkdir()
            rows.append(one_scale(base, agents, args.archives))
    print()
    header = (
        f"{'agents':>7} {'archives':>9} {'find -delete':>13} {'purge':>8} {'purge/find':>11} "
        f"{'find CPU':>9} {'purge CPU':>10} {'plan only':>10} {'RSS base':>9} {'RSS purge':>10} "
        f"{'RSS plan':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['agents']:>7} {r['archives']:>9} {r['find']:>12.2f}s {r['purge']:>7.2f}s "
            f"{r['ratio']:>10.2f}x {r['find_cpu']:>8.2f}s {r['purge_cpu']:>9.2f}s "
            f"{r['plan']:>9.2f}s {r['rss_base']:>7.1f}MB {r['rss_purge']:>8.1f}MB "
            f"{r['rss_plan']:>7.1f}MB"
        )
    print()
    print("purge = scan + plan + fsynced journal + per-agent lock + re-check + unlink + one sync")
    print("CPU = user + system seconds; wall times on a shared disk vary more than CPU times.")
    print("RSS purge stays flat across scales (the plan streams to the journal);")
    print("RSS plan is the dry-run path, which keeps the whole plan to print it.")


if __name__ == "__main__":
    main()
