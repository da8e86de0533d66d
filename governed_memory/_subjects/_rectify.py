"""Rectification (GDPR Art. 16): one record's content corrected everywhere it is stored.

The steps of one rectification, each durable before the next::

    1. the record is found by its id (every agent, memory and archive); the
       request is checked: the subject's, not a summary, text storable,
       no legal hold                           -> an error, nothing written
    2. the request is written (pending)        <governance>/rectifications/<id>.json
                                               (the new text and keyed hashes of the old)
    3. in the record's agent, under its lock,  per memory (the agent's own, then each
                                               subject memory): plan logged (counts,
                                               fsynced), then each file rewritten
                                               atomically through the AgentStore
    4. the request becomes the receipt         state complete, the new text dropped

A crash anywhere leaves the old or the new content of each file (atomic
rewrites) and a pending request; the next ``rectify`` or
:func:`resume_rectifications` finishes it, idempotently (see ``_amend``).

Summaries that may have been built from the record (same agent, lineage
naming its subject, written at or after it) are marked or regenerated per
``summarization.on_rectify``. Regenerating summarises a summary's source
again: the file a compaction archived just before writing it (the summary
opens the next file). The summarizer is the one asked for, under the
policy's summarizer decision (the local extractive one when an external
model is not allowed); a summary with no source left, or no summarizer
allowed, is marked instead, and the receipt says so (``fallback``).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from .._errors import ConfigurationError, NotFoundError, RectificationBlockedError
from .._format import (
    RECORD_ID_PREFIX,
    Record,
    is_summary,
    parse_memory,
    record_ids,
    record_subjects,
    to_disk_text,
)
from .._protocols import (
    LOCAL_SUMMARIZER,
    Skip,
    Summarizer,
    SummarizerDecision,
    Transcript,
    UseLocal,
)
from .._records import (
    Hold,
    Rectification,
    RectificationReceipt,
    RectificationStore,
    RectifiedFile,
    content_hash,
    new_rectification_id,
    validate_subject_id,
    validate_text,
)
from .._stores import AgentStore
from ._amend import RECTIFIED_KEY, Request, amend_file, find_record
from ._context import SubjectContext, subject_context
from ._erasure import _request
from ._removal import remove_temps

if TYPE_CHECKING:
    from .._governance import Governance

    Target: TypeAlias = Governance | SubjectContext | str | os.PathLike[str]

__all__ = [
    "SubjectRecord",
    "SummarizerGate",
    "rectification_receipts",
    "rectify",
    "resume_rectifications",
    "subject_records",
]

DEFAULT_ACTOR = "api"
SUMMARY_MAX_TOKENS = 4000
logger = logging.getLogger("governed_memory")
_RECORD_ID = re.compile(rf"^{RECORD_ID_PREFIX}[0-9a-f]{{16}}$")
NO_SOURCE = (
    "no source to summarise again: the summary does not open its file, or the file it was "
    "built from is gone (purged)"
)


class SummarizerGate(Protocol):
    """What decides which summarizer may see a transcript (a Governance is one)."""

    def summarizer_decision(
        self, model: str, subjects: Iterable[str | None] = (), *, agent: str | None = None
    ) -> SummarizerDecision: ...


@dataclass(frozen=True)
class SubjectRecord:
    """One stored record of a subject, with the id a rectification names it by."""

    id: str
    agent: str
    file: str
    role: str
    timestamp: str
    content: str
    rectified: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent": self.agent,
            "file": self.file,
            "role": self.role,
            "timestamp": self.timestamp,
            "content": self.content,
            "rectified": list(self.rectified),
        }


def _store(ctx: SubjectContext) -> RectificationStore:
    return RectificationStore(ctx.governance_dir, sealing=ctx.sealing)


def _files(ctx: SubjectContext, memory: AgentStore) -> list[tuple[str | None, str]]:
    """(archive id, or None for the active memory; text) of a memory, oldest first."""
    found: list[tuple[str | None, str]] = []
    for archive in memory.list_archives():
        found.append((archive, memory.read_archive(archive)))
    text = memory.read_memory()
    if text is not None:
        found.append((None, text))
    return found


def subject_records(
    target: Target, subject: str, *, agent: str | None = None
) -> list[SubjectRecord]:
    """Every record of ``subject`` (not summaries), with its id: what ``rectify --list`` shows.

    Read under each agent's lock, archives oldest first, then the memory.
    """
    ctx = subject_context(target)
    subject = validate_subject_id(subject)
    found: list[SubjectRecord] = []
    for name, store in ctx.stores(only=agent):
        for memory in ctx.memories_of(store):
            for archive, text in _files(ctx, memory):
                records = parse_memory(text).records
                for record, rid in zip(records, record_ids(name, records), strict=True):
                    if rid is None or record.subject_id != subject or is_summary(record):
                        continue
                    rectified = record.meta.get(RECTIFIED_KEY)
                    found.append(
                        SubjectRecord(
                            id=rid,
                            agent=name,
                            file=ctx.source(memory, archive),
                            role=record.role,
                            timestamp=record.timestamp,
                            content=record.content,
                            rectified=tuple(rectified) if isinstance(rectified, list) else (),
                        )
                    )
    return found


def _locate(ctx: SubjectContext, record_id: str) -> tuple[str, list[Record]]:
    """(agent, every stored copy) of the record ``record_id``.

    Raises:
        NotFoundError: no record has that id.
    """
    for name, store in ctx.stores():
        copies: list[Record] = []
        for memory in ctx.memories_of(store):
            for _archive, text in _files(ctx, memory):
                records = parse_memory(text).records
                copies += [
                    r
                    for r, rid in zip(records, record_ids(name, records), strict=True)
                    if rid == record_id
                ]
        if copies:
            return name, copies
    raise NotFoundError(
        f"no record {record_id!r} in {ctx.agents_where}; take the id from the subject's export "
        "or from `governed-memory rectify --subject S --list` (it may have been erased or purged)"
    )


def _check_request(subject: str, record: str, text: str, reason: str, actor: str) -> str:
    """The new content as it is stored, after refusing what no record can hold."""
    validate_subject_id(subject)
    if not isinstance(record, str) or not _RECORD_ID.match(record):
        raise ConfigurationError(
            f"record id {record!r} is not a record id; ids look like 'rec-' and 16 hex "
            "digits, e.g. 'rec-3f2a9c0d1e4b5a67' (governed-memory rectify --subject S --list)"
        )
    if not isinstance(text, str):
        raise ConfigurationError(f"rectified text must be a string, got {type(text).__name__}")
    content = to_disk_text(text)
    if content is None:
        raise ConfigurationError(
            "the rectified text is empty; give the corrected content of the record (to remove "
            "the record instead, erase it: docs/subject-requests.md)"
        )
    validate_text("text", content, fix="give the corrected content as plain UTF-8 text")
    _request(reason, actor)
    return content


def _blocking_holds(ctx: SubjectContext, subject: str, agent: str) -> list[Hold]:
    if ctx.holds is None:
        return []
    found = {h.id: h for h in ctx.holds.holds_for(subject=subject)}
    found.update((h.id, h) for h in ctx.holds.holds_for(agent=agent))
    return sorted(found.values(), key=lambda h: h.id)


def rectify(
    target: Target,
    *,
    subject: str,
    record: str,
    text: str,
    reason: str = "",
    actor: str = DEFAULT_ACTOR,
    summarizer: Summarizer | None = None,
    gate: SummarizerGate | None = None,
) -> RectificationReceipt:
    """Replace the content of ``subject``'s record ``record`` everywhere it is stored.

    Args:
        target: a :class:`~governed_memory.Governance` or a workspace folder.
        subject: the data subject the record belongs to.
        record: the record's id (``rec-`` and 16 hex digits), as the subject's
            export and ``governed-memory rectify --list`` show it.
        text: the corrected content (stripped, as every message is stored).
        reason: why (stored in the receipt, e.g. a ticket number).
        actor: who asked (stored in the receipt).
        summarizer: what regenerates summaries under
            ``summarization.on_rectify = "regenerate"`` (default: the local
            extractive summarizer).
        gate: decides whether ``summarizer`` may see the transcript (default:
            ``target`` when it is a Governance). Without one, only a local
            summarizer is used.

    Returns:
        The receipt, also stored in ``rectifications/<id>.json``. Running the
        same rectification again returns the receipt of the one that set
        this content.

    Raises:
        ConfigurationError: a bad subject id, record id, empty text, or text,
            reason or actor no record can store; nothing was written. Also a
            record that is another subject's, or a summary.
        NotFoundError: no record has that id.
        RectificationBlockedError: a legal hold on the subject or the agent
            applies; nothing was changed (audited, outcome ``blocked``).
        StorageError: a file could not be read or rewritten; the pending
            request makes the next run finish the job.
    """
    ctx = subject_context(target)
    gate = gate if gate is not None else _gate_of(target)
    content = _check_request(subject, record, text, reason, actor)
    with _store(ctx).session():
        _resume(ctx, summarizer=summarizer, gate=gate)
        return _start(ctx, subject, record, content, reason, actor, summarizer, gate)


def _start(
    ctx: SubjectContext,
    subject: str,
    record: str,
    content: str,
    reason: str,
    actor: str,
    summarizer: Summarizer | None,
    gate: SummarizerGate | None,
) -> RectificationReceipt:
    agent, copies = _locate(ctx, record)
    owner = copies[0].subject_id
    if owner != subject:
        raise ConfigurationError(
            f"record {record!r} is not a record of subject {subject!r}; a rectification "
            "corrects the requester's own records only. Check the subject id and the record id "
            "(governed-memory rectify --subject S --list)"
        )
    if any(is_summary(r) for r in copies):
        raise ConfigurationError(
            f"record {record!r} is a summary; summaries are derived data: rectify the record "
            "it was built from, and its summaries are marked or regenerated "
            "(summarization.on_rectify)"
        )
    if all(r.content == content for r in copies):
        done = _receipt_setting(ctx, copies)
        if done is not None:
            return done
        raise ConfigurationError(
            f"record {record!r} already reads exactly so; nothing to rectify. Check the text"
        )
    holds = _blocking_holds(ctx, subject, agent)
    if holds:
        ctx.audit.record(
            "rectify",
            agent=agent,
            subject_id=subject,
            outcome="blocked",
            record_id=record,
            holds=",".join(h.id for h in holds),
            policy_id=ctx.policy.id,
            policy_version=ctx.policy.version,
        )
        raise RectificationBlockedError(f"record {record!r} of subject {subject!r}", holds)
    now = ctx.clock.now().astimezone()
    salt = secrets.token_hex(16)
    item = Rectification(
        id=new_rectification_id(now),
        subject=subject,
        record_id=record,
        agent=agent,
        requested_at=now.isoformat(),
        requested_by=actor,
        reason=reason,
        policy_id=ctx.policy.id,
        policy_version=ctx.policy.version,
        salt=salt,
        old_hashes=tuple(sorted({content_hash(salt, r.content) for r in copies})),
        new_hash=content_hash(salt, content),
        text=content,
        old_texts=tuple(sorted({r.content for r in copies})),
    )
    ctx.check_signing("the rectification")  # refused before the first write, not at the receipt
    _store(ctx).write(item)
    return _complete(ctx, item, resumed=False, summarizer=summarizer, gate=gate)


def _gate_of(target: object) -> SummarizerGate | None:
    decide = getattr(target, "summarizer_decision", None)
    return target if callable(decide) else None  # type: ignore[return-value]


def _receipt_setting(ctx: SubjectContext, copies: list[Record]) -> RectificationReceipt | None:
    """The receipt of the rectification that gave ``copies`` their content, if one did."""
    names = copies[0].meta.get(RECTIFIED_KEY)
    if not isinstance(names, list) or not names:
        return None
    item = _store(ctx).get(str(names[-1]))
    if item is None or item.receipt is None or item.pending:
        return None
    return RectificationReceipt.from_dict(item.receipt)


def resume_rectifications(
    target: Target,
    *,
    summarizer: Summarizer | None = None,
    gate: SummarizerGate | None = None,
) -> list[RectificationReceipt]:
    """Finish every pending rectification (one a crash interrupted); return their receipts."""
    ctx = subject_context(target)
    gate = gate if gate is not None else _gate_of(target)
    with _store(ctx).session():
        return _resume(ctx, summarizer=summarizer, gate=gate)


def _resume(
    ctx: SubjectContext, *, summarizer: Summarizer | None, gate: SummarizerGate | None
) -> list[RectificationReceipt]:
    return [
        _complete(ctx, item, resumed=True, summarizer=summarizer, gate=gate)
        for item in _store(ctx).pending()
    ]


def rectification_receipts(target: Target) -> list[RectificationReceipt]:
    """Receipts of every completed rectification, oldest first."""
    return _store(subject_context(target)).receipts()


def _held_others(ctx: SubjectContext, subject: str) -> dict[str, tuple[str, ...]]:
    if ctx.holds is None:
        return {}
    return {s: ids for s, ids in ctx.holds.active().subjects.items() if s != subject}


class _Summaries:
    """Regenerates summaries per the policy, and says why it could not (the receipt's fallback)."""

    def __init__(
        self,
        ctx: SubjectContext,
        agent: str,
        summarizer: Summarizer | None,
        gate: SummarizerGate | None,
    ) -> None:
        self.on = str(ctx.policy.summarization.on_rectify) == "regenerate"
        self.agent = agent
        self.summarizer = summarizer
        self.gate = gate
        self.fallback: str | None = None
        self.model: str | None = None

    def _local(self) -> Summarizer:
        from .._memory import ExtractiveSummarizer

        return ExtractiveSummarizer()

    def _allowed(self, source: list[Record]) -> Summarizer | None:
        wanted = self.summarizer or self._local()
        if self.gate is None:
            # No decision can be asked: only what stays in the process.
            return wanted if not wanted.remote else self._local()
        subjects: set[str | None] = set()
        for record in source:
            found = record_subjects(record)
            subjects |= found if found else {None}
        decision = self.gate.summarizer_decision(wanted.model, subjects, agent=self.agent)
        if isinstance(decision, Skip):
            self.fallback = f"summarizer not allowed: {decision.reason}"
            return None
        if isinstance(decision, UseLocal):
            return self._local() if decision.model == LOCAL_SUMMARIZER else wanted
        return wanted

    def for_file(self, previous: str | None) -> Callable[[int, Record], str | None] | None:
        """The regenerate callback of a file whose predecessor's (corrected) text is ``previous``."""
        if not self.on:
            return None

        def regenerate(index: int, summary: Record) -> str | None:
            source = parse_memory(previous).records if previous is not None else []
            if index != 0 or not source:
                self.fallback = self.fallback or NO_SOURCE
                return None
            chosen = self._allowed(source)
            if chosen is None:
                return None
            return self._summarize(chosen, source)

        return regenerate

    def _summarize(self, summarizer: Summarizer, source: list[Record]) -> str | None:
        from .._memory import SUMMARY_PREFIX

        messages = [{"role": r.role, "content": r.content} for r in source]
        text = "\n\n".join(f"{r.role}: {r.content}" for r in source)
        try:
            body = summarizer.summarize(
                Transcript(text=text, messages=messages),
                max_tokens=SUMMARY_MAX_TOKENS,
                temperature=None,
            )
        except Exception as exc:  # a model call that failed: mark instead, and say so
            self.fallback = f"summarizer {summarizer.model!r} failed: {type(exc).__name__}"
            return None
        if body is None or not str(body).strip():
            self.fallback = f"summarizer {summarizer.model!r} returned an empty summary"
            return None
        self.model = summarizer.model
        body = str(body).strip()
        return body if body.startswith(SUMMARY_PREFIX.strip()) else SUMMARY_PREFIX + body


def _complete(
    ctx: SubjectContext,
    item: Rectification,
    *,
    resumed: bool,
    summarizer: Summarizer | None,
    gate: SummarizerGate | None,
) -> RectificationReceipt:
    store = _store(ctx)
    current = store.get(item.id) or item
    if not current.pending and current.receipt is not None:
        return RectificationReceipt.from_dict(current.receipt)
    ctx.check_signing("the rectification")
    assert current.text is not None, "a pending rectification keeps its text"
    resumed = resumed or bool(store.progress(current.id))
    request = Request(
        agent=current.agent,
        subject=current.subject,
        record_id=current.record_id,
        text=current.text,
        rectification_id=current.id,
        day=ctx.clock.now().date(),
        record_time=None,
        old_texts=current.old_texts,
    )
    summaries = _Summaries(ctx, current.agent, summarizer, gate)
    held = _held_others(ctx, current.subject)
    for _name, agent_store in ctx.stores(only=current.agent):
        request = replace(request, record_time=_record_time(ctx, agent_store, request))
        for memory in ctx.memories_of(agent_store):
            _rectify_memory(ctx, store, current, memory, request, held, summaries)
    receipt = _receipt(ctx, current, store.progress(current.id), resumed)
    store.write(current.completed(receipt))
    store.drop_progress(current.id)
    ctx.audit.record(
        "rectify",
        agent=current.agent,
        subject_id=current.subject,
        outcome="partial" if receipt.holds else "ok",
        rectification_id=current.id,
        record_id=current.record_id,
        old_hashes=list(receipt.old_hashes),
        new_hash=receipt.new_hash,
        summaries_mode=receipt.summaries,
        files=len(receipt.files),
        records=receipt.records,
        summaries_marked=receipt.summaries_marked,
        summaries_regenerated=receipt.summaries_regenerated,
        summaries_held=receipt.summaries_held,
        fallback=receipt.fallback is not None,
        resumed=resumed,
        **({"model": receipt.model} if receipt.model else {}),
        **({"holds": ",".join(receipt.holds)} if receipt.holds else {}),
        policy_id=current.policy_id,
        policy_version=current.policy_version,
    )
    return receipt


def _rectify_memory(
    ctx: SubjectContext,
    store: RectificationStore,
    item: Rectification,
    memory: AgentStore,
    request: Request,
    held: dict[str, tuple[str, ...]],
    summaries: _Summaries,
) -> None:
    """Plan one memory (archives oldest first, then MEMORY.md), log the plan, then rewrite."""
    remove_temps(memory)  # a crashed compaction's temporary copy may hold the old text
    files = _files(ctx, memory)
    plans: list[tuple[str | None, str, Any]] = []
    previous: str | None = None
    for archive, text in files:
        amendment = amend_file(text, request, held=held, regenerate=summaries.for_file(previous))
        plans.append((archive, text, amendment))
        previous = amendment.text if amendment is not None else text
    changed = [(a, am) for a, _t, am in plans if am is not None and (am.changed or am.held)]
    if not changed:
        return
    entry: dict[str, Any] = {
        "agent": item.agent,
        "partition": memory.partition,
        "files": [
            RectifiedFile(
                agent=item.agent,
                file=ctx.source(memory, archive),
                records=am.records,
                summaries_marked=am.marked,
                summaries_regenerated=am.regenerated,
                summaries_held=am.held,
                bytes_written=len(am.text.encode("utf-8")) if am.changed else 0,
            ).to_dict()
            for archive, am in changed
        ],
        "holds": sorted({h for _a, am in changed for h in am.holds}),
        "fallback": summaries.fallback,
        "model": summaries.model,
    }
    store.log_progress(item.id, entry)
    for archive, am in changed:
        if not am.changed:
            continue
        if archive is None:
            memory.rewrite_memory(am.text)
        else:
            memory.rewrite_archive(archive, am.text)


def _record_time(ctx: SubjectContext, store: AgentStore, request: Request) -> str | None:
    """The record's timestamp (None: no copy left, so every summary naming the subject counts)."""
    for memory in ctx.memories_of(store):
        for _archive, text in _files(ctx, memory):
            found = find_record(text, request.agent, request.record_id)
            if found:
                return found[0].timestamp
    return None


def _receipt(
    ctx: SubjectContext, item: Rectification, progress: list[dict[str, Any]], resumed: bool
) -> RectificationReceipt:
    """The receipt from the progress lines: the last plan of each file wins."""
    latest: dict[str, RectifiedFile] = {}
    holds: set[str] = set()
    fallback: str | None = None
    model: str | None = None
    for entry in progress:
        for data in entry.get("files", []):
            file = RectifiedFile.from_dict(data)
            previous = latest.get(file.file)
            latest[file.file] = file if previous is None else _merge(previous, file)
        holds.update(entry.get("holds", []))
        fallback = fallback or entry.get("fallback")
        model = model or entry.get("model")
    receipt = RectificationReceipt(
        id=item.id,
        subject=item.subject,
        record_id=item.record_id,
        agent=item.agent,
        requested_at=item.requested_at,
        requested_by=item.requested_by,
        reason=item.reason,
        completed_at=ctx.clock.now().astimezone().isoformat(),
        policy_id=item.policy_id,
        policy_version=item.policy_version,
        salt=item.salt,
        old_hashes=item.old_hashes,
        new_hash=item.new_hash,
        summaries=str(ctx.policy.summarization.on_rectify),
        files=tuple(latest[k] for k in sorted(latest)),
        resumed=resumed,
        fallback=fallback,
        model=model,
        holds=tuple(sorted(holds)),
    )
    # Signed on the one receipt path (docs/evidence.md), like an erasure's receipt.
    return RectificationReceipt.from_dict(ctx.sign_receipt(receipt.to_dict()))


def _merge(first: RectifiedFile, later: RectifiedFile) -> RectifiedFile:
    """Two plans of one file (a run, then its resumption): what both changed.

    The resumed run plans only what the interrupted one had not written yet,
    so counts add up; a file the first run rewrote shows nothing new.
    """
    return RectifiedFile(
        agent=first.agent,
        file=first.file,
        records=max(first.records, later.records),
        summaries_marked=max(first.summaries_marked, later.summaries_marked),
        summaries_regenerated=max(first.summaries_regenerated, later.summaries_regenerated),
        summaries_held=max(first.summaries_held, later.summaries_held),
        bytes_written=later.bytes_written or first.bytes_written,
    )
