"""What auditing costs per Conversation.add(), and how fast a log verifies.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_audit.py [--adds 2000] [--rounds 5] [--verify-entries 50000]

Per add (400-byte ASCII messages, MEMORY.md write-through, no fsync of
MEMORY.md per add, as in the reference), median over ``--rounds`` rounds, each
on a fresh workspace:

* ``no governance``: Conversation(governance=None), the default mode;
* ``default policy``: a Governance with the built-in default policy (no
  audit, no TracerProvider: the audit sink is the no-op one, no span is made);
* ``spans only``: a TracerProvider passed (an SDK provider whose processor
  drops spans), audit disabled: one span per add, no file;
* ``audit, no fsync``: audit enabled with the log's fdatasync turned off, to
  separate the cost of building, hashing and MACing an entry from the disk;
* ``audit``: audit enabled as shipped: each entry fdatasynced before add()
  returns (this is dominated by the disk's sync latency).

Wall-clock time per add; adds/s is 1 / that. Then: ``audit verify`` speed
over a log of ``--verify-entries`` entries. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from governed_memory import Conversation, Governance, Policy, Settings, memory_md_path
from governed_memory._audit import AuditKey, AuditLog, AuditTrail, audit_log_dir, verify_log

MESSAGE = ("x" * 399) + "."
KEY_TEXT = "ab" * 32
AUDITED = Policy.model_validate({"audit": {"enabled": True}})


class _Drop(SpanExporter):
    def export(self, spans: object) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    return provider


def _governance(workspace: Path, mode: str) -> Governance | None:
    if mode == "no governance":
        return None
    if mode == "default policy":
        return Governance(workspace=workspace, policy=Policy(), settings=Settings())
    if mode == "spans only":
        return Governance(
            workspace=workspace, policy=Policy(), settings=Settings(), tracer_provider=_provider()
        )
    settings = Settings(audit_key=KEY_TEXT)
    if mode == "audit, no fsync":
        key = AuditKey.from_text(KEY_TEXT)
        log = AuditLog(audit_log_dir(AUDITED, workspace), key, fsync=False)
        trail = AuditTrail(key=key, log=log, tracer_provider=_provider())
        return Governance(workspace=workspace, policy=AUDITED, settings=settings, audit=trail)
    return Governance(
        workspace=workspace, policy=AUDITED, settings=settings, tracer_provider=_provider()
    )


def time_adds(mode: str, adds: int) -> float:
    """Seconds per add in ``mode`` on a fresh workspace."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        conv = Conversation(
            name="bench",
            time_enabled=True,
            memory_md_path=memory_md_path("Bench", workspace),
            governance=_governance(workspace, mode),
        )
        for _ in range(20):  # warm up: open descriptors, first segment
            conv.add("User", MESSAGE)
        start = time.perf_counter()
        for _ in range(adds):
            conv.add("User", MESSAGE)
        return (time.perf_counter() - start) / adds


def time_verify(entries: int) -> tuple[float, int]:
    key = AuditKey.from_text(KEY_TEXT)
    with tempfile.TemporaryDirectory() as tmp:
        log = AuditLog(Path(tmp), key, fsync=False)
        attrs = {
            "outcome": "ok",
            "agent.hash": key.pseudonym("agent", "Bench"),
            "subject.hash": key.pseudonym("subject", "s-1"),
            "policy.id": "regulated",
            "policy.version": "1",
            "purpose": "persist",
            "decision": "persist",
            "bytes": 460,
        }
        for _ in range(entries):
            log.append("persist", attrs)
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        start = time.perf_counter()
        report = verify_log(Path(tmp), key)
        elapsed = time.perf_counter() - start
        assert report.ok
        return elapsed, size


def median(fn: Callable[[], float], rounds: int) -> float:
    return statistics.median(fn() for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adds", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--verify-entries", type=int, default=50_000)
    args = parser.parse_args()

    modes = ["no governance", "default policy", "spans only", "audit, no fsync", "audit"]
    print(f"Conversation.add() with auditing ({args.adds} adds x {args.rounds} rounds, median)")
    print(f"{'mode':<18} {'us/add':>10} {'adds/s':>10} {'vs no governance':>18}")
    base = None
    for mode in modes:
        adds = args.adds if mode != "audit" else max(200, args.adds // 10)
        seconds = median(lambda m=mode, n=adds: time_adds(m, n), args.rounds)
        base = base or seconds
        print(f"{mode:<18} {seconds * 1e6:>10.1f} {1 / seconds:>10.0f} {seconds / base:>17.2f}x")
    elapsed, size = time_verify(args.verify_entries)
    print()
    print(
        f"audit verify: {args.verify_entries} entries ({size / 1e6:.1f} MB) in {elapsed:.2f} s "
        f"= {args.verify_entries / elapsed:,.0f} entries/s"
    )
    print(f"(at {dt.datetime.now().isoformat(timespec='seconds')})")


if __name__ == "__main__":
    main()
