"""Sealed governance records: what sealing costs the consent, hold and erasure registries.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_sealing.py
    python benchmarks/bench_sealing.py --records 10000 --rounds 5

Measured in one process, plaintext and sealed rounds interleaved so both see
the same machine conditions (medians of ``--rounds``):

1. consent grant: ``ConsentRegistry.record`` (flock, append one line, fsync);
   sealing adds one AES-256-GCM encryption per line;
2. consent gate: ``is_granted`` on an unchanged log (what every governed
   ``add()`` pays): one ``stat`` in both forms;
3. consent log load: a new registry reading a log of ``--records`` lines (a
   process start, or a log rewritten by a purge): sealing adds one decryption
   per line;
4. hold placed: ``HoldRegistry.place`` (read, replace the whole file atomically);
5. tombstone written and read back: ``TombstoneStore.write`` + ``get``.

Nothing is asserted; the script prints a table. No network.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from governed_memory._crypto import Keyring, LocalKeyProvider
from governed_memory._crypto._sealing import RecordSealing
from governed_memory._records._consent import ConsentAction, ConsentRegistry
from governed_memory._records._holds import HoldRegistry
from governed_memory._subjects import ErasureScope, Tombstone, TombstoneStore

MASTER = LocalKeyProvider(bytes(range(32)))
AT = dt.datetime(2026, 11, 30, 10, 0).astimezone()


def _sealing(root: Path, sealed: bool) -> RecordSealing | None:
    return RecordSealing(Keyring(root / "keyring", MASTER)) if sealed else None


def _grants(registry: ConsentRegistry, n: int, offset: int = 0) -> None:
    for i in range(offset, offset + n):
        registry.record(
            registry.make_event(
                f"customer-{i:06d}",
                "persist",
                ConsentAction.GRANT,
                at=AT,
                actor="dpo@bank.example",
                policy_id="regulated",
                policy_version="1",
            )
        )


def grant(root: Path, sealed: bool, n: int) -> float:
    """Grants per second (each fsynced)."""
    registry = ConsentRegistry(root / "gov", sealing=_sealing(root, sealed))
    _grants(registry, 1)  # keyring and purpose key created outside the timing
    count = min(n, 500)
    start = time.perf_counter()
    _grants(registry, count, offset=1)
    return count / (time.perf_counter() - start)


def gate(root: Path, sealed: bool, n: int) -> float:
    """Gate checks per second on an unchanged log."""
    registry = ConsentRegistry(root / "gov", sealing=_sealing(root, sealed))
    _grants(registry, 10)
    registry.is_granted("customer-000001", "persist")
    start = time.perf_counter()
    for _ in range(n):
        registry.is_granted("customer-000001", "persist")
    return n / (time.perf_counter() - start)


def load(root: Path, sealed: bool, n: int) -> float:
    """Seconds for a fresh registry to read a log of ``n`` records."""
    writer = ConsentRegistry(root / "gov", sealing=_sealing(root, sealed))
    _grants(writer, n)
    reader = ConsentRegistry(root / "gov", sealing=_sealing(root, sealed))
    start = time.perf_counter()
    assert len(reader.subjects()) == n
    return time.perf_counter() - start


def hold(root: Path, sealed: bool, n: int) -> float:
    """Holds placed per second (each a whole-file atomic replace)."""
    registry = HoldRegistry(root / "gov", sealing=_sealing(root, sealed))
    registry.place(agent="warmup", reason="r", actor="legal")
    count = min(n, 200)
    start = time.perf_counter()
    for i in range(count):
        registry.place(subject=f"customer-{i}", reason="litigation 2026-114", actor="legal")
    return count / (time.perf_counter() - start)


def tombstone(root: Path, sealed: bool, n: int) -> float:
    """Tombstones written and read back per second."""
    store = TombstoneStore(root / "gov", sealing=_sealing(root, sealed))
    count = min(n, 300)
    scope = ErasureScope(subject="customer-1")
    store.write(Tombstone("warmup", scope, "t", "dpo", "ticket", "p", "1", state="complete"))
    start = time.perf_counter()
    for i in range(count):
        erasure_id = f"e{i:06d}"
        store.write(Tombstone(erasure_id, scope, "t", "dpo", "ticket", "p", "1", state="complete"))
        assert store.get(erasure_id) is not None
    return count / (time.perf_counter() - start)


CASES: list[tuple[str, Callable[[Path, bool, int], float], str]] = [
    ("consent grant (fsynced)", grant, "grants/s"),
    ("consent gate, unchanged log", gate, "checks/s"),
    ("consent log load", load, "s"),
    ("hold placed", hold, "holds/s"),
    ("tombstone write + read", tombstone, "tombstones/s"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="consent log length")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {platform.platform()}")
    print(f"{args.records} consent records for the load; medians of {args.rounds} rounds\n")
    rows = []
    for name, case, unit in CASES:
        results: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for sealed in (False, True):
                root = Path(tempfile.mkdtemp(prefix="gm-bench-sealing-"))
                try:
                    n = args.records if case is not gate else 100_000
                    results[sealed].append(case(root, sealed, n))
                finally:
                    shutil.rmtree(root)
        plain, sealed_ = (statistics.median(results[s]) for s in (False, True))
        cost = sealed_ / plain if unit == "s" else plain / sealed_  # time per operation
        rows.append((name, _show(plain, unit), _show(sealed_, unit), cost))
    print(f"| {'measurement':<28} | {'plaintext':>17} | {'sealed':>17} | time, sealed / plain |")
    print(f"|{'-' * 30}|{'-' * 19}|{'-' * 19}|{'-' * 22}|")
    for name, plain_s, sealed_s, cost in rows:
        print(f"| {name:<28} | {plain_s:>17} | {sealed_s:>17} | {cost:>19.2f}x |")


def _show(value: float, unit: str) -> str:
    return f"{value:.3f} s" if unit == "s" else f"{value:,.0f} {unit}"


if __name__ == "__main__":
    main()
