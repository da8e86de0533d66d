"""The retention planner: which artefacts the policy requires deleting at a given time.

``plan(state, policy, now) -> Plan`` is pure: no disk, no clock. The shell
scans the workspace once, reads the clock once (or takes ``--as-of``) and
hands both in. Rules, one per kind of artefact (``forever`` disables one):

======================  ========================================================
rule                    deletes
======================  ========================================================
archives_max_age        archives older than the age
archives_max_count      archives beyond the newest N of each memory (an agent's
                        own, and each of its subject memories)
idle_memory_max_age     an active memory (an agent's own, or a subject memory)
                        not written for longer
exports_max_age         exports older than the age
audit_max_age           whole audit segments whose newest entry is older
consent_records_max_age consent records older than the age and no longer in
                        force (the latest grant of a subject and purpose stays)
tombstones_max_age      tombstones of completed erasures older than the age
======================  ========================================================

Floors (``audit_min_age``) protect by real age: they are measured from
``floor_now``, the clock's time, even when ``now`` (the planning time, a
dry run's ``--as-of``) is later. An audit segment is deleted only when it is
older than ``audit_max_age`` at ``now`` *and* older than ``audit_min_age``
at ``floor_now``; so moving the planning clock never cuts a floor short.

"Older than" is strict: under a 30-day rule an archive of exactly 30 days is
kept, one of 30 days and one second is deleted. An artefact's age runs from
the time in its name (archives: ``history_<ts>``; consent records and
tombstones: their recorded time) and falls back to its mtime. Artefacts
marked ``current`` are never deleted by age.

Holds: an artefact in a held agent's folder (its subject memories included), or holding a record of a held
subject or a summary whose lineage names one, is listed as held (with the hold ids) instead of deleted. When a
subject hold exists and an artefact's subjects are unknown (not read, or
encrypted without a reader) it is held: a hold errs on the side of keeping.
Audit segments and tombstones carry no message content and are not held.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from .._base import ArtefactKind, format_duration
from .._policy import AGE_RULES, HOLDABLE, Policy, RetentionPolicy, Rule, age_limit
from .._records import HoldSet
from ._state import AgentState, Artefact, WorkspaceState

__all__ = ["Plan", "PlanItem", "Rule", "iter_plan", "plan"]

# The age rules of what lies outside agent folders; memories and archives are planned per agent.
_OTHER_KINDS = (
    ArtefactKind.EXPORT,
    ArtefactKind.AUDIT,
    ArtefactKind.CONSENT,
    ArtefactKind.TOMBSTONE,
)
_AGE_RULES = {kind: AGE_RULES[kind] for kind in _OTHER_KINDS}


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One artefact a rule requires deleting; ``held_by`` names the holds that keep it.

    ``limit`` is the rule's value (a maximum age, or for ``archives_max_count``
    the number kept, with the archive's ``rank`` newest first among ``total``).
    """

    artefact: Artefact
    rule: Rule
    as_of: _dt.datetime
    limit: _dt.timedelta | int
    held_by: tuple[str, ...] = ()
    rank: int = 0
    total: int = 0

    @property
    def held(self) -> bool:
        return bool(self.held_by)

    @property
    def detail(self) -> str:
        """Why the rule requires it, for people (built on demand: plans can be huge)."""
        a = self.artefact
        if isinstance(self.limit, int):
            return f"archive {self.rank} of {self.total}, over the {self.limit} kept"
        age = _span(self.as_of - a.when)
        if self.rule is Rule.IDLE_MEMORY_MAX_AGE:
            return f"not written for {age}, over {format_duration(self.limit)}"
        source = "named" if a.named_at is not None else "modified"
        return f"{source} {a.when:%Y-%m-%d %H:%M:%S}, {age} old, over {format_duration(self.limit)}"


@dataclass(frozen=True)
class Plan:
    """What the policy requires at ``as_of``: deletions, and held artefacts skipped."""

    as_of: _dt.datetime
    policy_id: str
    policy_version: str
    items: tuple[PlanItem, ...]

    @property
    def deletions(self) -> tuple[PlanItem, ...]:
        return tuple(i for i in self.items if not i.held)

    @property
    def held(self) -> tuple[PlanItem, ...]:
        return tuple(i for i in self.items if i.held)

    @property
    def bytes_to_free(self) -> int:
        return sum(i.artefact.size for i in self.items if not i.held)

    def counts(self) -> dict[str, int]:
        """Deletions per rule."""
        return dict(Counter(i.rule.value for i in self.items if not i.held))


def plan(
    state: WorkspaceState,
    policy: Policy,
    now: _dt.datetime,
    *,
    floor_now: _dt.datetime | None = None,
) -> Plan:
    """Every deletion ``policy`` requires in ``state`` at ``now`` (naive local time).

    ``floor_now`` is the real time the floors are measured from (default:
    ``now``); the shell passes its clock's time when ``now`` is an ``as_of``.
    """
    return Plan(
        as_of=now,
        policy_id=policy.id,
        policy_version=policy.version,
        items=tuple(iter_plan(state, policy.retention, now, floor_now=floor_now)),
    )


def iter_plan(
    state: WorkspaceState,
    retention: RetentionPolicy,
    now: _dt.datetime,
    *,
    floor_now: _dt.datetime | None = None,
) -> Iterator[PlanItem]:
    """:func:`plan`'s items one by one, consuming ``state`` lazily (agents in order)."""
    real_now = now if floor_now is None else floor_now
    holds = state.holds
    for agent in state.agents:
        yield from _agent_items(agent, retention, now, holds)
    for artefact in state.others:
        rule = _AGE_RULES.get(artefact.kind)
        if rule is None:
            continue
        limit = age_limit(retention, rule)  # audit: never under its minimum
        if limit is None or artefact.current or now - artefact.when <= limit:
            continue
        if rule is Rule.AUDIT_MAX_AGE and real_now - artefact.when <= retention.audit_min_age:
            continue  # the floor counts real age: a later planning time does not shorten it
        yield PlanItem(artefact, rule, now, limit, _held_by(artefact, holds))


def _agent_items(
    agent: AgentState, retention: RetentionPolicy, now: _dt.datetime, holds: HoldSet
) -> Iterator[PlanItem]:
    max_age, max_count = retention.archives_max_age, retention.archives_max_count
    if max_age is not None or max_count is not None:
        newest_first = sorted(agent.archives, key=lambda a: (a.when, a.path), reverse=True)
        total = len(newest_first)
        for rank, archive in enumerate(newest_first, start=1):
            if max_age is not None and now - archive.when > max_age:
                held = _held_by(archive, holds)
                yield PlanItem(archive, Rule.ARCHIVES_MAX_AGE, now, max_age, held)
            elif max_count is not None and rank > max_count:
                held = _held_by(archive, holds)
                yield PlanItem(archive, Rule.ARCHIVES_MAX_COUNT, now, max_count, held, rank, total)
    idle = retention.idle_memory_max_age
    if idle is not None:
        for memory in agent.memory:
            if now - memory.when > idle:
                held = _held_by(memory, holds)
                yield PlanItem(memory, Rule.IDLE_MEMORY_MAX_AGE, now, idle, held)


def _held_by(artefact: Artefact, holds: HoldSet) -> tuple[str, ...]:
    if artefact.kind not in HOLDABLE:
        return ()
    return holds.keeping(artefact.agent, artefact.subjects)


def _span(delta: _dt.timedelta) -> str:
    return format_duration(_dt.timedelta(seconds=int(delta.total_seconds())))
