"""Throughput of Conversation.add() write-through, ours against the reference.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_add.py               # governed_memory only
    python benchmarks/bench_add.py --reference   # also swarms 16.0.3, and the ratio

What is measured: ``add(role, text)`` on a Conversation with
``time_enabled=True`` and a MEMORY.md path, in default mode (no fsync per
add, as in the reference), with 400-byte ASCII messages. Each add appends
one block to MEMORY.md before it returns; ours holds the agent folder's
inter-process lock (flock) for every append, the reference only a
per-object threading.Lock.

1. Throughput: ``--rounds`` rounds of ``--adds`` messages, each round on a
   fresh workspace; with ``--reference`` the rounds alternate ours /
   reference so both see the same machine conditions. Median msg/s.
2. Per-add cost against history length: ``--history`` messages are added
   first (untimed), then ``--probe`` adds are timed.

Each implementation runs in a worker process (benchmarks/_add_worker.py) in
its own interpreter: ours in this one, the reference in a virtual
environment at ``--reference-venv`` (default benchmarks/.venv-swarms, which
is created and filled with ``pip install swarms==16.0.3`` on first use; the
reference's dependency pins clash with ours). Nothing touches the network
except that one pip install.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKER = HERE / "_add_worker.py"
REFERENCE_REQUIREMENT = "swarms==16.0.3"
REFERENCE_VERSION = "16.0.3"
TARGET_RATIO = 3.0


# -- the reference's virtual environment ------------------------------------


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def reference_installed(venv: Path) -> bool:
    python = venv_python(venv)
    if not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", "from importlib.metadata import version; print(version('swarms'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == REFERENCE_VERSION


def install_reference(venv: Path) -> None:
    """Create ``venv`` and install the reference into it (a few minutes, once)."""
    if reference_installed(venv):
        return
    print(f"Installing {REFERENCE_REQUIREMENT} into {venv} (once; this takes a few minutes)...")
    if not venv_python(venv).exists():
        # The base interpreter, not this virtual environment's packages.
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv_python(venv)), "-m", "pip", "install", "--quiet", REFERENCE_REQUIREMENT],
        check=True,
    )
    if not reference_installed(venv):
        sys.exit(f"bench_add: {REFERENCE_REQUIREMENT} did not install into {venv}")


# -- workers ----------------------------------------------------------------


@dataclass
class Worker:
    """One implementation's worker process."""

    impl: str
    python: Path
    scratch: Path
    label: str = ""
    proc: subprocess.Popen[str] | None = field(default=None, repr=False)

    def start(self) -> None:
        home = self.scratch / f"home-{self.impl}"
        home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            {
                # Both packages import litellm somewhere: keep its model
                # table local (no download at import).
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                # The reference creates $WORKSPACE_DIR on import and reads a
                # .env upward from the working directory: keep both in scratch.
                "WORKSPACE_DIR": str(home / "agent_workspace"),
                "SWARMS_VERBOSE_GLOBAL": "False",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [str(self.python), str(WORKER), self.impl],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=home,
            env=env,
        )
        self.label = self._read()["ready"]

    def _read(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        # The reference may log to stdout; replies are the JSON lines.
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit(f"bench_add: the {self.impl} worker exited (status {self.proc.wait()})")
            if line.startswith("{"):
                reply: dict[str, Any] = json.loads(line)
                return reply

    def run(self, *, adds: int, size: int, prefill: int) -> float:
        """Seconds for ``adds`` timed adds after ``prefill`` untimed ones."""
        assert self.proc is not None and self.proc.stdin is not None
        workspace = Path(tempfile.mkdtemp(prefix=f"ws-{self.impl}-", dir=self.scratch))
        request = {"workspace": str(workspace), "adds": adds, "size": size, "prefill": prefill}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        shutil.rmtree(workspace)
        if reply["blocks"] != prefill + adds:
            sys.exit(
                f"bench_add: {self.label} wrote {reply['blocks']} blocks for "
                f"{prefill + adds} adds; the write-through is broken"
            )
        return float(reply["seconds"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


# -- output -----------------------------------------------------------------


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true", help="also run swarms 16.0.3")
    parser.add_argument("--reference-venv", type=Path, default=HERE / ".venv-swarms")
    parser.add_argument("--adds", type=int, default=20_000, help="messages per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=400, help="message size in bytes")
    parser.add_argument(
        "--history", default="100,1000,10000", help="history lengths, comma-separated"
    )
    parser.add_argument("--probe", type=int, default=2_000, help="timed adds per history length")
    parser.add_argument(
        "--dir", type=Path, default=None, help="scratch folder (default: system temp)"
    )
    args = parser.parse_args(argv)
    histories = [int(h) for h in args.history.split(",") if h.strip()]

    if args.reference:
        install_reference(args.reference_venv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-add-", dir=args.dir))
    workers = [Worker("ours", Path(sys.executable), scratch)]
    if args.reference:
        workers.append(Worker("reference", venv_python(args.reference_venv), scratch))
    try:
        for worker in workers:
            worker.start()
        print(
            f"add() write-through, {args.size}-byte messages, time_enabled=True, default mode "
            f"(no fsync per add)\n{platform.python_implementation()} {platform.python_version()} "
            f"on {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
            f"workspaces under {scratch}\n"
        )
        rates: dict[str, list[float]] = {w.impl: [] for w in workers}
        for _ in range(args.rounds):
            for worker in workers:  # alternate: ours, reference, ours, ...
                seconds = worker.run(adds=args.adds, size=args.size, prefill=0)
                rates[worker.impl].append(args.adds / seconds)
        rows = [
            [
                w.label,
                f"{statistics.median(rates[w.impl]):,.0f}",
                f"{min(rates[w.impl]):,.0f}",
                f"{max(rates[w.impl]):,.0f}",
                f"{1e6 / statistics.median(rates[w.impl]):.2f}",
            ]
            for w in workers
        ]
        print(
            f"Throughput: {args.rounds} rounds x {args.adds:,} messages, fresh workspace per round"
        )
        print(table(["implementation", "median msg/s", "min", "max", "us/add"], rows))
        if args.reference:
            ratio = statistics.median(rates["ours"]) / statistics.median(rates["reference"])
            best = max(rates["ours"]) / max(rates["reference"])
            verdict = "meets" if ratio >= TARGET_RATIO else "MISSES"
            print(
                f"\nratio ours/reference: {ratio:.2f}x of the medians ({verdict} the "
                f"{TARGET_RATIO:g}x target), {best:.2f}x of the best rounds"
            )

        print(
            f"\nPer-add cost against history length ({args.probe:,} timed adds after the "
            "history, best of 3)"
        )
        cost_rows = []
        for history in histories:
            row = [f"{history:,}"]
            for worker in workers:
                # Best of three: a probe is short, so one scheduler hiccup would dominate it.
                seconds = min(
                    worker.run(adds=args.probe, size=args.size, prefill=history) for _ in range(3)
                )
                row.append(f"{seconds / args.probe * 1e6:.2f}")
            cost_rows.append(row)
        print(table(["history", *(f"{w.label} us/add" for w in workers)], cost_rows))
    finally:
        for worker in workers:
            worker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
