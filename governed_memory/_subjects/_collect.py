"""Gather what a workspace holds about a subject (or an agent), as plain data.

Pure reading: every file is read through its agent's store (so encrypted
files are decrypted in memory, never staged on disk), each agent under its
folder lock so a concurrent compaction cannot make a record appear twice or
not at all. An agent's subject memories (``isolation = "subject"``) are read
with it, each under its own lock too.

Summaries built from several subjects' records are a third party's data too
(GDPR Art. 15(4)): in a subject export their content is withheld unless the
caller asks for it, and other subjects are only counted, never named.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, replace
from typing import Any

from .._base import AGENTS_DIR, classify_archive
from .._errors import GovernedMemoryError
from .._format import (
    Record,
    is_summary,
    parse_memory,
    record_ids,
    record_lineage,
    record_subjects,
)
from .._records import COMPLETE, ErasureReceipt, ErasureScope, Tombstone
from .._stores import AgentStore
from ._context import SubjectContext
from ._redact import mentions
from ._removal import sources
from ._unfinished import Unfinished, linked_agents, links_in_agent, unfinished_from

__all__ = ["FileSeen", "collect", "tombstones_of"]

WITHHELD = (
    "built from other data subjects' records too; content withheld to protect their rights "
    "(GDPR Art. 15(4)); export again with --include-shared-summaries after review"
)


@dataclass(frozen=True)
class FileSeen:
    """One memory or archive the export read, with what retention needs to know of it.

    ``when`` is its age reference (naive local time): an archive's time in
    its name, else its stored time; ``rank`` counts archives newest first
    among the ``total`` of its memory (0 for an active memory); ``subjects``
    are those its records and summaries' lineage name.
    """

    agent: str
    source: str
    kind: str
    memory: str
    when: _dt.datetime | None
    rank: int = 0
    total: int = 0
    subjects: frozenset[str] = frozenset()


_Read = tuple[FileSeen, str | Unfinished | None]


def _agent_files(ctx: SubjectContext, name: str, subject: str | None) -> list[_Read]:
    """:func:`_files` of agent ``name`` ([] when it has no folder), its store closed after."""
    found: list[_Read] = []
    for _name, store in ctx.stores(only=name):
        found += _files(ctx, name, store, subject)
    return found


def _when(memory: AgentStore, archive: str | None) -> _dt.datetime | None:
    """The artefact's age reference, as retention counts it (see ``_retention._scan``)."""
    if archive is not None:
        named = classify_archive(memory.source(archive).rsplit("/", 1)[-1])
        if named is not None and named[1] is not None:
            return named[1]
    info = memory.stat(archive)
    return None if info is None else _dt.datetime.fromtimestamp(info.modified)


def _files(ctx: SubjectContext, name: str, store: AgentStore, subject: str | None) -> list[_Read]:
    """(file, text) of the agent's memories that may hold ``subject``: archives oldest first, then the memory.

    The agent's own memory first, then the subject memories
    (``subjects/<p>/``) :meth:`SubjectContext.memories_for` names: every one
    without a lineage index or ``subject``. A file that cannot be read
    (damaged, its key missing) is its :class:`Unfinished` instead of a
    text; the other memories are still read, so the export's error lists
    every one. A link where the export reads makes the agent's links its
    only items. Only a file that may hold the subject has its time looked up.
    """
    found: list[_Read] = []
    with store.lock(), ctx.memories_for(store, subject) as walk:
        if ctx.on_files:
            links = links_in_agent(ctx.workspace, name, walk.partitions)
            if links:
                return [(FileSeen(name, u.file, "", "", None), u) for u in links]
        for memory in walk.memories:
            kind = "agent" if memory.partition is None else "subject"
            try:
                texts = sources(ctx, memory)
            except (GovernedMemoryError, OSError):
                found += _each_file(ctx, name, memory, kind)  # to name every file that fails
                continue
            archives = [item for item, _ in texts if item is not None]
            ordered = [t for t in texts if t[0] is not None] + [t for t in texts if t[0] is None]
            for item, text in ordered:
                wanted = subject is None or mentions(text, subject)
                rank = len(archives) - archives.index(item) if item is not None else 0
                seen = FileSeen(
                    name,
                    ctx.source(memory, item),
                    "archive" if item is not None else "memory",
                    kind,
                    _when(memory, item) if wanted else None,
                    rank,
                    len(archives) if item is not None else 0,
                )
                found.append((seen, text))
    return found


def _each_file(ctx: SubjectContext, name: str, memory: AgentStore, kind: str) -> list[_Read]:
    """(file, text or :class:`Unfinished`) of each file of ``memory``, one at a time."""
    found: list[_Read] = []
    items: list[str | None] = []
    try:
        items += memory.list_archives()
    except (GovernedMemoryError, OSError) as exc:
        where = ctx.source(memory)
        found.append(
            (FileSeen(name, where, "archive", kind, None), unfinished_from(name, where, exc))
        )
    items.append(None)
    for item in items:
        seen = FileSeen(
            name, ctx.source(memory, item), "memory" if item is None else "archive", kind, None
        )
        try:
            text = memory.read_memory() if item is None else memory.read_archive(item)
        except (GovernedMemoryError, OSError) as exc:
            found.append((seen, unfinished_from(name, seen.source, exc)))
            continue
        found.append((seen, text))
    return found


def _record(seen: FileSeen, record: Record) -> dict[str, Any]:
    return {
        "agent": seen.agent,
        "source_file": seen.source,
        "source_kind": seen.kind,
        "memory": seen.memory,
        "written_by": "compact" if is_summary(record) else "persist",
        "role": record.role,
        "timestamp": record.timestamp,
        "subject": record.subject_id,
        "content": record.content,
    }


def _summary(
    seen: FileSeen, record: Record, subject: str | None, include_shared: bool
) -> dict[str, Any]:
    lineage = set(record_lineage(record))
    if record.subject_id is not None:
        lineage.add(record.subject_id)
    others = len(lineage - {subject}) if subject is not None else 0
    withhold = subject is not None and others > 0 and not include_shared
    entry = _record(seen, record)
    entry.update(
        {
            # A summary another subject's conversation wrote is attributed to
            # them: in a subject export, that would name them.
            "subject": record.subject_id if subject in (None, record.subject_id) else None,
            "content": None if withhold else record.content,
            "withheld_reason": WITHHELD if withhold else None,
            "other_subjects": others,
            # In an agent export every name is the agent's own data; in a
            # subject export, naming the others would disclose them.
            "lineage": sorted(lineage) if subject is None else None,
        }
    )
    return entry


def _matches(record: Record, subject: str | None) -> tuple[bool, bool]:
    """(is a record of the subject, is a summary derived from the subject)."""
    summary = is_summary(record)
    if subject is None:
        return not summary, summary
    derived = record.subject_id == subject or subject in record_lineage(record)
    return record.subject_id == subject and not summary, summary and derived


def collect(
    ctx: SubjectContext, scope: ErasureScope, *, include_shared_summaries: bool = False
) -> dict[str, Any]:
    """Records, summaries, consent, holds, erasures and audit entries for ``scope``.

    ``files`` lists the memories and archives that hold a record or summary
    cited (:class:`FileSeen`), for the retention dates of the export.

    ``unreadable`` lists what could not be read (a damaged file, a missing
    key, a symbolic link), each with the fix; the rest is read all the same.
    """
    records: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    files: list[FileSeen] = []
    unreadable: list[Unfinished] = []
    names = [scope.agent] if scope.agent is not None else ctx.agent_names()
    if ctx.on_files:
        # What the backend skips (a linked agent folder) or its stores would
        # follow: reported, never read, so the export cannot silently miss it.
        # Links inside an agent are looked for where it is read (_files).
        linked = sorted(set(names) | set(linked_agents(ctx.workspace)))
        for name in linked:
            if (ctx.agents_dir / name).is_symlink():
                unreadable += links_in_agent(ctx.workspace, name)
    refused = {u.agent for u in unreadable}
    for name in names:
        if name in refused:
            continue
        try:
            found = _agent_files(ctx, name, scope.subject)
        except (GovernedMemoryError, OSError) as exc:
            unreadable.append(unfinished_from(name, f"{AGENTS_DIR}/{name}", exc))
            continue
        for seen, text in found:
            if isinstance(text, Unfinished):
                unreadable.append(text)
                continue
            if text is None or (scope.subject is not None and not mentions(text, scope.subject)):
                continue
            cited = False
            parsed = parse_memory(text).records
            # The ids `rectify --record` takes (docs/rectification.md), computed per file.
            for record, rid in zip(parsed, record_ids(name, parsed), strict=True):
                own, derived = _matches(record, scope.subject)
                if own:
                    records.append({**_record(seen, record), "record_id": rid})
                elif derived:
                    summaries.append(
                        _summary(seen, record, scope.subject, include_shared_summaries)
                    )
                cited = cited or own or derived
            if cited:
                named = frozenset(s for r in parsed for s in record_subjects(r))
                files.append(replace(seen, subjects=named))
    return {
        "unreadable": unreadable,
        "files": files,
        "records": records,
        "summaries": summaries,
        "consent": _consent(ctx, scope),
        "holds": _holds(ctx, scope),
        "erasures": _erasures(ctx, scope),
        "audit": _audit(ctx, scope),
    }


def _consent(ctx: SubjectContext, scope: ErasureScope) -> list[dict[str, Any]] | None:
    if ctx.consent is None or scope.subject is None:
        return None
    return [
        {
            "purpose": e.purpose,
            "action": e.action.value,
            "at": e.at,
            "actor": e.actor,
            "policy_id": e.policy_id,
            "policy_version": e.policy_version,
        }
        for e in ctx.consent.history(scope.subject)
    ]


def _holds(ctx: SubjectContext, scope: ErasureScope) -> list[dict[str, Any]] | None:
    if ctx.holds is None:
        return None
    found = []
    for hold in ctx.holds.holds(include_released=True):
        if (scope.subject is not None and hold.subject == scope.subject) or (
            scope.subject is None and scope.agent is not None and hold.agent == scope.agent
        ):
            found.append({k: v for k, v in asdict(hold).items()})
    return found


def tombstones_of(ctx: SubjectContext, scope: ErasureScope) -> list[Tombstone]:
    """The erasures of the scope's subject (or, in an agent export, of the agent), oldest first."""
    return [
        t
        for t in ctx.tombstones().all()
        if (
            t.scope.subject == scope.subject
            if scope.subject is not None
            else t.scope.agent == scope.agent
        )
    ]


def _erasures(ctx: SubjectContext, scope: ErasureScope) -> list[dict[str, Any]]:
    found = []
    for tombstone in tombstones_of(ctx, scope):
        entry: dict[str, Any] = {
            "id": tombstone.id,
            "scope": tombstone.scope.to_dict(),
            "state": tombstone.state,
            "requested_at": tombstone.requested_at,
            "completed_at": tombstone.completed_at,
        }
        if tombstone.state == COMPLETE and tombstone.receipt is not None:
            receipt = ErasureReceipt.from_dict(tombstone.receipt)
            entry["records"] = receipt.records
            entry["summaries"] = receipt.summaries
        found.append(entry)
    return found


def _audit(ctx: SubjectContext, scope: ErasureScope) -> list[dict[str, Any]] | None:
    if ctx.audit_entries is None:
        return None
    return ctx.audit_entries(scope.subject, scope.agent)
