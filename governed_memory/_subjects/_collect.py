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

from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from typing import Any

from .._base import AGENTS_DIR
from .._errors import GovernedMemoryError
from .._format import Record, is_summary, parse_memory, record_lineage
from .._records import COMPLETE, ErasureReceipt, ErasureScope
from .._stores import AgentStore
from ._context import SubjectContext
from ._redact import mentions
from ._unfinished import Unfinished, linked_agents, links_in_agent, unfinished_from

__all__ = ["collect"]

WITHHELD = (
    "built from other data subjects' records too; content withheld to protect their rights "
    "(GDPR Art. 15(4)); export again with --include-shared-summaries after review"
)


def _agent_files(ctx: SubjectContext, name: str) -> list[tuple[str, str, str | Unfinished | None]]:
    """:func:`_files` of agent ``name`` ([] when it has no folder), its store closed after."""
    found: list[tuple[str, str, str | Unfinished | None]] = []
    for _name, store in ctx.stores(only=name):
        found += _files(ctx, name, store)
    return found


def _files(
    ctx: SubjectContext, name: str, store: AgentStore
) -> list[tuple[str, str, str | Unfinished | None]]:
    """(source, kind, text) of every memory of the agent: archives oldest first, then the memory.

    The agent's own memory first, then each subject memory (``subjects/<p>/``):
    a subject's records may be in any of them. A file that cannot be read
    (damaged, its key missing) is its :class:`Unfinished` instead of a text;
    the others are still read, so the export's error lists every one.
    """
    found: list[tuple[str, str, str | Unfinished | None]] = []

    def read(source: str, kind: str, reader: Callable[[], str | None]) -> None:
        try:
            found.append((source, kind, reader()))
        except (GovernedMemoryError, OSError) as exc:
            found.append((source, kind, unfinished_from(name, source, exc)))

    for memory in ctx.memories_of(store):
        for archive in memory.list_archives():
            read(ctx.source(memory, archive), "archive", partial(memory.read_archive, archive))
        read(ctx.source(memory), "memory", memory.read_memory)
    return found


def _record(agent: str, file: str, kind: str, record: Record) -> dict[str, Any]:
    return {
        "agent": agent,
        "source_file": file,
        "source_kind": kind,
        "role": record.role,
        "timestamp": record.timestamp,
        "subject": record.subject_id,
        "content": record.content,
    }


def _summary(
    agent: str,
    file: str,
    kind: str,
    record: Record,
    subject: str | None,
    include_shared: bool,
) -> dict[str, Any]:
    lineage = set(record_lineage(record))
    if record.subject_id is not None:
        lineage.add(record.subject_id)
    others = len(lineage - {subject}) if subject is not None else 0
    withhold = subject is not None and others > 0 and not include_shared
    entry = _record(agent, file, kind, record)
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

    ``unreadable`` lists what could not be read (a damaged file, a missing
    key, a symbolic link), each with the fix; the rest is read all the same.
    """
    records: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    unreadable: list[Unfinished] = []
    if ctx.on_files:
        # What the backend skips (a linked agent folder) or its stores would
        # follow: reported, never read, so the export cannot silently miss it.
        names = (
            [scope.agent]
            if scope.agent is not None
            else sorted(set(ctx.agent_names()) | set(linked_agents(ctx.workspace)))
        )
        for name in names:
            unreadable += links_in_agent(ctx.workspace, name)
    refused = {u.agent for u in unreadable}
    for name in [scope.agent] if scope.agent is not None else ctx.agent_names():
        if name in refused:
            continue
        try:
            found = _agent_files(ctx, name)
        except (GovernedMemoryError, OSError) as exc:
            unreadable.append(unfinished_from(name, f"{AGENTS_DIR}/{name}", exc))
            continue
        for file, kind, text in found:
            if isinstance(text, Unfinished):
                unreadable.append(text)
                continue
            if text is None or (scope.subject is not None and not mentions(text, scope.subject)):
                continue
            for record in parse_memory(text).records:
                own, derived = _matches(record, scope.subject)
                if own:
                    records.append(_record(name, file, kind, record))
                elif derived:
                    summaries.append(
                        _summary(name, file, kind, record, scope.subject, include_shared_summaries)
                    )
    return {
        "unreadable": unreadable,
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


def _erasures(ctx: SubjectContext, scope: ErasureScope) -> list[dict[str, Any]]:
    found = []
    for tombstone in ctx.tombstones().all():
        same = (
            tombstone.scope.subject == scope.subject
            if scope.subject is not None
            else tombstone.scope.agent == scope.agent
        )
        if not same:
            continue
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
