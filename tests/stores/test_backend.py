"""FileMemoryBackend: which entries of <workspace>/agents/ are agents."""

from __future__ import annotations

from pathlib import Path

from governed_memory import PlaintextAgentStore
from governed_memory._stores import FileMemoryBackend


def test_links_files_temporaries_and_invalid_names_are_not_agents(
    workspace: Path, tmp_path: Path
) -> None:
    agents = workspace / "agents"
    for name in ("Real", ".hidden", "..."):
        (agents / name).mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (agents / "Evil").symlink_to(outside)  # would lead out of the workspace
    (agents / "notes.txt").write_text("a file, not an agent")
    (agents / ".gm-tmp-0123").mkdir()  # the library's own temporary entry
    (agents / "trailing ").mkdir()  # not a valid agent name
    backend = FileMemoryBackend(workspace, PlaintextAgentStore)
    assert backend.agents() == ["...", ".hidden", "Real"]
    assert backend.has_agent("Real") and not backend.has_agent("Evil")


def test_a_missing_workspace_has_no_agents(tmp_path: Path) -> None:
    assert FileMemoryBackend(tmp_path / "nowhere", PlaintextAgentStore).agents() == []
