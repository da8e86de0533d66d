"""Encrypted preload and compaction next to plaintext, with the peak memory of each.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_encrypted_reads.py [--sizes 1,10,50] [--rounds 5]

For each size (megabytes of memory, ~1 KB messages of prose, one in ten with
non-ASCII text) and each mode, two workspaces hold the same records:

* ``governed``: each record attributed to one of eight data subjects, as a
  governed ``add()`` writes it; one workspace under a policy without
  encryption (``MEMORY.md``), one under the same policy with
  ``[encryption] enabled = true`` (``MEMORY.md.gmenc``, one frame per
  record under the agent's and the subject's keys, exactly what those adds
  write); both read through a ``Governance``;
* ``store``: default-mode records (no metadata), the plaintext store against
  the encrypted store alone (``encrypted_store_factory``), no ``Governance``:
  the encrypted side's whole extra cost, next to a plaintext preload that
  parses nothing.

Measured, every measurement in a fresh interpreter (so its peak RSS, the
process's ``VmHWM``, is its own), plaintext and encrypted alternating
(ABBA order), ``--rounds`` rounds, medians and spread (min-max):

* ``preload``: ``Conversation(memory_md_path=..., governance=...)``, which
  reads the memory, authenticates and decrypts it (encrypted), parses its
  records for the preload gate and builds the preload message;
* ``compaction``: ``Governance.compact(store, summary)`` (``store``:
  ``store.compact(summary)``), what ``Conversation.compact`` runs on disk: archive the memory (plaintext: the
  file's bytes; encrypted: every frame authenticated, then re-sealed for the
  archive's name) and replace it with a fresh header and the summary. Each
  round compacts a fresh copy of the workspace (the copy is not timed).

``cpu s`` is the worker's CPU time for the operation (less disturbed than
wall time on a shared machine; the fsyncs of a compaction are wall time
only). Peak RSS includes the interpreter and the imports (reported as ``idle``: the
same worker doing everything but the measured operation). The targets
(issue 18): encrypted at most 2x plaintext in time, at most 1.3x in peak RSS.
Nothing is asserted; the script prints a table and the summary lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_preload import ACCENTS, WORDS  # the same prose as the plaintext preload benchmark

AGENT = "Bench"
SUBJECTS = [f"customer-{n}" for n in range(8)]
SIDES = ("plaintext", "encrypted")
OPS = ("preload", "compaction")
MODES = ("governed", "store")
MASTER_KEY = bytes(range(32))


def _policy(side: str) -> Any:
    from governed_memory._policy._model import Policy

    return Policy.model_validate({"encryption": {"enabled": side == "encrypted"}})


def _governance(root: Path, side: str) -> Any:
    from governed_memory import Governance
    from governed_memory._crypto import LocalKeyProvider

    return Governance(
        workspace=root, policy=_policy(side), key_provider=LocalKeyProvider(MASTER_KEY)
    )


def memory_text(megabytes: int, *, governed: bool) -> str:
    """A memory of about ``megabytes`` MB: ~1 KB records (governed: of eight subjects)."""
    from governed_memory._format._records import render_block, render_header

    parts = [render_header("bench_conversation", "2026-11-30T10:00:00")]
    size, n = len(parts[0]), 0
    while size < megabytes * 1_000_000:
        words = [WORDS[(n * 7 + i) % len(WORDS)] for i in range(150)]
        if n % 10 == 0:
            words.append(ACCENTS)
        role = "Human" if n % 2 == 0 else AGENT
        stamp = f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d}"
        meta = {"subject": SUBJECTS[n % len(SUBJECTS)]} if governed else None
        block = render_block(role, stamp, " ".join(words), meta)
        parts.append(block)
        size += len(block)
        n += 1
    return "".join(parts)


def _store(root: Path, mode: str, side: str, header: Any) -> Any:
    """The agent's store: the Governance's (governed), or the bare store of ``side`` (store)."""
    from governed_memory import memory_md_path
    from governed_memory._crypto import Keyring, LocalKeyProvider
    from governed_memory._stores import PlaintextAgentStore
    from governed_memory._stores._encrypted import EncryptedAgentStore

    path = memory_md_path(AGENT, root)
    if mode == "governed":
        return _governance(root, side).store_factory(path, header)
    if side == "plaintext":
        return PlaintextAgentStore(path, header)
    keyring = Keyring(root / "keyring", LocalKeyProvider(MASTER_KEY))
    return EncryptedAgentStore(path, header, keyring=keyring)


def build(root: Path, mode: str, side: str, text: str) -> int:
    """Write ``text`` as the agent's memory of a workspace (``mode``, ``side``); its file size."""
    from governed_memory import memory_md_path
    from governed_memory._crypto import KIND_MEMORY

    path = memory_md_path(AGENT, root)
    path.parent.mkdir(parents=True)
    if side == "plaintext":
        path.write_text(text, encoding="utf-8")
        return path.stat().st_size
    store = _store(root, mode, side, lambda: "")
    store.ensure()
    # One frame per record under its subject's key: what the adds would have written.
    store.memory_path.write_bytes(
        store.codec.encode_text(KIND_MEMORY, store.memory_path.name, text)
    )
    store.close()
    return int(store.memory_path.stat().st_size)


def _peak_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def worker(mode: str, op: str, side: str, root: Path) -> dict[str, Any]:
    """One measurement, in this (fresh) interpreter."""
    import gc

    from governed_memory import Conversation, memory_md_path
    from governed_memory._format._records import render_block

    path = memory_md_path(AGENT, root)
    governance = _governance(root, side) if mode == "governed" else None
    summary = render_block("System", "2026-11-30T11:00:00", "[Compressed Memory Summary] ok")
    store = _store(root, mode, side, lambda: "# header\n")
    extra: dict[str, Any] = {"governance": governance} if governance else {}
    if mode == "store" and side == "encrypted":
        extra["store_factory"] = lambda path, header: _store(root, mode, side, header)
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    if op == "preload":
        conversation = Conversation(name="bench", memory_md_path=path, **extra)
        assert len(conversation.conversation_history[-1]["content"]) > 1000, "nothing preloaded"
    elif op == "compaction":
        if governance is not None:
            archive = governance.compact(store, summary, agent=AGENT, subject_id=None)
        else:
            archive = store.compact(summary)
        assert archive is not None, "nothing archived"
    elapsed = time.perf_counter() - start  # "idle": neither, the baseline of the peak
    return {"seconds": elapsed, "cpu": time.process_time() - cpu, "peak_kb": _peak_kb()}


def measure(mode: str, op: str, side: str, root: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", mode, op, side, str(root)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1,10,50", help="memory sizes in MB")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement")
    parser.add_argument("--dir", default=None, help="scratch folder (default: system temp)")
    parser.add_argument("--modes", default=",".join(MODES), help="governed, store or both")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        mode, op, side, root = args.worker
        print(json.dumps(worker(mode, op, side, Path(root))))
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="bench-enc-reads-", dir=args.dir))
    modes = args.modes.split(",")
    rows: list[tuple[int, str, dict[str, list[dict[str, Any]]]]] = []
    idle = statistics.median(
        measure("governed", "idle", side, scratch / "none")["peak_kb"]
        for side in SIDES
        for _ in range(2)
    )
    try:
        for megabytes, mode in [(m, mode) for m in sizes for mode in modes]:
            print(f"building {megabytes} MB memories ({mode})...", file=sys.stderr)
            text = memory_text(megabytes, governed=mode == "governed")
            masters = {side: scratch / f"{megabytes}mb-{mode}-{side}" for side in SIDES}
            files = {side: build(masters[side], mode, side, text) for side in SIDES}
            del text
            for op in OPS:
                samples: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
                for n in range(args.rounds):
                    for side in SIDES if n % 2 == 0 else SIDES[::-1]:
                        root = masters[side]
                        if op == "compaction":  # compaction changes the workspace: a fresh copy
                            root = scratch / "copy"
                            shutil.rmtree(root, ignore_errors=True)
                            shutil.copytree(masters[side], root)
                        samples[side].append(measure(mode, op, side, root))
                rows.append((megabytes, f"{mode} {op}", samples))
                _print_row(megabytes, f"{mode} {op}", samples, files)
            for master in masters.values():
                shutil.rmtree(master)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _summary(rows, idle, args.rounds)


def _print_row(
    megabytes: int, op: str, samples: dict[str, list[dict[str, Any]]], files: dict[str, int]
) -> None:
    if not hasattr(_print_row, "done"):
        print(
            f"{'MB':>4} {'operation':<19} {'side':<10} {'file MB':>8} {'median s':>9} "
            f"{'min-max s':>13} {'cpu s':>7} {'peak MB':>8} {'time x':>7} {'cpu x':>6} {'peak x':>7}"
        )
        _print_row.done = True  # type: ignore[attr-defined]
    base_s = statistics.median(s["seconds"] for s in samples["plaintext"])
    base_kb = statistics.median(s["peak_kb"] for s in samples["plaintext"])
    base_cpu = statistics.median(s["cpu"] for s in samples["plaintext"])
    for side in SIDES:
        seconds = [s["seconds"] for s in samples[side]]
        cpu = statistics.median(s["cpu"] for s in samples[side])
        peak = statistics.median(s["peak_kb"] for s in samples[side])
        print(
            f"{megabytes:>4} {op:<19} {side:<10} {files[side] / 1e6:>8.1f} "
            f"{statistics.median(seconds):>9.3f} {_spread(seconds):>13} {cpu:>7.3f} "
            f"{peak / 1024:>8.0f} {statistics.median(seconds) / base_s:>6.2f}x "
            f"{cpu / base_cpu:>5.2f}x {peak / base_kb:>6.2f}x"
        )
    sys.stdout.flush()


def _summary(
    rows: list[tuple[int, str, dict[str, list[dict[str, Any]]]]], idle: float, rounds: int
) -> None:
    print(f"\nidle worker peak (interpreter, imports, Governance): {idle / 1024:.0f} MB")
    print(f"{rounds} rounds, medians; fresh interpreter per measurement; ABBA order")
    for op in sorted({row_op for _, row_op, _ in rows}, key=lambda o: (o.split()[1], o)):
        times, peaks = [], []
        for megabytes, row_op, samples in rows:
            if row_op != op:
                continue
            med = {
                side: [
                    statistics.median(s[what] for s in samples[side])
                    for what in ("seconds", "cpu", "peak_kb")
                ]
                for side in SIDES
            }
            wall, cpu, peak = (med["encrypted"][i] / med["plaintext"][i] for i in range(3))
            times.append(f"{megabytes} MB {wall:.2f}x (cpu {cpu:.2f}x)")
            peaks.append(f"{megabytes} MB {peak:.2f}x")
        print(f"target: encrypted {op} <= 2x plaintext time:  " + ", ".join(times))
        print(f"target: encrypted {op} <= 1.3x plaintext peak RSS: " + ", ".join(peaks))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
