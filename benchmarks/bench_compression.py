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
   of ``python -c "import governed_memory"`` minus ``python -c "pass"``,
   median of ``--imports`` runs, interleaved, as wall time and as the
   child's CPU time (user + system; less sensitive to other load). Each run
   also checks that litellm (which takes seconds to import) was not
   imported. Target: under 150 ms. Then the slowest modules from ``python -X importtime``.

Nothing touches the network: litellm is imported (for the reference column)
with its model-cost-map download switched off.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from governed_memory import ContextCompressor, Conversation, FixedClock
from governed_memory._llm import import_litellm

IMPORT_CHECK = (
    "import sys, governed_memory; "
    "assert 'litellm' not in sys.modules, 'import governed_memory imported litellm'"
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


def run_python(code: str) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of a fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def bench_import(runs: int) -> dict[str, tuple[float, float]]:
    """Median (wall, cpu) of the bare interpreter and of the import."""
    run_python(IMPORT_CHECK)  # warm the file cache and .pyc files
    samples: dict[str, list[tuple[float, float]]] = {"bare": [], "import": []}
    for _ in range(runs):
        samples["bare"].append(run_python("pass"))
        samples["import"].append(run_python(IMPORT_CHECK))
    return {
        key: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for key, values in samples.items()
    }


def slowest_imports(top: int) -> list[tuple[str, float]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import governed_memory"],
        capture_output=True,
        text=True,
        check=True,
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

    print("\nImport time of governed_memory (fresh interpreter, median)\n")
    medians = bench_import(args.imports)
    print(f"{'':36} {'wall':>9} {'CPU':>9}")
    for label, key in (
        ("python -c pass", "bare"),
        ("python -c 'import governed_memory'", "import"),
    ):
        wall, cpu = medians[key]
        print(f"{label:36} {wall * 1e3:6.1f} ms {cpu * 1e3:6.1f} ms")
    net_wall = medians["import"][0] - medians["bare"][0]
    net_cpu = medians["import"][1] - medians["bare"][1]
    print(
        f"{'import governed_memory (difference)':36} {net_wall * 1e3:6.1f} ms {net_cpu * 1e3:6.1f} ms"
    )
    verdict = "met" if net_cpu < 0.150 else "NOT met"
    print(f"\nlitellm not imported: checked in every run. Target < 150 ms (CPU): {verdict}")
    print("CPU time is what the import costs; wall time adds whatever else the machine runs.")
    print("\nSlowest modules (self time, python -X importtime, one run):")
    for name, ms in slowest_imports(8):
        print(f"  {ms:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
