"""What a subject request could not do in one agent, and why: failures stay local.

An erasure works agent by agent and, within an agent, memory by memory. A
damaged or undecryptable file, a missing key or a symbolic link in one agent
must not stop the others, nor hide that the erasure is not done. Each thing
an erasure could not finish is an :class:`Unfinished` (agent, file, error,
reason, fix); an erasure with any left over stays pending and is reported
as a :class:`PendingErasure` (a run of due erasures lists it; ``erase`` and
``resume_erasures`` raise its :class:`~governed_memory.StorageError`).

Symbolic links: the library never follows a link it did not make (issue 13),
and the file backend skips a linked agent folder or subject folder when it
lists agents. An erasure or export that only looked at what the backend lists
would report "complete" while the linked data survives. :func:`links_in_workspace`
and :func:`links_in_agent` list them (``os.lstat``, never following), so that
every such entry is reported instead; nothing under a linked entry is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._base import AGENTS_DIR, ARCHIVE_DIR, TMP_PREFIX, validate_agent_name
from .._errors import (
    ConfigurationError,
    DecryptionError,
    FormatVersionError,
    KeyShreddedError,
    KeyUnavailableError,
    StorageError,
)
from .._records import ErasureReceipt, ErasureScope, UnreachedItem
from .._stores import SUBJECTS_DIR
from ._context import SubjectContext

__all__ = [
    "LINK_ERROR",
    "RESUME_HINT",
    "PendingErasure",
    "Unfinished",
    "link_item",
    "linked_agents",
    "links_in_agent",
    "refuse_linked_agent",
    "unfinished_from",
]

LINK_ERROR = "SymbolicLink"
"""The ``error`` of an item refused because it is a symbolic link."""

RESUME_HINT = (
    "then run the request again (`governed-memory erasures resume` finishes a pending erasure)"
)


@dataclass(frozen=True)
class Unfinished:
    """One thing a request could not do: which agent, which file, what error, the fix.

    ``file`` is relative to the workspace (``agents/A/MEMORY.md.gmenc``, or the
    agent folder itself when the failure is not about one file). ``agent`` is
    empty when the erasure's own records failed (its tombstone or progress log).
    """

    agent: str
    file: str
    error: str
    reason: str
    fix: str

    def describe(self) -> str:
        where = f"agent {self.agent!r}, {self.file}" if self.agent else self.file
        return f"{where}: {self.reason} ({self.error}); fix: {self.fix}"

    def unreached(self) -> UnreachedItem:
        """How a receipt records it: the path and ``a symbolic link`` or ``unreadable: <error>``."""
        why = "a symbolic link" if self.error == LINK_ERROR else f"unreadable: {self.reason}"
        return UnreachedItem(agent=self.agent, file=self.file, reason=why)

    def to_dict(self) -> dict[str, str]:
        return {
            "agent": self.agent,
            "file": self.file,
            "error": self.error,
            "reason": self.reason,
            "fix": self.fix,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Unfinished:
        return cls(
            agent=str(data["agent"]),
            file=str(data["file"]),
            error=str(data["error"]),
            reason=str(data["reason"]),
            fix=str(data["fix"]),
        )


@dataclass(frozen=True)
class PendingErasure:
    """An erasure that ran through every agent it could and is still pending.

    ``done`` is how many agents were finished (or are readable, when asked
    by ``erasures show``); ``unfinished`` what is left and why. The tombstone
    stays pending until a run finds nothing left. ``last_run`` is the receipt
    the last full run stored with the tombstone (state ``blocked``: what it
    removed and the items it could not reach), when there is one.
    """

    id: str
    scope: ErasureScope
    unfinished: tuple[Unfinished, ...]
    done: int = 0
    last_run: ErasureReceipt | None = None

    @property
    def agents(self) -> list[str]:
        """The agents with something left to do, sorted."""
        return sorted({u.agent for u in self.unfinished})

    def message(self) -> str:
        items = "; ".join(u.describe() for u in self.unfinished)
        return (
            f"erasure {self.id} is pending: {len(self.unfinished)} item(s) in "
            f"{len(self.agents)} agent(s) could not be erased ({items}); every other agent "
            "is done"
        )

    def error(self) -> StorageError:
        return StorageError(self.message())

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope.to_dict(),
            "state": "pending",
            "agents_done": self.done,
            "unfinished": [u.to_dict() for u in self.unfinished],
            **({"last_run": self.last_run.to_dict()} if self.last_run is not None else {}),
        }


def unfinished_from(agent: str, file: str, exc: BaseException) -> Unfinished:
    """An :class:`Unfinished` for ``exc`` raised while working on ``file`` of ``agent``."""
    return Unfinished(
        agent=agent, file=file, error=type(exc).__name__, reason=_reason(exc), fix=_fix(exc)
    )


def _reason(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def _fix(exc: BaseException) -> str:
    if isinstance(exc, KeyShreddedError):
        return f"the data key was destroyed; remove the unreadable file, {RESUME_HINT}"
    if isinstance(exc, KeyUnavailableError):
        return (
            "configure the master key this workspace was encrypted with "
            f"(GOVERNED_MEMORY_MASTER_KEY or the key provider), {RESUME_HINT}"
        )
    if isinstance(exc, DecryptionError):
        return (
            "restore the file from a backup (if it cannot be repaired, delete it: "
            f"nothing can read it), {RESUME_HINT}"
        )
    if isinstance(exc, FormatVersionError):
        return f"upgrade governed-memory to the version that wrote the file, {RESUME_HINT}"
    if isinstance(exc, ConfigurationError):
        return f"correct the setting named above, {RESUME_HINT}"
    return f"fix the cause named (permissions, disk space, a damaged file), {RESUME_HINT}"


def link_item(agent: str, file: str, path: Path) -> Unfinished:
    """A symbolic link the request found and did not follow."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return Unfinished(
        agent=agent,
        file=file,
        error=LINK_ERROR,
        reason=f"a symbolic link (to {target}); governed-memory does not follow links",
        fix=(
            f"replace the link by the real {'folder' if _points_to_dir(path) else 'file'} "
            f"(or remove the link, `rm {file}`, which removes only the link), {RESUME_HINT}"
        ),
    )


def _points_to_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def linked_agents(workspace: Path) -> dict[str, Path]:
    """Agent names under ``agents/`` that are symbolic links (never followed), and their paths."""
    folder = workspace / AGENTS_DIR
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found = {}
    for entry in entries:
        if entry.name.startswith(TMP_PREFIX) or not entry.is_symlink():
            continue
        try:
            found[validate_agent_name(entry.name)] = Path(entry.path)
        except ConfigurationError:
            continue  # not a name the library would open
    return dict(sorted(found.items()))


def links_in_agent(
    workspace: Path, agent: str, partitions: Iterable[str] | None = None
) -> list[Unfinished]:
    """Every symbolic link in (or at) the agent's folder, none followed; [] when none.

    The agent folder itself, its memory file, ``archive/`` and the archives,
    ``subjects/``, each subject folder and what is in it: the library reads
    all of them, so a link anywhere there is reported. ``partitions``: only
    those subject folders are looked into (a request that reads no other),
    besides the agent's own files and the entries of ``subjects/``.
    """
    root = workspace / AGENTS_DIR / agent
    if root.is_symlink():
        return [link_item(agent, f"{AGENTS_DIR}/{agent}", root)]
    if partitions is None:
        found = []
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                if name.startswith(TMP_PREFIX) or not path.is_symlink():
                    continue
                relative = path.relative_to(workspace).as_posix()
                found.append(link_item(agent, relative, path))
        return found
    # Only where the request reads: the agent's folder and archive/, the entries
    # of subjects/, and the subject folders named (their whole tree).
    subjects = root / SUBJECTS_DIR
    links: list[str] = []
    for folder in (root, root / ARCHIVE_DIR, subjects):
        if folder == root or not folder.is_symlink():  # a link itself is listed from root
            links += _links_under(str(folder), deep=False)
    for partition in partitions:
        if not (subjects / partition).is_symlink():  # a link there is listed above
            links += _links_under(str(subjects / partition), deep=True)
    base = len(str(workspace)) + 1
    return [link_item(agent, p[base:], Path(p)) for p in sorted(set(links))]


def _links_under(folder: str, deep: bool) -> list[str]:
    """The paths of the links in ``folder`` (and below it when ``deep``), by the entries' types."""
    found: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith(TMP_PREFIX):
                    continue
                if entry.is_symlink():
                    found.append(entry.path)
                elif deep and entry.is_dir(follow_symlinks=False):
                    found += _links_under(entry.path, deep)
    except (FileNotFoundError, NotADirectoryError):
        pass
    return found


def refuse_linked_agent(ctx: SubjectContext, scope: ErasureScope, what: str) -> None:
    """Refuse a request for an agent whose folder is a symbolic link, before anything is written.

    Raises:
        StorageError: naming the link and the fix.
    """
    if scope.agent is None or not ctx.on_files:
        return
    folder = ctx.agents_dir / scope.agent
    if folder.is_symlink():
        item = link_item(scope.agent, f"{AGENTS_DIR}/{scope.agent}", folder)
        raise StorageError(
            f"agent {scope.agent!r} refused: {item.file} is {item.reason}; nothing was {what}. "
            f"Fix: {item.fix.replace(RESUME_HINT, 'then run the request again')}"
        )
