"""What one erasure does in one agent: each of its memories planned, logged, then rewritten or deleted.

An agent's data is in its own memory and archives and, under ``[memory]
isolation = "subject"``, in one memory per data subject
(``agents/<agent>/subjects/<p>/``, ``<p>`` a hash of the subject id). A
subject's records may be in any of them (the agent's memory and archives
from before isolation, their own memory, another subject's summary whose
lineage names them), so erasing subject S walks every memory of the agent,
under the agent's lock (:meth:`SubjectContext.memories_of`):

* in each memory S's records are removed and the summaries derived from S
  replaced by a marker (``_redact``), unless a hold on another subject of a
  summary's lineage keeps it;
* S's own memory goes as a whole once nothing but markers would be left in
  it: its folder is deleted, so no empty folder named after S stays, and the
  receipt lists each of its files as deleted;
* each memory's plan is logged durably before its files change, so a crash
  is resumed with exact counts. A subject memory's progress line also names
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
    "aggregate_blocked",
    "aggregate_files",
    "erase_agent",
    "erase_in_agent",
    "erasure_agents",
    "remove_temps",
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


def erase_agent(
    ctx: SubjectContext,
    tombs: TombstoneStore,
    tombstone: Tombstone,
    name: str,
    day: _dt.date,
    held: Held,
) -> list[Unfinished]:
    """The erasure in one agent; what it could not do (nothing: [])."""
    if ctx.on_files:
        # Nothing of an agent with a link in it is touched: the store would
        # follow the link (or refuse it halfway); the admin resolves it first.
        links = links_in_agent(ctx.workspace, name)
        if links:
            return links
    folder = f"{AGENTS_DIR}/{name}"
    try:
        for _name, store in ctx.stores(only=name):
            return erase_in_agent(ctx, tombs, tombstone, name, store, day, held)
    except (GovernedMemoryError, OSError) as exc:
        return [unfinished_from(name, folder, exc)]
    return []


def erase_in_agent(
    ctx: SubjectContext,
    tombs: TombstoneStore,
    tombstone: Tombstone,
    name: str,
    store: AgentStore,
    day: _dt.date,
    held: Held,
) -> list[Unfinished]:
    """Carry out ``tombstone`` in agent ``name`` (its own ``store``): plan, log, then change.

    Memory by memory: a memory that cannot be read or rewritten (a damaged
    file, a missing key) is returned as :class:`Unfinished`, and the agent's
    other memories are still erased. Every temporary file in each memory's
    folders goes first (a crashed compaction's may hold the subject's text).
    """
    subject = tombstone.scope.subject
    with store.lock():
        if subject is None:
            _delete_agent(ctx, tombs, tombstone, name, store)
            return []
        failed: list[Unfinished] = []
        own: str | None = None  # the name of the subject's own memory, once there are any
        for memory in ctx.memories_of(store):
            at = _Cursor(ctx.source(memory))
            try:
                remove_temps(memory)
                if memory.partition is not None and own is None:
                    own = _partition_of(store, subject)
                whole = memory.partition is not None and memory.partition == own
                _erase_in_memory(ctx, tombs, tombstone, name, memory, day, held, at, whole=whole)
            except (GovernedMemoryError, OSError) as exc:
                failed.append(unfinished_from(name, at.file, exc))
        return failed


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
        at = _Cursor(ctx.source(memory))
        try:
            _sources(ctx, memory, at)
        except (GovernedMemoryError, OSError) as exc:
            failed.append(unfinished_from(name, at.file, exc))
    return failed


class _Cursor:
    """The file an erasure is working on, named in its report when that file fails."""

    def __init__(self, file: str) -> None:
        self.file = file


def remove_temps(memory: AgentStore) -> int:
    """Delete every temporary file in ``memory``'s folders (file backend); return how many.

    Its folder and ``archive/``, and for an agent's own memory ``subjects/``
    too. Call it under the memory's lock (no live writer's file is removed).
    A compaction killed between its temporary copy and the link leaves the
    old memory there, in plaintext in a plaintext workspace.
    """
    if not isinstance(memory, AgentFolderStore):
        return 0
    folders = [memory.folder, memory.archive_dir]
    if memory.partition is None:
        folders.append(memory.folder / SUBJECTS_DIR)
    return sum(remove_stale_temps(folder) for folder in folders)


def _partition_of(store: AgentStore, subject: str) -> str | None:
    """The name of ``subject``'s memory on the agent.

    Asked only once the agent has subject memories: an encrypted workspace
    then has its keyring, so naming the folder (a keyed reference) writes
    nothing, and opening the store creates nothing.
    """
    memory = store.subject_store(subject)
    try:
        return memory.partition
    finally:
        memory.close()


def _sources(
    ctx: SubjectContext, memory: AgentStore, at: _Cursor | None = None
) -> list[tuple[str | None, str]]:
    """(archive id, or None for the active memory; its text) of what ``memory`` holds.

    ``at`` is told each file before it is read.
    """
    at = at or _Cursor("")
    at.file = ctx.source(memory)
    found: list[tuple[str | None, str | None]] = [(None, memory.read_memory())]
    for archive in memory.list_archives():
        at.file = ctx.source(memory, archive)
        found.append((archive, memory.read_archive(archive)))
    return [(item, text) for item, text in found if text is not None]


def _only_markers(text: str) -> bool:
    """Whether nothing but erasure markers (and the header) is in ``text``."""
    return all(ERASED_MARKER_KEY in r.meta for r in parse_memory(text).records)


def _erase_in_memory(
    ctx: SubjectContext,
    tombs: TombstoneStore,
    tombstone: Tombstone,
    name: str,
    memory: AgentStore,
    day: _dt.date,
    held: Held,
    at: _Cursor,
    *,
    whole: bool,
) -> None:
    subject = tombstone.scope.subject
    assert subject is not None
    plans: list[tuple[str | None, str, FileEdit | None]] = []
    blocked = []
    for item, text in _sources(ctx, memory, at):
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
    if whole and all(_only_markers(text if edit is None else edit.text) for _, text, edit in plans):
        _delete_memory(ctx, tombs, tombstone, name, memory, plans)
        return
    edits = [(item, edit) for item, _text, edit in plans if edit is not None and edit.changed]
    if not edits and not blocked:
        return
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
    tombs.log_progress(
        tombstone.id,
        _where(name, memory)
        | {"files": [f.to_dict() for f in files]}
        | ({"blocked": [b.to_dict() for b in blocked]} if held else {}),
    )
    for item, edit in edits:
        at.file = ctx.source(memory, item)
        if item is None:
            memory.rewrite_memory(edit.text)
        else:
            memory.rewrite_archive(item, edit.text)


def _where(name: str, memory: AgentStore) -> dict[str, Any]:
    """The start of a progress line: the agent, and the subject folder for a subject memory."""
    if memory.partition is None:
        return {"agent": name}
    return {"agent": name, "partition": memory.partition}


def _delete_memory(
    ctx: SubjectContext,
    tombs: TombstoneStore,
    tombstone: Tombstone,
    name: str,
    memory: AgentStore,
    plans: list[tuple[str | None, str, FileEdit | None]],
) -> None:
    """Delete the erased subject's own memory (nothing else is in it), every file listed."""
    files = [
        FileRemoval(
            agent=name,
            file=ctx.source(memory, item),
            records=0 if edit is None else edit.records,
            summaries=0 if edit is None else edit.summaries,
            bytes_removed=count_records(text)[2],
            bytes_written=0,
            deleted=True,
        )
        for item, text, edit in plans
    ]
    if files:
        tombs.log_progress(
            tombstone.id, _where(name, memory) | {"files": [f.to_dict() for f in files]}
        )
    # Under the subject's lock (and the agent's): a writer waiting on it finds
    # the folder gone and starts a new, empty memory.
    memory.delete()


def _delete_agent(
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
