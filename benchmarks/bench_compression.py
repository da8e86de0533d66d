"""Per-loop cost of the compression threshold check, and the import time of governed_memory.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_compression.py [--sizes 100,1000,10000] [--loops 200] [--imports 15]

1. The threshold check an agent runs at the top of every loop iteration, for
   a history of N messages (timestamped turns like the reference's
   compressor fixture, ``[<iso>] Human: turn i: the budget for project
   Falcon is ... EUR``). Each loop first adds one message (as an agent loop
   does; not timed), then times one check:

   * ``ours``: ``ContextCompressor.should_compress(agent)``, which reads
     ``Conversation.token_count``, the running total: it tokenises only the
     message added since the last check;
   * ``full recount``: ``Conversation.full_token_count()``: every message
     tokenised again (what the running total saves);
   * ``reference``: what swarms 16.0.3 does each loop:
     ``count_tokens(return_history_as_string())``, i.e. ``litellm.encode``
     of the whole history string (tiktoken ``cl100k_base``).

   Median over ``--loops`` loops, wall clock (``time.perf_counter``). The
   target: at 10,000 messages ours is at least 100x cheaper than the
   reference.

2. The import time of ``governed_memory`` in a fresh interpreter: wall time
   of ``python -c "<statement>"`` minus ``python -c "pass"``, interleaved,
   best and median of ``--imports`` runs, as wall time and as the child's CPU
   time (user + system; less sensitive to other load), with bytecode cached as
   in an installed package (see ``child_env``). The package facade is
   lazy (PEP 562), so ``import governed_memory`` alone loads no submodule;
   the figure that matters to a user is the first use, so three statements
   are measured: ``import governed_memory``, ``from governed_memory import
   Conversation`` (the default-mode data path) and ``from governed_memory
   import Agent``. Each run also checks that neither litellm nor tiktoken
   (which take seconds and ~100 ms) was imported. Target: under 150 ms. Then
   the slowest modules of ``from governed_memory import Agent`` from
   ``python -X importtime``.

Nothing touches the network: litellm is imported (for the reference column)
with its model-cost-map download switched off.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from governed_memory import ContextCompressor, Conversation, FixedClock
from governed_memory._memory._llm import import_litellm

IMPORT_STATEMENTS = {
    "import governed_memory": "import governed_memory",
    "... import Conversation": "from governed_memory import Conversation",
    "... import Agent": "from governed_memory import Agent",
}
NOT_IMPORTED = ("litellm", "tiktoken")


def import_check(statement: str) -> str:
    """``statement``, then a check that it imported none of :data:`NOT_IMPORTED`."""
    return (
        f"import sys; {statement}; "
        f"loaded = [m for m in {NOT_IMPORTED!r} if m in sys.modules]; "
        f"assert not loaded, f'{statement} imported {{loaded}}'"
    )


class BenchAgent:
    """What the compressor reads from an agent."""

    def __init__(self, memory: Conversation, context_length: int) -> None:
        self.agent_name = "Bench"
        self.model_name = "gpt-4"  # cl100k_base, like the reference's counter
        self.short_memory = memory
        self.context_length = context_length


def history(n: int) -> Conversation:
    memory = Conversation(
        system_prompt="You are helpful.",
        time_enabled=True,
        tokenizer_model_name="gpt-4",
        clock=FixedClock(dt.datetime(2026, 11, 30, 4, 0, 0), tick=dt.timedelta(microseconds=13)),
    )
    for i in range(n):
        memory.add("Human" if i % 2 == 0 else "Bench", message(i))
    return memory


def message(i: int) -> str:
    return f"turn {i}: the budget for project Falcon is {1000 + i} EUR"


def per_loop(memory: Conversation, check: Callable[[], Any], loops: int) -> float:
    """Median seconds of ``check`` when one message was added before each call."""
    times = []
    for i in range(loops):
        memory.add("Human", message(10**6 + i))
        start = time.perf_counter()
        check()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_size(n: int, loops: int, encode: Callable[..., list[int]]) -> tuple[float, float, float]:
    """Median seconds per check at ``n`` messages: ours, full recount, reference."""
    memory = history(n)
    agent = BenchAgent(memory, context_length=10**9)  # never compresses: we time the check
    compressor = ContextCompressor()
    compressor.should_compress(agent)  # the first check counts the whole history once

    def reference() -> int:
        return len(encode(model="gpt-5.4", text=memory.return_history_as_string()))

    ours = per_loop(memory, lambda: compressor.should_compress(agent), loops)
    full = per_loop(memory, memory.full_token_count, max(loops // 10, 5))
    ref = per_loop(memory, reference, max(loops // 10, 5))
    assert memory.token_count == memory.full_token_count()
    return ours, full, ref


def bench_checks(sizes: list[int], loops: int) -> list[tuple[int, float, float, float]]:
    encode = import_litellm().encode
    return [(n, *bench_size(n, loops, encode)) for n in sizes]


def child_env(pycache: str) -> dict[str, str]:
    """The environment of the measured interpreters: bytecode cached, as when installed.

    A pip-installed package ships compiled ``.pyc`` files; a development
    checkout run with ``PYTHONDONTWRITEBYTECODE=1`` would compile every module
    of ours from source on each start, adding tens of milliseconds that no
    deployment pays. The cache goes to a scratch ``PYTHONPYCACHEPREFIX``, so
    the repository stays clean.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def run_python(code: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of a fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def bench_import(runs: int, env: dict[str, str]) -> dict[str, list[tuple[float, float]]]:
    """(wall, cpu) samples of the bare interpreter and of each import statement."""
    codes = {"bare": "pass"} | {
        label: import_check(stmt) for label, stmt in IMPORT_STATEMENTS.items()
    }
    for code in codes.values():
        run_python(code, env)  # warm the file cache and write the .pyc files
    samples: dict[str, list[tuple[float, float]]] = {key: [] for key in codes}
    for _ in range(runs):
        for key, code in codes.items():
            samples[key].append(run_python(code, env))
    return samples


def slowest_imports(top: int, env: dict[str, str]) -> list[tuple[str, float]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", IMPORT_STATEMENTS["... import Agent"]],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    own: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].startswith("import time:") and parts[1].strip().isdigit():
            own[parts[2].strip()] = int(parts[0].split(":")[1]) / 1000
    return sorted(own.items(), key=lambda kv: -kv[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="history lengths (messages)")
    parser.add_argument("--loops", type=int, default=200, help="timed checks per size")
    parser.add_argument("--imports", type=int, default=15, help="interpreter starts per side")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    print("Threshold check per agent loop (median; one message added before each check)\n")
    print(
        f"{'messages':>9} | {'ours':>10} | {'full recount':>12} | {'reference':>10} | {'reference/ours':>14}"
    )
    print("-" * 68)
    rows = bench_checks(sizes, args.loops)
    for n, ours, full, reference in rows:
        print(
            f"{n:>9,} | {ours * 1e6:>7.1f} us | {full * 1e3:>9.2f} ms | {reference * 1e3:>7.2f} ms"
            f" | {reference / ours:>13.0f}x"
        )
    largest = rows[-1]
    ratio = largest[3] / largest[1]
    verdict = "met" if ratio >= 100 else "NOT met"
    print(
        f"\nTarget: >= 100x cheaper than the reference at {largest[0]:,} messages: {ratio:.0f}x ({verdict})"
    )

    print("\nImport time of governed_memory (fresh interpreter, minus python -c pass)\n")
    pycache = tempfile.TemporaryDirectory(prefix="bench-pycache-")
    env = child_env(pycache.name)
    samples = bench_import(args.imports, env)
    bare = samples.pop("bare")
    print(f"{'':26} {'best wall':>10} {'median wall':>12} {'median CPU':>11}")
    print(
        f"{'python -c pass (absolute)':26} {min(w for w, _ in bare) * 1e3:7.1f} ms"
        f" {statistics.median(w for w, _ in bare) * 1e3:9.1f} ms"
        f" {statistics.median(c for _, c in bare) * 1e3:8.1f} ms"
    )
    worst_cpu = 0.0
    for label, values in samples.items():
        best = min(w for w, _ in values) - min(w for w, _ in bare)
        wall = statistics.median(w for w, _ in values) - statistics.median(w for w, _ in bare)
        cpu = statistics.median(c for _, c in values) - statistics.median(c for _, c in bare)
        worst_cpu = max(worst_cpu, cpu)
        print(f"{label:26} {best * 1e3:7.1f} ms {wall * 1e3:9.1f} ms {cpu * 1e3:8.1f} ms")
    verdict = "met" if worst_cpu < 0.150 else "NOT met"
    print(
        f"\n{', '.join(NOT_IMPORTED)} not imported: checked in every run."
        f" Target < 150 ms (median CPU, every statement): {verdict}"
    )
    print("CPU time is what the import costs; wall time adds whatever else the machine runs.")
    print("Bytecode cached in a scratch PYTHONPYCACHEPREFIX, as in an installed package.")
    print("\nSlowest modules of `from governed_memory import Agent` (self time, -X importtime):")
    for name, ms in slowest_imports(8, env):
        print(f"  {ms:7.1f} ms  {name}")
    pycache.cleanup()


if __name__ == "__main__":
    main()
