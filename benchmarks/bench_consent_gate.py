"""Cost of the consent gate on Conversation.add(), and of a withdrawal's visibility.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_consent_gate.py [--adds 2000] [--rounds 5] [--subjects 10000]

What is measured, per add (400-byte ASCII messages, MEMORY.md write-through,
no fsync per add, as in the reference):

* ``no governance``: Conversation(governance=None), the default mode;
* ``default policy``: a Governance with the built-in default policy (the gate
  runs but needs no consent, so it reads nothing);
* ``consent granted``: a policy requiring ``persist`` consent, consent
  granted: one ``stat`` of the consent log per add;
* ``consent granted, big log``: the same with ``--subjects`` other subjects'
  records in the log (the log is read once; later adds still cost one stat);
* ``memory only``: consent missing: nothing reaches disk.

Then: how long after another registry appends a withdrawal the live
registry sees it (one incremental read of the new bytes).

Times are CPU time of this process (user + system, ``time.process_time``),
so other load on the machine does not inflate them; adds/s is 1 / that.
Median over ``--rounds`` rounds, each on a fresh workspace. Nothing touches
the network.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import statistics
import tempfile
import time
from pathlib import Path

from governed_memory import (
    ConsentRegistry,
    Conversation,
    Governance,
    Policy,
    Settings,
    memory_md_path,
)
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._records._consent import ConsentAction

MESSAGE = ("x" * 399) + "."
NEEDS_CONSENT = Policy.model_validate({"consent": {"required_for": ["persist"]}})


def fill_log(workspace: Path, subjects: int) -> None:
    registry = ConsentRegistry(workspace / GOVERNANCE_DIR)
    for i in range(subjects):
        registry.record(
            registry.make_event(
                f"other-{i}",
                "persist",
                ConsentAction.GRANT,
                at=dt.datetime(2026, 1, 1),
                actor="bench",
                policy_id="bench",
                policy_version="1",
            )
        )


def scenario(name: str, workspace: Path, subjects: int) -> Conversation:
    path = memory_md_path("Bench", workspace)
    if name == "no governance":
        return Conversation(memory_md_path=path, time_enabled=True, subject_id="alice")
    if name == "default policy":
        gov = Governance(workspace=workspace, settings=Settings())
    else:
        gov = Governance(workspace=workspace, policy=NEEDS_CONSENT, settings=Settings())
        if name.startswith("consent granted"):
            if name.endswith("big log"):
                fill_log(workspace, subjects)
            gov.grant("alice", "persist", actor="bench")
    return Conversation(memory_md_path=path, time_enabled=True, governance=gov, subject_id="alice")


def time_adds(conversation: Conversation, adds: int) -> float:
    conversation.add("Human", MESSAGE)  # first write opens descriptors and reads the log
    start = time.process_time()
    for _ in range(adds):
        conversation.add("Human", MESSAGE)
    return (time.process_time() - start) / adds


def withdrawal_latency(rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / GOVERNANCE_DIR
            live, other = ConsentRegistry(folder), ConsentRegistry(folder)

            def event(action: ConsentAction, registry: ConsentRegistry = other) -> None:
                registry.record(
                    registry.make_event(
                        "alice",
                        "persist",
                        action,
                        at=dt.datetime(2026, 1, 1),
                        actor="bench",
                        policy_id="bench",
                        policy_version="1",
                    )
                )

            event(ConsentAction.GRANT)
            assert live.is_granted("alice", "persist")
            event(ConsentAction.WITHDRAW)
            start = time.process_time()
            assert not live.is_granted("alice", "persist")
            samples.append(time.process_time() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adds", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--subjects", type=int, default=10000)
    args = parser.parse_args()
    logging.getLogger("governed_memory").setLevel(logging.ERROR)  # the memory-only warning

    names = [
        "no governance",
        "default policy",
        "consent granted",
        "consent granted, big log",
        "memory only",
    ]
    results: dict[str, float] = {}
    for name in names:
        samples = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                samples.append(time_adds(scenario(name, Path(tmp), args.subjects), args.adds))
        results[name] = statistics.median(samples)

    base = results["no governance"]
    print(f"Conversation.add(), {args.adds} adds x {args.rounds} rounds, median")
    print(f"{'scenario':<28} {'cpu us/add':>10} {'adds/s':>9} {'vs default mode':>16}")
    for name in names:
        per = results[name]
        print(f"{name:<28} {per * 1e6:10.1f} {1 / per:9.0f} {per / base:15.2f}x")
    latency = withdrawal_latency(args.rounds)
    print(f"\nwithdrawal seen by a live registry: {latency * 1e6:.0f} cpu us (median)")


if __name__ == "__main__":
    main()
