"""Durable regulated add() with 1, 4 and 16 writers, against SQLite FULL, the Agents SDK and the disk.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_durable.py [--rounds 5] [--seconds 1.0] [--writers 1,4,16]

Targets, each written by N writers (threads of one process, then N
processes), every write acknowledged only once durable:

* ``regulated``: ``Conversation.add()`` under policies/regulated.toml as
  shipped (``durability.sync = "commit"``, consent required and granted,
  encryption, subject isolation, audit); one conversation per writer, each
  its own agent and customer, one Governance per process. Each add makes the
  message durable, then its audit entry (two fdatasync calls in a row, each
  shared with the writers of the moment: group commit);
* ``sqlite FULL``: SQLite in WAL mode with ``synchronous=FULL``, one row per
  message, one transaction each (``BEGIN IMMEDIATE`` ... ``COMMIT``), one
  connection per writer, all on one database file;
* ``agents``: the OpenAI Agents SDK's ``SQLiteSession.add_items`` (the real
  ``openai-agents`` package, one item per call, one session per writer, one
  database file), in its own virtual environment at ``--agents-venv``
  (default benchmarks/.venv-openai-agents, created with ``pip install
  openai-agents==0.24.0`` on first use);
* ``floor``: the disk's write+fdatasync of the same bytes, each writer to a
  file of its own.

Each cell (target, mode, writers) runs in a fresh interpreter
(benchmarks/_durable_worker.py) on a fresh scratch folder: set-up and one
warm write per writer, a barrier, then ``--seconds`` of writing; throughput
is the writes acknowledged over the time to the last writer's end. The
rounds alternate the targets (the order rotates each round), so all see the
same machine conditions; the tables give the median writes/s with the
spread (min-max), ratios of medians, and a summary line per target of
issue 18. Nothing touches the network except that one pip install.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _durable_worker import MESSAGE
from bench_add import table, venv_python  # the benchmarks' one table printer

HERE = Path(__file__).resolve().parent
WORKER = HERE / "_durable_worker.py"
AGENTS_REQUIREMENT = "openai-agents==0.24.0"
TARGETS = ("regulated", "sqlite", "agents", "floor")
LABELS = {
    "regulated": "regulated add()",
    "sqlite": "sqlite FULL",
    "agents": "agents add_items",
    "floor": "write+fdatasync",
}
MODES = ("threads", "processes")


def agents_installed(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", "import agents"], capture_output=True)
    return probe.returncode == 0


def install_agents(venv: Path) -> Path:
    """The python of a venv with openai-agents: ``venv``, made on first use."""
    python = venv_python(venv)
    if agents_installed(python):
        return python
    print(f"Installing {AGENTS_REQUIREMENT} into {venv} (once; this takes a few minutes)...")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", AGENTS_REQUIREMENT], check=True)
    if not agents_installed(python):
        sys.exit(f"bench_durable: {AGENTS_REQUIREMENT} did not install into {venv}")
    return python


def run_cell(
    python: Path, target: str, mode: str, writers: int, seconds: float, dir_: Path
) -> float:
    """Writes/s of one cell, in a fresh interpreter and scratch folder."""
    scratch = Path(tempfile.mkdtemp(prefix=f"durable-{target}-", dir=dir_))
    spec = {"target": target, "mode": mode, "writers": writers, "seconds": seconds}
    try:
        done = subprocess.run(
            [str(python), str(WORKER), json.dumps({**spec, "scratch": str(scratch)})],
            capture_output=True,
            text=True,
            timeout=seconds + 300,
            cwd=HERE.parent,
        )
        if done.returncode != 0:
            sys.exit(f"bench_durable: {spec} failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        return float(result["ops"]) / float(result["seconds"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _cell(rates: list[float]) -> str:
    return f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="writing time per cell")
    parser.add_argument("--writers", default="1,4,16", help="writer counts, comma-separated")
    parser.add_argument("--agents-venv", type=Path, default=HERE / ".venv-openai-agents")
    parser.add_argument(
        "--dir", type=Path, default=None, help="scratch folder (default: system temp)"
    )
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.writers.split(",") if c.strip()]
    pythons = {t: Path(sys.executable) for t in TARGETS}
    pythons["agents"] = install_agents(args.agents_venv)
    where = Path(tempfile.mkdtemp(prefix="bench-durable-", dir=args.dir))
    print(
        f"Durable writes, {len(MESSAGE)}-byte messages, every write acknowledged once on disk\n"
        f"{platform.python_implementation()} {platform.python_version()} on {platform.system()} "
        f"{platform.release()}, {os.cpu_count()} CPUs, scratch under {where}\n"
        f"{args.rounds} rounds x {args.seconds:g} s per cell, targets alternating (rotated each "
        "round); writes/s, median (min-max)\n"
    )
    rates: dict[tuple[str, str, int], list[float]] = {}
    try:
        for round_no in range(args.rounds):
            order = TARGETS[round_no % len(TARGETS) :] + TARGETS[: round_no % len(TARGETS)]
            for mode in MODES:
                for writers in counts:
                    for target in order:
                        rate = run_cell(pythons[target], target, mode, writers, args.seconds, where)
                        rates.setdefault((target, mode, writers), []).append(rate)
            print(f"  round {round_no + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        shutil.rmtree(where, ignore_errors=True)

    def med(target: str, mode: str, writers: int) -> float:
        return statistics.median(rates[target, mode, writers])

    for mode in MODES:
        rows = []
        for writers in counts:
            ours = med("regulated", mode, writers)
            rows.append(
                [
                    str(writers),
                    *(_cell(rates[t, mode, writers]) for t in TARGETS),
                    f"{ours / med('sqlite', mode, writers):.2f}x",
                    f"{ours / med('agents', mode, writers):.2f}x",
                    f"{ours / med('floor', mode, writers):.2f}x",
                    f"{ours / med('regulated', mode, counts[0]):.2f}x",
                ]
            )
        print(f"Writers as {mode}")
        print(
            table(
                [
                    "writers",
                    *(LABELS[t] for t in TARGETS),
                    "ours/sqlite",
                    "ours/agents",
                    "ours/floor",
                    f"ours/{counts[0]} writer",
                ],
                rows,
            )
        )
        print()
    if 1 in counts:
        for mode in MODES:
            ratio = med("regulated", mode, 1) / med("sqlite", mode, 1)
            verdict = "meets" if ratio >= 1.0 else "MISSES"
            print(f"1 writer ({mode}): regulated add() {ratio:.2f}x SQLite FULL ({verdict} >= 1x)")
    if 1 in counts and 4 in counts:
        for mode in MODES:
            ratio = med("regulated", mode, 4) / med("regulated", mode, 1)
            verdict = "meets" if ratio >= 2.0 else "MISSES"
            print(f"4 writers ({mode}): regulated add() {ratio:.2f}x one writer ({verdict} >= 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
