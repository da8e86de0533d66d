"""Workspaces with one broken agent (a damaged file, a symbolic link), for the failure tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from subjects_helpers import conversation

from governed_memory import FixedClock, Governance
from governed_memory._policy._model import DEFAULT_POLICY, Policy
from governed_memory._subjects import TombstoneStore
from governed_memory.testing import RecordingAuditSink


def gov_of(
    workspace: Path, clock: FixedClock, kind: str, audit: RecordingAuditSink | None = None
) -> Governance:
    policy = DEFAULT_POLICY
    provider = None
    if kind == "encrypted":
        from governed_memory._crypto._providers import InMemoryKeyProvider

        data = policy.model_dump(exclude={"source"}, mode="json")
        data["encryption"] = {"enabled": True}
        policy = Policy.model_validate(data)
        provider = InMemoryKeyProvider()
    return Governance(
        workspace=workspace, policy=policy, clock=clock, key_provider=provider, audit=audit
    )


def populate(gov: Governance, agents: tuple[str, ...] = ("A", "B", "C")) -> None:
    for agent in agents:
        conv = conversation(gov, agent)
        conv.add("Human", f"alice secret {agent}", subject_id="alice")
        conv.add("Human", f"bob note {agent}", subject_id="bob")
        conv.store.close()  # type: ignore[union-attr]


def memory_file(gov: Governance, agent: str) -> Path:
    folder = gov.workspace / "agents" / agent
    encrypted = folder / "MEMORY.md.gmenc"
    return encrypted if encrypted.exists() else folder / "MEMORY.md"


def damage(gov: Governance, agent: str) -> tuple[Path, bytes]:
    """One byte of the agent's memory file changed so it cannot be read; (path, good bytes)."""
    path = memory_file(gov, agent)
    good = path.read_bytes()
    data = bytearray(good)
    if path.suffix == ".gmenc":
        data[60] ^= 1  # inside the first frame: fails authentication
    else:
        data[len(data) // 2] = 0xFF  # never valid UTF-8
    path.write_bytes(bytes(data))
    return path, good


def tombs(gov: Governance) -> TombstoneStore:
    return TombstoneStore(gov.governance_dir, sealing=gov.sealing)


def source(gov: Governance, agent: str) -> str:
    return memory_file(gov, agent).relative_to(gov.workspace).as_posix()


def link_agent(gov: Governance, tmp_path: Path, name: str = "Evil") -> Path:
    """Move agent ``name``'s folder outside the workspace and link it back in."""
    outside = tmp_path / "outside" / name
    outside.parent.mkdir()
    folder = gov.workspace / "agents" / name
    shutil.move(folder, outside)
    folder.symlink_to(outside, target_is_directory=True)
    return outside
