"""Workspace resolution and agent paths (reference-behaviour A1, A7; fixes D1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from governed_memory import InvalidAgentNameError, memory_md_path, resolve_workspace
from governed_memory._base._workspace import agent_dir


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_default_workspace_is_agent_workspace_under_the_current_folder(tmp_path: Path) -> None:
    assert resolve_workspace() == Path("agent_workspace")
    assert memory_md_path("QuantAgent").resolve() == (
        tmp_path / "agent_workspace" / "agents" / "QuantAgent" / "MEMORY.md"
    )


def test_workspace_dir_is_read_each_time_a_path_is_resolved(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "one"))
    assert memory_md_path("A") == tmp_path / "one" / "agents" / "A" / "MEMORY.md"
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "two"))
    assert memory_md_path("A") == tmp_path / "two" / "agents" / "A" / "MEMORY.md"
    monkeypatch.delenv("WORKSPACE_DIR")
    assert resolve_workspace() == Path("agent_workspace")


def test_resolving_never_writes_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    resolve_workspace()
    memory_md_path("A", tmp_path)
    assert "WORKSPACE_DIR" not in os.environ


def test_empty_workspace_dir_falls_back_to_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKSPACE_DIR", "")
    assert resolve_workspace() == Path("agent_workspace")


def test_explicit_workspace_and_environ_mapping_win(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WORKSPACE_DIR", "/from/env")
    assert resolve_workspace(tmp_path) == tmp_path
    assert resolve_workspace(environ={"WORKSPACE_DIR": "/other"}) == Path("/other")
    assert resolve_workspace(environ={}) == Path("agent_workspace")


def test_memory_path_and_agent_dir_layout(workspace: Path) -> None:
    assert agent_dir("QuantAgent", workspace) == workspace / "agents" / "QuantAgent"
    assert memory_md_path("QuantAgent", workspace) == (
        workspace / "agents" / "QuantAgent" / "MEMORY.md"
    )


def test_resolving_a_path_creates_nothing(workspace: Path) -> None:
    memory_md_path("QuantAgent", workspace)
    assert _tree(workspace) == set()


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        pytest.param("", "is empty", id="empty"),
        pytest.param("../escaped", "path separator", id="dotdot-slash"),
        pytest.param("..", "relative path component", id="dotdot"),
        pytest.param(".", "relative path component", id="dot"),
        pytest.param("/tmp/abs", "absolute path", id="absolute"),
        pytest.param("a/b", "path separator", id="separator"),
        pytest.param("a\x00b", "NUL", id="nul"),
        pytest.param("x" * 256, "over the 255-byte limit", id="too-long"),
    ],
)
def test_unsafe_agent_names_are_refused_and_nothing_is_created(
    workspace: Path, tmp_path: Path, name: str, rule: str
) -> None:
    """D1: the reference joins the name raw; `../x` or `/abs` write outside the workspace."""
    before = _tree(tmp_path)
    with pytest.raises(InvalidAgentNameError, match=rule):
        memory_md_path(name, workspace)
    assert _tree(tmp_path) == before
