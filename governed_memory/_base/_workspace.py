"""Where an agent's memory lives on disk (reference-behaviour A1, A7).

``<workspace>/agents/<agent_name>/MEMORY.md`` with archives in ``archive/``
beside it. The workspace is ``$WORKSPACE_DIR`` read when a path is resolved
(never cached, never overwritten), else ``./agent_workspace``. Governance data
(consent, holds, keys, audit) lives in ``<workspace>/.governed_memory/``, which
is only created when a policy needs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ._names import validate_agent_name

__all__ = [
    "AGENTS_DIR",
    "ARCHIVE_DIR",
    "DEFAULT_WORKSPACE",
    "GOVERNANCE_DIR",
    "MEMORY_FILE",
    "agent_dir",
    "memory_md_path",
    "resolve_workspace",
]

DEFAULT_WORKSPACE = "agent_workspace"
AGENTS_DIR = "agents"
ARCHIVE_DIR = "archive"
MEMORY_FILE = "MEMORY.md"
GOVERNANCE_DIR = ".governed_memory"


def resolve_workspace(
    workspace: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Return the workspace folder: ``workspace``, else ``$WORKSPACE_DIR``, else ``./agent_workspace``.

    ``environ`` defaults to ``os.environ`` read at call time, as the reference
    does; pass a mapping to resolve against another environment.
    """
    if workspace is not None and str(workspace) != "":
        return Path(workspace)
    env = os.environ if environ is None else environ
    return Path(env.get("WORKSPACE_DIR") or DEFAULT_WORKSPACE)


def agent_dir(agent_name: str, workspace: str | os.PathLike[str] | None = None) -> Path:
    """Return ``<workspace>/agents/<agent_name>`` after validating the name."""
    return resolve_workspace(workspace) / AGENTS_DIR / validate_agent_name(agent_name)


def memory_md_path(agent_name: str, workspace: str | os.PathLike[str] | None = None) -> Path:
    """Return the MEMORY.md path of ``agent_name`` (nothing is created).

    Raises:
        InvalidAgentNameError: when the name would escape ``<workspace>/agents/``.
    """
    return agent_dir(agent_name, workspace) / MEMORY_FILE
