"""Helpers shared by the subject-request tests (export, erasure, CLI, state machine)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from governed_memory import Conversation, FixedClock, Governance, memory_md_path
from governed_memory._policy._model import DEFAULT_POLICY, Policy

STORE_KINDS = ("plaintext", "encrypted")


def subject_block(text: str, subject: str | None = None, lineage: tuple[str, ...] = ()) -> str:
    """A record of ``subject`` at a fixed time; with ``lineage``, a System summary derived from it."""
    from governed_memory._format import LINEAGE_KEY, render_block

    meta: dict[str, object] = {}
    if subject is not None:
        meta["subject"] = subject
    if lineage:
        meta[LINEAGE_KEY] = sorted(lineage)
    role = "System" if lineage else "Human"
    return render_block(role, "2026-11-30T10:00:00", text, meta or None)


def fail_nth_rewrite(monkeypatch: Any, nth: int, error: Exception) -> None:
    """Make the ``nth`` ``rewrite_memory`` of the file stores raise ``error`` (a disk failing)."""
    from governed_memory._stores import AgentFolderStore

    real = AgentFolderStore.rewrite_memory
    calls = {"n": 0}

    def flaky(self: AgentFolderStore, text: str) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            raise error
        real(self, text)

    monkeypatch.setattr(AgentFolderStore, "rewrite_memory", flaky)


def governance(
    workspace: Path, clock: FixedClock, policy: Policy = DEFAULT_POLICY, *, kind: str = "plaintext"
) -> Governance:
    """A Governance on ``workspace`` with a fixed clock (no environment).

    ``kind="encrypted"`` turns encryption on (same policy otherwise) with an
    in-memory master key, so the encrypted store and crypto-shredding run.
    """
    if kind == "encrypted":
        from governed_memory._crypto._providers import InMemoryKeyProvider

        data = policy.model_dump(exclude={"source"}, mode="json")
        data["encryption"] = {"enabled": True}
        encrypted = Policy.model_validate(data)
        return Governance(
            workspace=workspace, policy=encrypted, clock=clock, key_provider=InMemoryKeyProvider()
        )
    return Governance(workspace=workspace, policy=policy, clock=clock)


def memory_text(gov: Governance, agent: str) -> str:
    """An agent's active memory as text, read through its store (decrypted)."""
    store = gov.store_factory(gov.workspace / "agents" / agent / "MEMORY.md", lambda: "")
    try:
        return store.read_memory() or ""
    finally:
        store.close()


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


def killed_at_call(function: str, nth: int, action: Callable[[], object]) -> bool:
    """Fork; the child runs ``action`` and SIGKILLs itself at the ``nth`` call of ``os.<function>``.

    Returns whether the child died by the signal (False: it finished first).
    """
    import os
    import signal

    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            real = getattr(os, function)
            calls = [0]

            def dying(*args: object, **kwargs: object) -> object:
                calls[0] += 1
                if calls[0] == nth:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(*args, **kwargs)

            setattr(os, function, dying)
            action()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
