"""Preload of a large MEMORY.md: Conversation construction next to reading the file.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_preload.py [--sizes 1,10,50] [--rounds 5]

For each size (megabytes of MEMORY.md, ~1 KB messages of mixed prose, one in
ten with non-ASCII text such as an em dash), in one process, rounds
interleaved, median seconds of:

* ``read bytes``: ``Path.read_bytes()`` of the file, the floor;
* ``reference``: what swarms 16.0.3 does on construction: read the file in
  text mode, check ``"### " in content`` and build the preload message;
* ``ours``: ``Conversation(memory_md_path=...)`` in default mode (plaintext
  store, no governance): lock, read, decode, check for a record, build the
  same preload message;
* ``ours, 1/2``: the same with ``preload_max_chars`` at half the file, which
  keeps the newest whole records (found from the end of the text; nothing is
  parsed);
* ``ours, 100 KB``: with ``preload_max_chars=100_000``, what a deployment
  that bounds the preload sets: the cost is reading the file, not its size
  in records;
* ``ours, governed``: through a ``Governance`` with the default policy
  (plaintext; every record passes the preload gate, so the file is parsed
  once for the gate).

Before timing, a check that the preload message is exactly the reference's
(unbounded, governed) or the header plus a suffix of whole records (bounded).
The target: default-mode preload close to the cost of reading the file.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from governed_memory import Conversation, Governance, Policy, memory_md_path
from governed_memory._format._records import PRELOAD_PREFIX, render_block, render_header

WORDS = [
    "the",
    "quarterly",
    "budget",
    "for",
    "project",
    "Falcon",
    "was",
    "approved",
    "after",
    "review",
    "of",
    "vendor",
    "quotes",
    "and",
    "the",
    "risk",
    "register;",
    "next",
    "steps",
    "are",
    "a",
    "pilot",
    "in",
    "two",
    "branches",
    "and",
    "a",
    "report",
    "to",
    "the",
    "board",
]
ACCENTS = "Café résumé — naïve coöperation, 10 € per unit"


def build_memory(path: Path, megabytes: int) -> str:
    """Write a MEMORY.md of about ``megabytes`` MB; return its text."""
    parts = [render_header("bench_conversation", "2026-11-30T10:00:00")]
    size = len(parts[0])
    n = 0
    while size < megabytes * 1_000_000:
        words = [WORDS[(n * 7 + i) % len(WORDS)] for i in range(150)]
        if n % 10 == 0:
            words.append(ACCENTS)
        role = "Human" if n % 2 == 0 else "Bench"
        block = render_block(
            role, f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d}", " ".join(words)
        )
        parts.append(block)
        size += len(block)
        n += 1
    text = "".join(parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return text


def timed(run: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def reference_preload(path: Path) -> str | None:
    with open(path, encoding="utf-8") as handle:  # text mode, as the reference reads it
        content = handle.read()
    if "### " not in content:
        return None
    return PRELOAD_PREFIX + content


def ours(path: Path, **kwargs: object) -> Callable[[], Conversation]:
    def run() -> Conversation:
        conversation = Conversation(name="bench", memory_md_path=path, **kwargs)  # type: ignore[arg-type]
        assert conversation.store is not None
        conversation.store.close()
        return conversation

    return run


def check(path: Path, text: str, bounds: list[int], governance: Governance) -> None:
    """The preloads are the reference's text (unbounded) or whole newest records (bounded)."""
    expected = reference_preload(path)
    for conversation in (ours(path)(), ours(path, governance=governance)()):
        assert conversation.conversation_history[0]["content"] == expected
    header = render_header("bench_conversation", "2026-11-30T10:00:00")
    for bound in bounds:
        bounded = ours(path, preload_max_chars=bound)()
        body = bounded.conversation_history[0]["content"][len(PRELOAD_PREFIX) :]
        assert len(body) <= bound and body.startswith(header)
        assert text.endswith(body[len(header) :]) and body[len(header) :].startswith("### ")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--sizes", default="1,10,50", help="memory sizes in MB")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement")
    parser.add_argument("--dir", default=None, help="scratch folder (default: system temp)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    columns = ("read bytes", "reference", "ours", "ours, 1/2", "ours, 100 KB", "ours, governed")
    print(f"Preload of MEMORY.md, median of {args.rounds} rounds (seconds)\n")
    print(f"{'MB':>4} | " + " | ".join(f"{c:>14}" for c in columns) + " | ours/reference")
    print("-" * (7 + 17 * len(columns) + 15))
    scratch = Path(tempfile.mkdtemp(prefix="bench-preload-", dir=args.dir))
    try:
        for megabytes in sizes:
            root = scratch / f"{megabytes}mb"
            path = memory_md_path("Bench", root)
            print(f"building a {megabytes} MB memory...", file=sys.stderr)
            text = build_memory(path, megabytes)
            half = len(text) // 2
            governance = Governance(workspace=root, policy=Policy())
            check(path, text, [half, 100_000], governance)
            runs: dict[str, Callable[[], object]] = {
                "read bytes": path.read_bytes,
                "reference": lambda path=path: reference_preload(path),  # type: ignore[misc]
                "ours": ours(path),
                "ours, 1/2": ours(path, preload_max_chars=half),
                "ours, 100 KB": ours(path, preload_max_chars=100_000),
                "ours, governed": ours(path, governance=governance),
            }
            samples: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.rounds):
                for name, run in runs.items():
                    samples[name].append(timed(run))
            med = {name: statistics.median(values) for name, values in samples.items()}
            print(
                f"{megabytes:>4} | "
                + " | ".join(f"{med[c]:>12.3f} s" for c in columns)
                + f" | {med['ours'] / med['reference']:>13.2f}x"
            )
            shutil.rmtree(root)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
