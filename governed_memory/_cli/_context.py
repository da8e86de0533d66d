"""What every CLI command receives: the global options, resolved lazily."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._workspace import resolve_workspace

__all__ = ["CliContext"]


@dataclass
class CliContext:
    """Global options of the ``governed-memory`` command."""

    workspace_arg: Path | None
    policy_arg: Path | None

    @property
    def workspace(self) -> Path:
        """The workspace folder, resolved as the library does."""
        return resolve_workspace(self.workspace_arg)
