"""Helpers shared by the subject-request tests (export, erasure, CLI, state machine)."""

from __future__ import annotations

from pathlib import Path

from governed_memory import Conversation, FixedClock, memory_md_path
from governed_memory._governance import Governance
from governed_memory._policy import DEFAULT_POLICY, Policy


def governance(workspace: Path, clock: FixedClock, policy: Policy = DEFAULT_POLICY) -> Governance:
    """A Governance on ``workspace`` with a fixed clock (no environment)."""
    return Governance(workspace=workspace, policy=policy, clock=clock)


def conversation(gov: Governance, agent: str, **kwargs: object) -> Conversation:
    """A governed Conversation of ``agent``."""
    return Conversation(
        name=f"{agent}_conv",
        memory_md_path=memory_md_path(agent, gov.workspace),
        governance=gov,
        **kwargs,  # type: ignore[arg-type]
    )


def all_bytes(root: Path) -> dict[Path, bytes]:
    """Every regular file under ``root`` (hidden ones too) and its bytes."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def readable_text(gov: Governance) -> str:
    """Everything readable under the workspace: raw bytes, plus each store's decrypted text."""
    parts = [b.decode("utf-8", "replace") for b in all_bytes(gov.workspace).values()]
    agents = gov.workspace / "agents"
    if agents.is_dir():
        for folder in sorted(agents.iterdir()):
            store = gov.store_factory(folder / "MEMORY.md", lambda: "")
            try:
                parts.append(store.read_memory() or "")
                parts.extend(store.read_archive(p) for p in store.list_archives())
            finally:
                store.close()
    return "\n".join(parts)
