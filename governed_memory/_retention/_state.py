"""What the planner sees: artefacts with their sizes, times and owners (plain values).

A :class:`WorkspaceState` is produced by :func:`~._scan.scan_workspace` (one
pass over the disk, streamed agent by agent) or built by hand in tests. Its
``agents`` and ``others`` may be lazy iterables: the planner consumes them
once, so memory stays bounded by the largest agent, not the workspace.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from .._base import ArtefactKind
from .._records import HoldSet

__all__ = ["AgentState", "Artefact", "WorkspaceState"]


@dataclass(frozen=True, slots=True)
class Artefact:
    """One thing a retention rule may delete.

    Args:
        kind: what it is.
        path: where it is: relative to the workspace (POSIX separators) when
            inside it, else absolute. A consent record is
            ``<consent log>#<digest of its line>``.
        size: bytes it occupies.
        mtime: last modification, naive local time (like every time here).
        named_at: the time written in its name or content (archive names,
            consent and tombstone times); preferred over ``mtime``, which a
            copy or restore from backup resets.
        agent: the agent folder it belongs to, if any.
        subjects: the data subjects whose records it holds; None when not
            read (no subject hold needed it) or unreadable.
        current: still in force and never purged by age: the latest consent
            grant of a (subject, purpose), a pending erasure's tombstone, the
            audit segment being appended to.
        ident: ``(inode, mtime_ns)`` as scanned; the executor deletes only
            when the file on disk still matches.
    """

    kind: ArtefactKind
    path: str
    size: int
    mtime: _dt.datetime
    named_at: _dt.datetime | None = None
    agent: str | None = None
    subjects: frozenset[str] | None = None
    current: bool = False
    ident: tuple[int, int] = (0, 0)

    @property
    def when(self) -> _dt.datetime:
        """The artefact's age reference: the time in its name, else its mtime."""
        return self.named_at if self.named_at is not None else self.mtime


@dataclass(frozen=True, slots=True)
class AgentState:
    """One memory of an agent: its active memory file(s) and its archives.

    The agent's own memory (``partition`` None: ``agents/<name>/``) or one
    subject memory of it (``partition`` the subject folder's name:
    ``agents/<name>/subjects/<partition>/``, ``isolation = "subject"``). A
    subject memory belongs to its agent (``name``) for holds on the agent, and
    is a memory of its own for the rules that count per memory.
    """

    name: str
    memory: tuple[Artefact, ...] = ()
    archives: tuple[Artefact, ...] = ()
    partition: str | None = None


@dataclass(frozen=True)
class WorkspaceState:
    """Everything retention decides about, plus the holds in force."""

    agents: Iterable[AgentState] = ()
    others: Iterable[Artefact] = ()
    holds: HoldSet = field(default_factory=HoldSet)
