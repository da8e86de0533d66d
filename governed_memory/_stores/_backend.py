"""The file backend's agents: one folder per agent under ``<workspace>/agents/``.

:class:`FileMemoryBackend` is the ``MemoryBackend`` of the storage seam for a
workspace folder: it lists the agents that have memory there and opens the
store of one (plaintext or encrypted, as the store factory it is given says).
Export, erasure and inspection find agents through it, not by listing folders
themselves, so a database backend that lists its agents its own way serves
them unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .._base import AGENTS_DIR, MEMORY_FILE, TMP_PREFIX, validate_agent_name
from .._errors import ConfigurationError, UnsafePathError
from ._base import AgentStore, StoreFactory

__all__ = ["FileMemoryBackend"]


class FileMemoryBackend:
    """The agents of the workspace folder ``workspace``, each stored by ``factory``.

    An agent is a folder with a valid agent name, ``.hidden`` included (a
    Conversation may be named so, and its memory must be found by export,
    erasure and retention); symbolic links (a link could lead out of the
    workspace), files and the library's own temporary entries are not agents.
    """

    def __init__(self, workspace: Path, factory: StoreFactory) -> None:
        self.workspace = Path(workspace)
        self.factory = factory

    @property
    def agents_dir(self) -> Path:
        return self.workspace / AGENTS_DIR

    def agents(self) -> list[str]:
        try:
            entries = list(os.scandir(self.agents_dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        names = []
        for entry in entries:
            if entry.name.startswith(TMP_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                names.append(validate_agent_name(entry.name))
            except ConfigurationError:
                continue
        return sorted(names)

    def refused(self) -> list[UnsafePathError]:
        """The entries of ``agents/`` with an agent's name that are symbolic links, by name.

        They are not agents (:meth:`agents` leaves them out, and every store
        refuses to open one), but the memory behind such a link may hold a
        subject's data, written through it before links were refused: an
        erasure or export reports each as an item it could not process, with
        the error's message (what it is and the fix), rather than skip it.
        """
        try:
            entries = list(os.scandir(self.agents_dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith(TMP_PREFIX) or not entry.is_symlink():
                continue
            try:
                validate_agent_name(entry.name)
            except ConfigurationError:
                continue
            found.append(UnsafePathError(self.agents_dir / entry.name, "folder"))
        return found

    def has_agent(self, agent: str) -> bool:
        folder = self.agents_dir / validate_agent_name(agent)
        return folder.is_dir() and not folder.is_symlink()

    def open(self, agent: str, header: Callable[[], str]) -> AgentStore:
        return self.factory(self.agents_dir / validate_agent_name(agent) / MEMORY_FILE, header)


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import MemoryBackend

    _conforms: type[MemoryBackend] = FileMemoryBackend
