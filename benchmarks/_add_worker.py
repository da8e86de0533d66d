"""Benchmark worker: times Conversation.add() of one implementation.

Run by bench_add.py, once per implementation, in that implementation's own
interpreter (the reference, swarms 16.0.3, lives in a separate virtual
environment because its pins clash with ours). Both workers run this same
file, so the timed loop is identical.

Protocol: one JSON request per stdin line, one JSON reply per stdout line.
    {"workspace": str, "adds": int, "size": int, "prefill": int, "seed": int}
    -> {"seconds": float, "adds": int, "blocks": int}

Only the ``adds`` calls after the prefill are timed. ``blocks`` counts the
message blocks in the resulting MEMORY.md (a sanity check that every add was
written through).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

IMPL = sys.argv[1] if len(sys.argv) > 1 else "ours"
AGENT = "BenchAgent"
ROLES = ("User", "BenchAgent")
FILLER = (
    "The quarterly reconciliation found three unmatched transfers between the "
    "settlement account and the clearing ledger; the agent traced two to a "
    "timezone cut-off and flagged the third for review by operations. "
)


def message(i: int, size: int) -> str:
    """A realistic ASCII message of exactly ``size`` bytes, distinct per ``i``."""
    head = f"[{i}] "
    body = (FILLER * (size // len(FILLER) + 2))[: max(0, size - len(head))]
    return (head + body)[:size]


def make_conversation(workspace: str) -> Any:
    path = os.path.join(workspace, "agents", AGENT, "MEMORY.md")
    if IMPL == "reference":
        from swarms.structs.conversation import Conversation as RefConversation

        return RefConversation(name=f"{AGENT}_conversation", time_enabled=True, memory_md_path=path)
    from governed_memory import Conversation

    return Conversation(name=f"{AGENT}_conversation", time_enabled=True, memory_md_path=path)


def run(request: dict[str, Any]) -> dict[str, Any]:
    workspace = request["workspace"]
    size, adds, prefill = request["size"], request["adds"], request["prefill"]
    conversation = make_conversation(workspace)
    add = conversation.add
    for i in range(prefill):
        add(ROLES[i % 2], message(i, size))
    batch = [(ROLES[i % 2], message(i, size)) for i in range(prefill, prefill + adds)]
    start = time.perf_counter()
    for role, text in batch:
        add(role, text)
    seconds = time.perf_counter() - start
    path = os.path.join(workspace, "agents", AGENT, "MEMORY.md")
    with open(path, encoding="utf-8") as handle:
        blocks = sum(1 for line in handle if line.startswith("### "))
    del conversation, add
    return {"seconds": seconds, "adds": adds, "blocks": blocks}


def main() -> None:
    # Import the implementation before the first request, so import time is
    # never inside a timed loop, and announce readiness.
    if IMPL == "reference":
        from importlib.metadata import version

        import swarms.structs.conversation  # noqa: F401

        label = f"swarms {version('swarms')}"
    else:
        import governed_memory

        label = f"governed_memory {governed_memory.__version__}"
    print(json.dumps({"ready": label}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
