"""Erasure (GDPR Art. 17): a subject's or an agent's data out of every file.

The steps of one erasure, each durable before the next::

    1. legal holds are checked              -> ErasureBlockedError, nothing written
    2. a tombstone is written (pending)     <governance>/tombstones/<id>.json
    3. per agent, under the folder's lock:  per memory (the agent's own, then each
                                            subject memory): plan logged (counts,
                                            fsynced), then each affected file
                                            rewritten atomically (see ``_removal``)
    4. data keys destroyed (encrypted workspaces: crypto-shredding)
    5. the tombstone becomes the receipt    state complete, counts per agent and file

A crash anywhere leaves a pending tombstone; the next ``erase``,
``resume_erasures``, scheduler run or governed open of an affected agent
finishes it (each step is idempotent: a file without the subject's data is
not touched again). One process at a time works on a tombstone (an flock on
``.<id>.lock`` beside it); whoever comes second finds it complete.

Failures stay local (issue 13): an agent, or one memory of it, that cannot
be finished (a damaged file, a missing key, a symbolic link) does not stop
the others. Step 3 goes on through every agent; steps 4 and 5 wait, the
tombstone stays pending and the run reports a :class:`PendingErasure`
(agent, file, error, fix), audited with outcome ``error``. ``erase`` and
``resume_erasures`` raise it as a StorageError after trying everything;
``run_due_erasures`` returns it and runs the next erasure.

What is removed: records whose subject is the subject, and summaries whose
lineage names the subject (replaced by a marker record). Holds follow
lineage: a summary whose lineage also names another subject under a legal
hold is derived from held data, so it is kept; the rest of the erasure
proceeds, and the receipt lists the kept summaries with the hold ids
(``state`` ``partial``, audit outcome ``partial``). The subject's keys are
not shredded then (a kept summary may be sealed under them). Run the erasure
again once the hold is released to remove them and shred the keys. With ``agent``
alone, the whole agent folder, its subject memories with it. With both, the
subject's data in that agent only (keys are then kept: they also protect the
subject's data elsewhere).

Subject memories (``isolation = "subject"``): the subject's own memory in an
agent is deleted as a whole, folder and all, once nothing but erasure markers
would be left in it; a summary kept by a hold keeps it. Every other memory
(the agent's, another subject's) is rewritten as above, and left byte for
byte as it was when it holds nothing of the subject.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias

from .._base import (
    format_duration,
    parse_duration,
    validate_agent_name,
)
from .._errors import ConfigurationError, GovernedMemoryError, NotFoundError, StorageError
from .._format import subjects_in_text
from .._records import (
    COMPLETE,
    ErasureReceipt,
    ErasureScope,
    HeldSummaries,
    Hold,
    ScheduledErasure,
    Tombstone,
    new_erasure_id,
    validate_subject_id,
    validate_text,
)
from ._batches import erase_agents
from ._context import SubjectContext, subject_context
from ._errors import ErasureBlockedError
from ._removal import (
    aggregate_blocked,
    aggregate_files,
    erasure_agents,
    unreadable_agent,
)
from ._requests import follow_up, settle
from ._unfinished import PendingErasure, Unfinished, refuse_linked_agent, unfinished_from

if TYPE_CHECKING:
    from .._governance import Governance

    Target: TypeAlias = Governance | SubjectContext | str | os.PathLike[str]

__all__ = [
    "blocking_holds",
    "cancel_scheduled_erasure",
    "check_holds",
    "erase",
    "erasure_receipts",
    "pending_erasure",
    "resume_erasures",
    "run_due_erasures",
    "schedule_erasure",
    "scheduled_erasure_task",
]

DEFAULT_ACTOR = "api"
logger = logging.getLogger("governed_memory")

Progress = Callable[[str, int, int], None]
"""Told ``(agent, done, total)`` after each agent an erasure went through."""


def _scope(subject: str | None, agent: str | None) -> ErasureScope:
    return ErasureScope(
        subject=validate_subject_id(subject) if subject is not None else None,
        agent=validate_agent_name(agent) if agent is not None else None,
    )


def _request(reason: str, actor: str) -> None:
    """Refuse a reason or actor no record can store, before anything is written."""
    validate_text("reason", reason, fix="give a reason such as a ticket number")
    validate_text("actor", actor, fix="give a name such as 'dpo@example.org'")


def _aware_now(ctx: SubjectContext) -> _dt.datetime:
    return ctx.clock.now().astimezone()


def blocking_holds(ctx: SubjectContext, scope: ErasureScope) -> list[Hold]:
    """The active legal holds that forbid erasing ``scope`` (empty: go ahead).

    A hold on the subject always blocks. A hold on an agent blocks when the
    erasure would delete something in it: the whole agent, or the subject's
    records there. A hold on another subject blocks a whole-agent erasure of
    an agent holding that subject's records. "In an agent" includes its
    subject memories.
    """
    registry = ctx.holds
    if registry is None:
        return []
    active = registry.active()
    found: dict[str, Hold] = {}

    def add(holds: list[Hold]) -> None:
        found.update((h.id, h) for h in holds)

    if scope.subject is not None:
        add(registry.holds_for(subject=scope.subject))
        held_agents = [scope.agent] if scope.agent is not None else sorted(active.agents)
        for name in held_agents:
            if active.for_agent(name) and scope.subject in _agent_subjects(ctx, name):
                add(registry.holds_for(agent=name))
    elif scope.agent is not None:
        add(registry.holds_for(agent=scope.agent))
        if active.has_subject_holds:
            for subject in sorted(_agent_subjects(ctx, scope.agent)):
                add(registry.holds_for(subject=subject))
    return sorted(found.values(), key=lambda h: h.id)


def _agent_subjects(ctx: SubjectContext, agent: str) -> set[str]:
    """Every subject with a record or summary anywhere in ``agent``, its subject memories too."""
    subjects: set[str] = set()
    for _name, store in ctx.stores(only=agent):
        for memory in ctx.memories_of(store):
            texts = [memory.read_memory()]
            texts += [memory.read_archive(a) for a in memory.list_archives()]
            for text in texts:
                if text is not None:
                    subjects |= subjects_in_text(text)
    return subjects


def check_holds(
    ctx: SubjectContext,
    scope: ErasureScope,
    *,
    actor: str = DEFAULT_ACTOR,
    erasure_id: str | None = None,
) -> None:
    """Raise :class:`ErasureBlockedError` when a legal hold covers ``scope``.

    The blocked erasure of a subject is entered in the request register too
    (``_requests.follow_up``), with the holds as its reason.
    """
    holds = blocking_holds(ctx, scope)
    if holds:
        ids = tuple(h.id for h in holds)
        follow_up(
            ctx,
            scope,
            reason=f"erasure blocked by legal hold(s) {', '.join(ids)}",
            actor=actor,
            erasure_id=erasure_id,
            holds=ids,
        )
        ctx.audit.record(
            "erase",
            agent=scope.agent,
            subject_id=scope.subject,
            outcome="blocked",
            holds=",".join(h.id for h in holds),
            policy_id=ctx.policy.id,
            policy_version=ctx.policy.version,
        )
        raise ErasureBlockedError(scope.describe(), holds)


def erase(
    target: Target,
    *,
    subject: str | None = None,
    agent: str | None = None,
    reason: str = "",
    actor: str = DEFAULT_ACTOR,
    progress: Progress | None = None,
) -> ErasureReceipt:
    """Erase ``subject`` (everywhere, or in ``agent`` only) or the whole ``agent``.

    Args:
        target: a :class:`~governed_memory.Governance` or a workspace folder.
        subject: the data subject to erase.
        agent: restrict to this agent; alone, erase the whole agent folder.
        reason: why (stored in the receipt, e.g. a ticket number).
        actor: who asked (stored in the receipt).
        progress: told ``(agent, done, total)`` after each agent.

    Returns:
        The receipt, also stored with the tombstone. Its ``state`` is
        ``partial`` when a hold on another subject of a summary's lineage kept
        that summary (``blocked`` names the files and holds); the rest is erased.

    Raises:
        ConfigurationError: a subject id, agent name, reason or actor no
            record can store (a lone surrogate, a NUL, ...); nothing was written.
        ErasureBlockedError: a legal hold on the subject (or on an agent
            holding its records) applies; nothing was erased.
        NotFoundError: ``agent`` has no folder in the workspace.
        StorageError: a file could not be rewritten; the pending tombstone
            makes the next run finish the job.
    """
    ctx = subject_context(target)
    scope = _scope(subject, agent)
    _request(reason, actor)
    refuse_linked_agent(ctx, scope, "erased")
    if scope.agent is not None and not ctx.has_agent(scope.agent):
        raise NotFoundError(
            f"{ctx.no_agent(scope.agent)}; check the name (governed-memory agents lists them)"
        )
    check_holds(ctx, scope, actor=actor)
    result = _start(ctx, scope, reason=reason, actor=actor, erasure_id=None, progress=progress)
    if isinstance(result, PendingErasure):
        raise result.error()
    return result


def _start(
    ctx: SubjectContext,
    scope: ErasureScope,
    *,
    reason: str,
    actor: str,
    erasure_id: str | None,
    progress: Progress | None = None,
) -> ErasureReceipt | PendingErasure:
    ctx.check_signing("the erasure")  # a receipt that must be signed can be: before any write
    now = _aware_now(ctx)
    tombstone = Tombstone(
        id=erasure_id or new_erasure_id(now),
        scope=scope,
        requested_at=now.isoformat(),
        requested_by=actor,
        reason=reason,
        policy_id=ctx.policy.id,
        policy_version=ctx.policy.version,
    )
    ctx.tombstones().write(tombstone)
    return complete_tombstone(ctx, tombstone, resumed=False, progress=progress)


def complete_tombstone(
    ctx: SubjectContext,
    tombstone: Tombstone,
    *,
    resumed: bool,
    progress: Progress | None = None,
    first: str | None = None,
) -> ErasureReceipt | PendingErasure:
    """Carry out (or finish) the erasure ``tombstone`` describes: its receipt, or what is pending.

    Agent by agent: an agent that cannot be finished (a damaged file, a
    missing key, a symbolic link) is recorded and the others go on. The
    tombstone completes only when nothing is left; otherwise it stays
    pending, the audit entry (outcome ``error``) lists what is left, and
    the :class:`PendingErasure` is returned. What is left is not stored: it
    is found again when asked (:func:`pending_erasure`).

    ``first`` (a governed Conversation opening that agent) does that agent's
    part first and raises when it fails (audited): its data must not be
    preloaded. The other agents follow, and what they leave undone is
    returned, not raised or audited: another agent's damaged file never stops
    this agent's open, and does not add an audit entry to each open either.
    """
    tombs = ctx.tombstones()
    with tombs.locked(tombstone.id):
        current = tombs.get(tombstone.id) or tombstone
        if current.state == COMPLETE and current.receipt is not None:
            return ErasureReceipt.from_dict(current.receipt)
        ctx.check_signing("the erasure")
        resumed = resumed or bool(tombs.progress(tombstone.id))
        day = ctx.clock.now().date()
        held = _held_others(ctx, current.scope.subject)
        names = erasure_agents(ctx, current.scope)
        if first is not None:
            mine = erase_agents(ctx, tombs, current, [first], day, held)
            if mine:
                pending = PendingErasure(current.id, current.scope, tuple(mine))
                _audit_pending(ctx, current, pending, resumed)
                raise StorageError(
                    f"agent {first!r} cannot be opened: {pending.message()}"
                ) from None
            names = [n for n in names if n != first]
        unfinished = erase_agents(ctx, tombs, current, names, day, held, progress)
        progress_log = tombs.progress(current.id)
        where = f"erasure progress of erasure {current.id}"
        blocked = aggregate_blocked(progress_log, where)
        if unfinished:
            pending = PendingErasure(
                current.id,
                current.scope,
                tuple(unfinished),
                done=len(set(names) - {u.agent for u in unfinished}),
            )
            if first is None:
                # The receipt of this run, state blocked, kept with the pending
                # tombstone: what was removed and what could not be reached.
                # A Conversation's open retries the other agents quietly: the
                # run that left them pending was audited and stored, and an
                # entry per open while an agent stays broken would flood both.
                last = _receipt(ctx, current, progress_log, where, (), resumed, blocked, unfinished)
                tombs.write(replace(current, receipt=last.to_dict()))
                pending = replace(pending, last_run=last)
                _audit_pending(ctx, current, pending, resumed)
                follow_up(
                    ctx,
                    current.scope,
                    reason=f"erasure {current.id} left pending: {pending.message()}",
                    actor=current.requested_by,
                    erasure_id=current.id,
                )
            return pending
        # A held summary attributed to the subject is sealed under their keys:
        # shredding waits until nothing of theirs is held (the next erasure).
        shredded = _shred(ctx, current.scope) if not blocked else ()
        receipt = _receipt(ctx, current, progress_log, where, shredded, resumed, blocked, [])
        tombs.write(
            replace(
                current,
                state=COMPLETE,
                completed_at=receipt.completed_at,
                receipt=receipt.to_dict(),
            )
        )
        tombs.drop_progress(current.id)
    ctx.audit.record(
        "erase",
        agent=current.scope.agent,
        subject_id=current.scope.subject,
        outcome="partial" if blocked else "ok",
        erasure_id=current.id,
        files=len(receipt.files),
        records=receipt.records,
        summaries=receipt.summaries,
        keys_shredded=len(shredded),
        resumed=resumed,
        **({"holds": ",".join(receipt.blocking_holds)} if blocked else {}),
        policy_id=current.policy_id,
        policy_version=current.policy_version,
    )
    settle(ctx, receipt)
    return receipt


def _receipt(
    ctx: SubjectContext,
    tombstone: Tombstone,
    progress_log: list[dict[str, Any]],
    where: str,
    shredded: tuple[str, ...],
    resumed: bool,
    blocked: tuple[HeldSummaries, ...],
    unfinished: list[Unfinished],
) -> ErasureReceipt:
    """The receipt of this run, signed (``ctx.sign_receipt``) as it will be stored."""
    receipt = ErasureReceipt(
        id=tombstone.id,
        scope=tombstone.scope,
        requested_at=tombstone.requested_at,
        requested_by=tombstone.requested_by,
        reason=tombstone.reason,
        completed_at=_aware_now(ctx).isoformat(),
        policy_id=tombstone.policy_id,
        policy_version=tombstone.policy_version,
        files=aggregate_files(progress_log, where),
        keys_shredded=shredded,
        resumed=resumed,
        blocked=blocked,
        unreached=tuple(u.unreached() for u in unfinished),
    )
    return ErasureReceipt.from_dict(ctx.sign_receipt(receipt.to_dict()))


def _audit_pending(
    ctx: SubjectContext, tombstone: Tombstone, pending: PendingErasure, resumed: bool
) -> None:
    """The audit entry of a run that left the erasure pending: outcome error, agents hashed."""
    ctx.audit.record(
        "erase",
        agent=tombstone.scope.agent,
        subject_id=tombstone.scope.subject,
        outcome="error",
        erasure_id=tombstone.id,
        error=pending.unfinished[0].error,
        agents=pending.agents,
        unfinished=len(pending.unfinished),
        agents_done=pending.done,
        pending=True,
        resumed=resumed,
        policy_id=tombstone.policy_id,
        policy_version=tombstone.policy_version,
    )


def _held_others(ctx: SubjectContext, subject: str | None) -> dict[str, tuple[str, ...]]:
    """The subjects other than ``subject`` under an active hold, with their hold ids.

    Read once per run: a hold placed or released meanwhile is seen by the
    next run (a resumed or repeated erasure), never halfway through an agent.
    """
    if subject is None or ctx.holds is None:
        return {}
    active = ctx.holds.active()
    return {s: ids for s, ids in active.subjects.items() if s != subject}


def _shred(ctx: SubjectContext, scope: ErasureScope) -> tuple[str, ...]:
    if ctx.keys is None:
        return ()
    if scope.agent is None and scope.subject is not None:
        ctx.keys.shred_subject(scope.subject)
        return ("subject",)
    if scope.subject is None and scope.agent is not None:
        ctx.keys.shred_agent(scope.agent)
        return ("agent",)
    return ()


# -- resuming and scheduling ------------------------------------------------


def resume_erasures(
    target: Target, *, agent: str | None = None, progress: Progress | None = None
) -> list[ErasureReceipt]:
    """Finish every pending erasure (or those covering ``agent``); return their receipts.

    Each one is tried even when another cannot be finished.

    Raises:
        StorageError: some erasures are still pending; the message lists each
            one with its agents, files, errors and fixes (the rest completed).
    """
    receipts, pending = _resume(subject_context(target), agent=agent, progress=progress)
    if pending:
        raise StorageError(" | ".join(p.message() for p in pending))
    return receipts


def _resume(
    ctx: SubjectContext, *, agent: str | None = None, progress: Progress | None = None
) -> tuple[list[ErasureReceipt], list[PendingErasure]]:
    receipts: list[ErasureReceipt] = []
    pending: list[PendingErasure] = []
    for tombstone in ctx.tombstones().pending():
        if agent is None or tombstone.scope.covers_agent(agent):
            result = _try(ctx, tombstone, progress=progress)
            if isinstance(result, PendingErasure):
                pending.append(result)
            else:
                receipts.append(result)
    return receipts, pending


def _try(
    ctx: SubjectContext, tombstone: Tombstone, *, progress: Progress | None = None
) -> ErasureReceipt | PendingErasure:
    """:func:`complete_tombstone`, a failure of the erasure's own records reported as pending.

    A damaged progress log or an unwritable tombstone stops this erasure
    only: the next one still runs.
    """
    try:
        return complete_tombstone(ctx, tombstone, resumed=True, progress=progress)
    except ErasureBlockedError:
        raise
    except (GovernedMemoryError, OSError) as exc:
        where = ctx.relative(ctx.tombstones().tombstone_dir / f"{tombstone.id}.json")
        return PendingErasure(tombstone.id, tombstone.scope, (unfinished_from("", where, exc),))


def schedule_erasure(
    target: Target,
    *,
    subject: str | None = None,
    agent: str | None = None,
    grace: Any,
    reason: str = "",
    actor: str = DEFAULT_ACTOR,
) -> ScheduledErasure:
    """Record an erasure that runs once ``grace`` (``30d``, a timedelta, ...) has passed.

    Holds are checked now (to fail early) and again when it falls due.
    """
    ctx = subject_context(target)
    scope = _scope(subject, agent)
    _request(reason, actor)
    try:
        delay = parse_duration(grace)
    except ValueError as exc:
        raise ConfigurationError(f"erase grace: {exc}") from exc
    if delay is None:
        raise ConfigurationError(
            f"erase grace {grace!r} means never; give a finite delay such as '30d'"
        )
    check_holds(ctx, scope, actor=actor)
    now = _aware_now(ctx)
    item = ScheduledErasure(
        id=new_erasure_id(now),
        scope=scope,
        due_at=(now + delay).isoformat(),
        requested_at=now.isoformat(),
        requested_by=actor,
        reason=reason,
    )
    ctx.tombstones().schedule(item)
    ctx.audit.record(
        "erase",
        agent=scope.agent,
        subject_id=scope.subject,
        outcome="scheduled",
        erasure_id=item.id,
        grace=format_duration(delay),
        policy_id=ctx.policy.id,
        policy_version=ctx.policy.version,
    )
    return item


def cancel_scheduled_erasure(target: Target, erasure_id: str) -> None:
    """Drop a scheduled erasure that has not run yet.

    Raises:
        NotFoundError: no scheduled erasure has that id (it may have run).
    """
    ctx = subject_context(target)
    if not ctx.tombstones().unschedule(erasure_id):
        raise NotFoundError(
            f"no scheduled erasure {erasure_id!r}; it may have run already "
            "(governed-memory erasures lists them)"
        )


def run_due_erasures(
    target: Target, now: _dt.datetime | None = None
) -> list[ErasureReceipt | ErasureBlockedError | PendingErasure]:
    """Run every scheduled erasure due at ``now`` (default: the clock), and resume pending ones.

    Every one is tried, whatever happens to the others. A due erasure blocked
    by a legal hold stays scheduled and is reported as its
    :class:`ErasureBlockedError`; one that could not be finished in some
    agents (a damaged file, a missing key, a link) becomes a pending
    tombstone and is reported as its :class:`PendingErasure` (the next run
    resumes it). Safe to call from several processes: a scheduled erasure
    becomes a tombstone with the same id before its schedule entry is removed.
    """
    ctx = subject_context(target)
    when = now if now is not None else ctx.clock.now()
    tombs = ctx.tombstones()
    receipts, pending = _resume(ctx)
    results: list[ErasureReceipt | ErasureBlockedError | PendingErasure] = [*receipts, *pending]
    tried = {r.id for r in results if not isinstance(r, ErasureBlockedError)}
    for item in tombs.scheduled():
        if not item.due(when):
            continue
        existing = tombs.get(item.id)
        try:
            if existing is not None:
                if item.id not in tried:  # another process started it meanwhile
                    results.append(_try(ctx, existing))
            else:
                check_holds(ctx, item.scope, actor=item.requested_by, erasure_id=item.id)
                results.append(
                    _start(
                        ctx,
                        item.scope,
                        reason=item.reason,
                        actor=item.requested_by,
                        erasure_id=item.id,
                    )
                )
        except ErasureBlockedError as exc:
            results.append(exc)
            continue
        # Complete or pending: the tombstone carries it from here.
        tombs.unschedule(item.id)
    return results


def scheduled_erasure_task(
    governance: Governance,
) -> list[ErasureReceipt | ErasureBlockedError | PendingErasure]:
    """The scheduler's task: :func:`run_due_erasures` now, logging what is blocked or pending."""
    results = run_due_erasures(governance)
    for result in results:
        if isinstance(result, ErasureBlockedError):
            # Not str(result): it names the subject and the holds' targets raw.
            logger.warning(
                "governed_memory: a scheduled erasure is due but blocked by legal hold(s) %s; "
                "it stays scheduled (governed-memory hold list, erasures list)",
                ", ".join(f"{h.id} on {_target_ref(governance, h)}" for h in result.holds),
            )
        elif isinstance(result, PendingErasure):
            # The message names agents, files and errors, never the subject.
            logger.error("governed_memory: %s", result.message())
        else:
            logger.info(
                "governed_memory: erasure %s of %s complete: %d records, %d summaries",
                result.id,
                _scope_ref(governance, result.scope),
                result.records,
                result.summaries,
            )
    return results


def _scope_ref(governance: Governance, scope: ErasureScope) -> str:
    """``scope.describe()`` with the subject named by its keyed hash (issue 13, item 7)."""
    parts = []
    if scope.subject is not None:
        parts.append(governance.subject_ref(scope.subject))
    if scope.agent is not None:
        parts.append(f"agent {scope.agent!r}")
    return " in ".join(parts)


def _target_ref(governance: Governance, hold: Any) -> str:
    subject = getattr(hold, "subject", None)
    return governance.subject_ref(subject) if subject else f"agent {getattr(hold, 'agent', '')!r}"


def pending_erasure(target: Target, erasure_id: str) -> PendingErasure | None:
    """What the pending erasure ``erasure_id`` cannot do now, and why; None if none is pending.

    Reads every agent it covers (links, every memory's files) and writes
    nothing, so it shows the state after a fix, not the last run's. Empty
    ``unfinished``: nothing stands in the way any more (an interrupted
    erasure, or one whose causes were fixed); ``erasures resume`` finishes it.
    """
    ctx = subject_context(target)
    tombstone = ctx.tombstones().get(erasure_id)
    if tombstone is None or not tombstone.pending:
        return None
    names = erasure_agents(ctx, tombstone.scope)
    found = [item for name in names for item in unreadable_agent(ctx, name)]
    done = len(set(names) - {u.agent for u in found})
    last = ErasureReceipt.from_dict(tombstone.receipt) if tombstone.receipt is not None else None
    return PendingErasure(tombstone.id, tombstone.scope, tuple(found), done=done, last_run=last)


def erasure_receipts(target: Target) -> list[ErasureReceipt]:
    """Receipts of every completed erasure still kept, oldest first."""
    ctx = subject_context(target)
    return [
        ErasureReceipt.from_dict(t.receipt)
        for t in ctx.tombstones().all()
        if t.state == COMPLETE and t.receipt is not None
    ]
