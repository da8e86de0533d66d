"""Start-up of the command line: ``--help``, ``--version``, ``agents`` and ``purge --dry-run``.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_startup.py [--agents 1000] [--messages 20] [--rounds 15]

Each row is a whole command, started as a new process, timed from spawn to
exit (wall clock), against its yardstick in the same run:

* ``--help``, ``--version``: against ``python -c pass`` with the same
  interpreter (so both pay the interpreter's start and the virtual
  environment's site hooks; only what the command imports differs);
* ``agents`` (the table) and ``agents --json`` over a workspace of
  ``--agents`` agents, each with a MEMORY.md of ``--messages`` messages and
  one archive: against ``find <workspace> -name MEMORY.md`` (the listing with
  no reading at all) and against ``python -c pass``;
* ``purge --dry-run`` over the same workspace under a 30-day archive rule:
  against ``find <workspace> -name 'history_*'``.

The rounds alternate (every command once per round, in turn), so a shared
machine slows them all alike; the table shows, for the wall clock and for
the CPU time the process used (user + system, from ``wait4``: steadier on a
shared machine, since waiting for a core does not count), the median, the
fastest and the slowest round, and each row's ratio of CPU medians against
its yardstick. The
summary line checks the target of issue 18: ``--help`` at most 3x
``python -c pass``. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = Path(sys.executable).with_name("governed-memory")
POLICY = '[retention]\narchives_max_age = "30d"\n'


def build_workspace(root: Path, agents: int, messages: int) -> Path:
    """One agent written by the library, copied ``agents`` times (same bytes, fast)."""
    from governed_memory import Conversation

    workspace = root / "ws"
    first = workspace / "agents" / "agent-00000"
    first.mkdir(parents=True)
    conversation = Conversation(
        name="bench",
        time_enabled=True,
        memory_md_path=str(first / "MEMORY.md"),
        governance=None,
    )
    for i in range(messages):
        conversation.add("User" if i % 2 == 0 else "Assistant", f"message {i}: " + "x" * 300)
    del conversation
    archive = first / "archive"
    archive.mkdir()
    shutil.copyfile(first / "MEMORY.md", archive / "history_2020-01-01_00-00-00.md")
    for a in range(1, agents):
        shutil.copytree(first, workspace / "agents" / f"agent-{a:05d}")
    return workspace


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock seconds from spawn to exit, and the CPU seconds (user + system) the child used.

    The CPU time is the steadier figure on a shared machine: waiting for a
    core does not count in it.
    """
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{argv} exited {child.returncode}: {errors.decode()[-400:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
        root = Path(scratch)
        workspace = build_workspace(root, args.agents, args.messages)
        policy = root / "purge.toml"
        policy.write_text(POLICY, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_MEMORY_")}
        env.update(WORKSPACE_DIR=str(workspace), HOME=str(root))
        ws = ["--workspace", str(workspace)]
        find = shutil.which("find") or "find"
        cases: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--help": [str(CLI), "--help"],
            "--version": [str(CLI), "--version"],
            f"find -name MEMORY.md ({args.agents} agents)": [
                find,
                str(workspace),
                "-name",
                "MEMORY.md",
            ],
            "agents": [str(CLI), *ws, "agents"],
            "agents --json": [str(CLI), *ws, "agents", "--json"],
            "find -name 'history_*'": [find, str(workspace), "-name", "history_*"],
            "purge --dry-run": [str(CLI), *ws, "--policy", str(policy), "purge", "--dry-run"],
        }
        yardstick = {
            "--help": "python -c pass",
            "--version": "python -c pass",
            "agents": f"find -name MEMORY.md ({args.agents} agents)",
            "agents --json": f"find -name MEMORY.md ({args.agents} agents)",
            "purge --dry-run": "find -name 'history_*'",
        }
        for argv in cases.values():  # warm the page cache and the bytecode caches
            timed(argv, env)
        wall: dict[str, list[float]] = {name: [] for name in cases}
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, argv in cases.items():
                elapsed, used = timed(argv, env)
                wall[name].append(elapsed)
                cpu[name].append(used)

    print(f"CLI start-up, {args.rounds} rounds alternating, per command (ms)")
    print(
        f"{'command':<36} {'wall med':>9} {'min':>7} {'max':>7} {'cpu med':>8} {'min':>7} "
        f"{'max':>7} {'cpu ratio':>16}"
    )
    for name in cases:
        w, c = wall[name], cpu[name]
        base = yardstick.get(name)
        ratio = ""
        if base is not None:
            which = "find" if "find" in base else "pass"
            ratio = f"{statistics.median(c) / statistics.median(cpu[base]):.2f}x {which}"
        print(
            f"{name:<36} {statistics.median(w) * 1e3:9.1f} {min(w) * 1e3:7.1f} "
            f"{max(w) * 1e3:7.1f} {statistics.median(c) * 1e3:8.1f} {min(c) * 1e3:7.1f} "
            f"{max(c) * 1e3:7.1f} {ratio:>16}"
        )
    for kind, table in (("wall", wall), ("cpu", cpu)):
        ratio = statistics.median(table["--help"]) / statistics.median(table["python -c pass"])
        verdict = "met" if ratio <= 3 else f"missed by {ratio / 3:.2f}x"
        print(f"target --help <= 3x python -c pass ({kind}): {ratio:.2f}x ({verdict})")


if __name__ == "__main__":
    main()
