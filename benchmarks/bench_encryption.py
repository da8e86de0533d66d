"""Encryption at rest: add() throughput and preload time, encrypted next to plaintext.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_encryption.py
    python benchmarks/bench_encryption.py --adds 20000 --rounds 5 --preload-mb 50

What is measured, in one process, with the rounds interleaved (plaintext,
encrypted, plaintext, ...) so both sides see the same machine conditions:

1. ``Conversation.add(role, text)`` with ``time_enabled=True`` and 400-byte
   messages: default mode (plaintext store, no governance) against the
   encrypted store (AES-256-GCM frame per add, data keys wrapped by a local
   master key), directly and through a Governance whose policy enables
   encryption (next to a Governance without encryption, which shows what the
   policy layer itself costs). Median messages per second. Target: encrypted
   >= 50% of default mode.
2. Preload: constructing a Conversation over an existing memory of
   ``--preload-mb`` megabytes (``--preload-message`` bytes a message, 1 KB by
   default; one frame each): read, authenticate and decrypt
   every frame, then build the preload message. Median seconds. Target:
   encrypted within 2x of plaintext.

Nothing is asserted; the script prints a table. No network.
"""

from __future__ import annotations

import argparse
import gc
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from governed_memory import Conversation, memory_md_path
from governed_memory._crypto import Keyring, LocalKeyProvider
from governed_memory._crypto._frames import KIND_MEMORY
from governed_memory._format._records import render_block, render_header
from governed_memory._governance._root import Governance
from governed_memory._policy._model import Policy
from governed_memory._stores._encrypted import EncryptedAgentStore, encrypted_store_factory

MASTER = LocalKeyProvider(bytes(range(32)))
ENCRYPTED = Policy.model_validate({"encryption": {"enabled": True}})
Factory = Callable[[Path], dict[str, Any]]


def _plain(root: Path) -> dict[str, Any]:
    return {}


def _encrypted(root: Path) -> dict[str, Any]:
    return {"store_factory": encrypted_store_factory(Keyring(root / "keyring", MASTER))}


def _governed(root: Path) -> dict[str, Any]:
    return {"governance": Governance(workspace=root, policy=ENCRYPTED, key_provider=MASTER)}


def _governed_plain(root: Path) -> dict[str, Any]:
    return {"governance": Governance(workspace=root, policy=Policy())}


def add_rate(scratch: Path, extra: Factory, adds: int, size: int) -> float:
    root = Path(tempfile.mkdtemp(dir=scratch))
    try:
        conv = Conversation(
            name="bench", time_enabled=True, memory_md_path=memory_md_path("A", root), **extra(root)
        )
        text = "x" * size
        gc.collect()
        start = time.perf_counter()
        for _ in range(adds):
            conv.add("User", text)
        elapsed = time.perf_counter() - start
        assert conv.store is not None
        conv.store.close()
        return adds / elapsed
    finally:
        shutil.rmtree(root)


def build_memory(root: Path, megabytes: int, message: int = 1000) -> tuple[Path, Path]:
    """A plaintext and an encrypted agent holding the same ``megabytes`` of memory."""
    header = render_header("bench_conversation", "2026-11-30T10:00:00")
    body = "y" * message
    count = megabytes * 1_000_000 // (len(body) + 60)
    text = header + "".join(
        render_block("User", f"2026-11-30T10:00:00.{n % 1_000_000:06d}", f"{n} {body}")
        for n in range(count)
    )
    plain = memory_md_path("Plain", root)
    plain.parent.mkdir(parents=True)
    plain.write_text(text, encoding="utf-8")
    store = EncryptedAgentStore(
        memory_md_path("Enc", root), lambda: header, keyring=Keyring(root / "keyring", MASTER)
    )
    store.ensure()
    # One frame per message, exactly what that many add() calls would have written.
    store.memory_path.write_bytes(
        store.codec.encode_text(KIND_MEMORY, store.memory_path.name, text)
    )
    store.close()
    return plain, memory_md_path("Enc", root)


def preload_time(path: Path, extra: dict[str, Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    conv = Conversation(name="bench", memory_md_path=path, **extra)
    elapsed = time.perf_counter() - start
    assert conv.conversation_history, "nothing was preloaded"
    assert conv.store is not None
    conv.store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--adds", type=int, default=20_000, help="messages per add() round")
    parser.add_argument("--size", type=int, default=400, help="bytes per message")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement")
    parser.add_argument("--preload-mb", type=int, default=50, help="size of the preloaded memory")
    parser.add_argument(
        "--preload-message", type=int, default=1000, help="bytes of text per preloaded message"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="scratch folder (default: a temp dir)"
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gm-bench-enc-", dir=args.dir))
    try:
        print(f"python {platform.python_version()} on {platform.platform()}; scratch {scratch}")
        sides: dict[str, Factory] = {
            "plaintext (default mode)": _plain,
            "encrypted store": _encrypted,
            "plaintext, via Governance": _governed_plain,
            "encrypted, via Governance": _governed,
        }
        rates: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, extra in sides.items():
                rates[name].append(add_rate(scratch, extra, args.adds, args.size))

        print(
            f"building a {args.preload_mb} MB memory (plaintext and encrypted)...", file=sys.stderr
        )
        plain, enc = build_memory(scratch / "preload", args.preload_mb, args.preload_message)
        enc_extra = _encrypted(scratch / "preload")
        sizes = {
            "plaintext": plain.stat().st_size,
            "encrypted": enc.with_name("MEMORY.md.gmenc").stat().st_size,
        }
        loads: dict[str, list[float]] = {"plaintext": [], "encrypted": []}
        for _ in range(args.rounds):
            loads["plaintext"].append(preload_time(plain, {}))
            loads["encrypted"].append(preload_time(enc, enc_extra))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    base = statistics.median(rates["plaintext (default mode)"])
    print()
    print(
        f"add() throughput, {args.size}-byte messages, {args.adds} adds x {args.rounds} rounds (median)"
    )
    print(f"{'store':<28}{'msg/s':>10}{'us/add':>9}{'vs default':>12}")
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"{name:<28}{rate:>10,.0f}{1e6 / rate:>9.1f}{rate / base:>11.0%}")
    print("target: encrypted >= 50% of default mode")
    print()
    plain_s, enc_s = statistics.median(loads["plaintext"]), statistics.median(loads["encrypted"])
    print(
        f"preload of a {args.preload_mb} MB memory ({args.preload_message}-byte messages), "
        f"{args.rounds} rounds (median)"
    )
    print(f"{'store':<28}{'file MB':>10}{'seconds':>9}{'vs plain':>12}")
    print(f"{'plaintext':<28}{sizes['plaintext'] / 1e6:>10.1f}{plain_s:>9.3f}{1:>11.2f}x")
    print(
        f"{'encrypted':<28}{sizes['encrypted'] / 1e6:>10.1f}{enc_s:>9.3f}{enc_s / plain_s:>11.2f}x"
    )
    print("target: encrypted within 2x of plaintext")


if __name__ == "__main__":
    main()
