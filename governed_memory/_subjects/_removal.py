"""What one erasure does in one agent: each of its memories planned, then rewritten or deleted.

An agent's data is in its own memory and archives and, under ``[memory]
isolation = "subject"``, in one memory per data subject
(``agents/<agent>/subjects/<p>/``, ``<p>`` a hash of the subject id). A
subject's records may be in any of them (the agent's memory and archives
from before isolation, their own memory, another subject's summary whose
lineage names them), so erasing subject S walks every memory of the agent
that may hold S's data, under the agent's lock
(:meth:`SubjectContext.memories_for`: with the agent's lineage index, S's own
memory and the few the index lists; without it, all of them). ``_batches``
runs it over the agents:

* in each memory S's records are removed and the summaries derived from S
  replaced by a marker (``_redact``), unless a hold on another subject of a
  summary's lineage keeps it;
* S's own memory goes as a whole once nothing but markers would be left in
  it: its folder is deleted, so no empty folder named after S stays, and the
  receipt lists each of its files as deleted;
* each memory's plan (:class:`Step`) is logged durably before its files
  change, so a crash is resumed with exact counts. A subject memory's progress line also names
  its folder (``partition``); the agent's own is written as it always was.

Erasing a whole agent deletes its folder, every subject memory with it.

Failures stay local (``_unfinished``): an agent with a symbolic link in it is
not touched, and a memory that cannot be read or rewritten is reported; the
erasure goes on with the next memory and the next agent.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._base import AGENTS_DIR, remove_stale_temps
from .._errors import GovernedMemoryError
from .._format import ERASED_MARKER_KEY, parse_memory
from .._records import ErasureScope, FileRemoval, HeldSummaries, Tombstone, TombstoneStore
from .._stores import SUBJECTS_DIR, AgentFolderStore, AgentStore
from ._context import SubjectContext
from ._redact import FileEdit, count_records, strip_subject
from ._unfinished import Unfinished, linked_agents, links_in_agent, unfinished_from

__all__ = [
    "Cursor",
    "Held",
    "Step",
    "aggregate_blocked",
    "aggregate_files",
    "delete_agent",
    "erasure_agents",
    "plan_memory",
    "remove_temps",
    "sources",
    "unreadable_agent",
]

Held = Mapping[str, tuple[str, ...]]
"""The subjects other than the erased one under an active hold, with their hold ids."""


def erasure_agents(ctx: SubjectContext, scope: ErasureScope) -> list[str]:
    """The agents an erasure of ``scope`` goes through: linked agent folders too (reported)."""
    if scope.agent is not None:
        return [scope.agent]
    names = set(ctx.agent_names())
    if ctx.on_files:
        names |= set(linked_agents(ctx.workspace))
    return sorted(names)


def unreadable_agent(ctx: SubjectContext, name: str) -> list[Unfinished]:
    """What of agent ``name`` an erasure could not do now: its links, or what cannot be read.

    Reads only, writes nothing (``erasures show`` of a pending erasure).
    """
    if ctx.on_files:
        links = links_in_agent(ctx.workspace, name)
        if links:
            return links
    try:
        return [
            item for _name, store in ctx.stores(only=name) for item in _unreadable(ctx, name, store)
        ]
    except (GovernedMemoryError, OSError) as exc:
        return [unfinished_from(name, f"{AGENTS_DIR}/{name}", exc)]


def _unreadable(ctx: SubjectContext, name: str, store: AgentStore) -> list[Unfinished]:
    failed: list[Unfinished] = []
    for memory in ctx.memories_of(store):
        at = Cursor(ctx.source(memory))
        try:
            sources(ctx, memory, at)
        except (GovernedMemoryError, OSError) as exc:
            failed.append(unfinished_from(name, at.file, exc))
    return failed


@dataclass
class Step:
    """One memory's part of an erasure: its progress line, then what changes."""

    agent: str
    memory: AgentStore
    at: Cursor
    line: dict[str, Any] | None  # None: nothing to log
    delete: bool = False
    edits: list[tuple[str | None, str]] = field(default_factory=list)


class Cursor:
    """The file an erasure is working on, named in its report when that file fails."""

    def __init__(self, file: str) -> None:
        self.file = file


def remove_temps(memory: AgentStore, *, whole_agent: bool = True) -> int:
    """Delete every temporary file in ``memory``'s folders (file backend); return how many.

    Its folder and ``archive/``, and for an agent's own memory ``subjects/``
    too (``whole_agent`` False: not ``subjects/``, whose temporary files
    belong to subject memories the request does not visit). Call it under
    the memory's lock (no live writer's file is removed). A compaction
    killed between its temporary copy and the link leaves the old memory
    there, in plaintext in a plaintext workspace.
    """
    if not isinstance(memory, AgentFolderStore):
        return 0
    folders = [memory.folder, memory.archive_dir]
    if memory.partition is None and whole_agent:
        folders.append(memory.folder / SUBJECTS_DIR)
    return sum(remove_stale_temps(folder) for folder in folders)


def sources(
    ctx: SubjectContext, memory: AgentStore, at: Cursor | None = None
) -> list[tuple[str | None, str]]:
    """(archive id, or None for the active memory; its text) of what ``memory`` holds.

    ``at`` is told each file before it is read. The file backend reads a
    memory in one pass (:meth:`AgentFolderStore.read_texts`).
    """
    cursor = at or Cursor("")

    def before(item: str | None) -> None:
        cursor.file = ctx.source(memory, item)

    if isinstance(memory, AgentFolderStore):
        return memory.read_texts(before)
    before(None)
    found: list[tuple[str | None, str | None]] = [(None, memory.read_memory())]
    for archive in memory.list_archives():
        before(archive)
        found.append((archive, memory.read_archive(archive)))
    return [(item, text) for item, text in found if text is not None]


def _only_markers(text: str) -> bool:
    """Whether nothing but erasure markers (and the header) is in ``text``."""
    return all(ERASED_MARKER_KEY in r.meta for r in parse_memory(text).records)


def plan_memory(
    ctx: SubjectContext,
    tombstone: Tombstone,
    name: str,
    memory: AgentStore,
    sources: list[tuple[str | None, str]],
    day: _dt.date,
    held: Held,
    at: Cursor,
    *,
    whole: bool,
) -> Step | None:
    """What the erasure does in ``memory`` whose files hold ``sources``; None: nothing."""
    subject = tombstone.scope.subject
    assert subject is not None
    plans: list[tuple[str | None, str, FileEdit | None]] = []
    blocked = []
    for item, text in sources:
        edit = strip_subject(text, subject, erasure_id=tombstone.id, day=day, held=held)
        if edit is not None and edit.held_summaries:
            blocked.append(
                HeldSummaries(
                    agent=name,
                    file=ctx.source(memory, item),
                    summaries=edit.held_summaries,
                    holds=edit.holds,
                )
            )
        plans.append((item, text, edit))
    if whole and all(
        _only_markers(text) if edit is None else not edit.others for _, text, edit in plans
    ):
        return _delete_memory(ctx, name, memory, plans, at)
    edits = [(item, edit) for item, _text, edit in plans if edit is not None and edit.changed]
    if not edits and not blocked:
        return None
    files = [
        FileRemoval(
            agent=name,
            file=ctx.source(memory, item),
            records=edit.records,
            summaries=edit.summaries,
            bytes_removed=edit.bytes_removed,
            bytes_written=len(edit.text.encode("utf-8")),
        )
        for item, edit in edits
    ]
    # "blocked" is this run's view of the memory: a later run (resumed, after a
    # release) replaces it, so the receipt never lists a summary it removed.
    # Without holds on other subjects the line is as it always was.
    line = (
        _where(name, memory)
        | {"files": [f.to_dict() for f in files]}
        | ({"blocked": [b.to_dict() for b in blocked]} if held else {})
    )
    return Step(name, memory, at, line, edits=[(item, edit.text) for item, edit in edits])


def _where(name: str, memory: AgentStore) -> dict[str, Any]:
    """The start of a progress line: the agent, and the subject folder for a subject memory."""
    if memory.partition is None:
        return {"agent": name}
    return {"agent": name, "partition": memory.partition}


def _delete_memory(
    ctx: SubjectContext,
    name: str,
    memory: AgentStore,
    plans: list[tuple[str | None, str, FileEdit | None]],
    at: Cursor,
) -> Step:
    """Delete the erased subject's own memory (nothing else is in it), every file listed."""
    files = [
        FileRemoval(
            agent=name,
            file=ctx.source(memory, item),
            records=0 if edit is None else edit.records,
            summaries=0 if edit is None else edit.summaries,
            bytes_removed=count_records(text)[2] if edit is None else edit.record_bytes,
            bytes_written=0,
            deleted=True,
        )
        for item, text, edit in plans
    ]
    line = _where(name, memory) | {"files": [f.to_dict() for f in files]} if files else None
    return Step(name, memory, at, line, delete=True)


def delete_agent(
    ctx: SubjectContext,
    tombs: TombstoneStore,
    tombstone: Tombstone,
    name: str,
    store: AgentStore,
) -> None:
    files = []
    for memory in ctx.memories_of(store):
        for item, text, size in _deletable(memory):
            records, summaries, size = count_records(text) if text is not None else (0, 0, size)
            files.append(
                FileRemoval(
                    agent=name,
                    file=ctx.source(memory, item),
                    records=records,
                    summaries=summaries,
                    bytes_removed=size,
                    bytes_written=0,
                    deleted=True,
                )
            )
    if files:
        tombs.log_progress(tombstone.id, {"agent": name, "files": [f.to_dict() for f in files]})
    # Still under the agent's lock: a waiting writer finds the agent gone
    # and starts a new, empty one (see PlaintextAgentStore locking). The
    # subject memories are inside the agent's folder and go with it.
    store.delete()


def _deletable(memory: AgentStore) -> list[tuple[str | None, str | None, int]]:
    """(archive id or None, text, size on disk) of each file an agent's deletion removes.

    A file that cannot be read (damaged, its key missing) is deleted all the
    same: the whole agent was asked for. Its text is then None and its counts
    0 (unknown); the size is what is on disk (0 outside the file backend).
    """
    found: list[tuple[str | None, str | None, int]] = []
    for item in [None, *memory.list_archives()]:
        try:
            text = memory.read_memory() if item is None else memory.read_archive(item)
        except (GovernedMemoryError, OSError):
            found.append((item, None, _size(memory, item)))
            continue
        if text is not None:
            found.append((item, text, len(text.encode("utf-8"))))
    return found


def _size(memory: AgentStore, item: str | None) -> int:
    if not isinstance(memory, AgentFolderStore):
        return 0
    path = memory.memory_path if item is None else memory.archive_file(item)
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def aggregate_files(
    entries: list[dict[str, Any]], where: str = "erasure progress"
) -> tuple[FileRemoval, ...]:
    """What the progress lines say was removed, per file, sorted by agent and file.

    Raises:
        StorageError: a line's file entry lacks a field (``where`` names the log).
    """
    # The last plan for a file wins: a resumed run re-plans only what the
    # interrupted run had not rewritten yet.
    latest: dict[tuple[str, str], FileRemoval] = {}
    for entry in entries:
        for item in entry.get("files", []):
            removal = FileRemoval.from_dict(item, where)
            latest[(removal.agent, removal.file)] = removal
    return tuple(latest[k] for k in sorted(latest))


def aggregate_blocked(
    entries: list[dict[str, Any]], where: str = "erasure progress"
) -> tuple[HeldSummaries, ...]:
    """What a hold still keeps, per memory, as the last run through each memory saw it.

    A line without ``blocked`` was written when no other subject was held:
    nothing is kept there any more (a hold released before a resumed run).
    """
    latest: dict[tuple[str, str], list[HeldSummaries]] = {}
    for entry in entries:
        key = (str(entry["agent"]), str(entry.get("partition") or ""))
        latest[key] = [HeldSummaries.from_dict(b, where) for b in entry.get("blocked", [])]
    return tuple(b for key in sorted(latest) for b in latest[key])
