"""What GDPR Art. 15(1) asks beside the data: purposes, recipients, retention (plain data).

* :func:`purposes` (a): the purposes the policy names, what each means, whether
  it needs consent, and the subject's current consent.
* :func:`recipients` (c): the external summarizer models the subject's
  messages were sent to, from the ``summarize`` entries of the audit trail
  that name the subject's keyed hash (outcome ``allowed``, a model that is not
  ``local/...``); local summaries are listed apart: nothing left the process.
* :func:`retention` (d): for each artefact the export cites, the rule of the
  current policy that governs it and the date from which the next purge
  deletes it, or why it is kept (a legal hold, ``forever``, still in force).
  The rules are the planner's (``_policy._retention_rules``), ages counted as
  the retention scan counts them: an archive from the time in its name, a
  memory from its last write, a consent record and an erasure record from
  the time recorded in them, an audit entry from its own time (its segment
  goes once its newest entry is old enough, so the date is the earliest).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._base import ArtefactKind, format_duration
from .._policy import AGE_RULES, HOLDABLE, LOCAL_SUMMARIZER, Policy, Rule, age_limit
from .._policy import is_local_model as _is_local
from .._records import ErasureScope, HoldSet
from ._collect import FileSeen, tombstones_of
from ._context import SubjectContext

__all__ = ["PURPOSE_MEANINGS", "purposes", "recipients", "retention"]

PURPOSE_MEANINGS = {
    "persist": "keeping the messages of the conversations in the agent's memory on disk, so "
    "that later conversations can use them",
    "summarize": "sending a conversation to a model that writes a summary of it when the "
    "memory grows too long; the summary replaces the messages in the agent's memory",
}
_OTHER_PURPOSE = "a purpose the operator's policy names; ask the operator what it covers"

_APPLIES_TO = {
    Rule.ARCHIVES_MAX_AGE: "archives (copies of the memory set aside by a compaction)",
    Rule.ARCHIVES_MAX_COUNT: "archives beyond the newest N of each memory",
    Rule.IDLE_MEMORY_MAX_AGE: "an active memory not written for longer",
    Rule.EXPORTS_MAX_AGE: "exports kept in the workspace's exports folder",
    Rule.AUDIT_MAX_AGE: "audit log entries (whole segments, never before audit_min_age)",
    Rule.CONSENT_RECORDS_MAX_AGE: "consent records no longer in force",
    Rule.TOMBSTONES_MAX_AGE: "records of completed erasures",
}


def purposes(ctx: SubjectContext, subject: str | None) -> list[dict[str, Any]]:
    """Art. 15(1)(a): every purpose of the policy, with the subject's consent to it."""
    rules = ctx.policy.consent
    status = ctx.consent.status(subject) if ctx.consent is not None and subject else {}
    found = []
    for purpose in rules.purposes:
        event = status.get(purpose)
        consent: str | None = None
        if subject is not None:
            consent = (
                "not recorded" if event is None else "granted" if event.granted else "withdrawn"
            )
        found.append(
            {
                "purpose": purpose,
                "description": PURPOSE_MEANINGS.get(purpose, _OTHER_PURPOSE),
                "consent_required": purpose in rules.required_for,
                "consent": consent,
                "since": event.at if event is not None else None,
            }
        )
    return found


def _provider(model: str) -> str | None:
    return model.split("/", 1)[0] if "/" in model else None


def recipients(
    ctx: SubjectContext, audit: list[dict[str, Any]] | None, agents: Iterable[str]
) -> dict[str, Any]:
    """Art. 15(1)(c): the external models sent the subject's messages, and the local summaries."""
    if audit is None:
        allowed = ctx.policy.summarization.external_allowed
        return {
            "from_audit_trail": False,
            "external": [],
            "local": [],
            "note": "this workspace keeps no audit log (or has no audit key), so the models that "
            "received the data cannot be listed from records; the policy "
            + (
                f"allows external summarizer models matching {list(ctx.policy.summarization.allowed_models)}"
                if allowed
                else "allows no external summarizer model"
            ),
        }
    names = _agent_names(ctx, agents)
    external: dict[str, dict[str, Any]] = {}
    local: dict[tuple[str, str | None], dict[str, Any]] = {}
    for entry in audit:
        attrs = entry.get("attrs")
        if entry.get("event") != "summarize" or not isinstance(attrs, dict):
            continue
        model, outcome, at = attrs.get("model"), attrs.get("outcome"), str(entry.get("ts"))
        if not isinstance(model, str) or outcome not in ("allowed", "use_local"):
            continue  # "skip": no summary was made, nothing was sent
        if outcome == "allowed" and not _is_local(model):
            row = external.setdefault(
                model,
                {"model": model, "provider": _provider(model), "times": 0, "first_at": at},
            )
            row.setdefault("agents", set())
            agent = names.get(str(attrs.get("agent.hash")))
            if agent is not None:
                row["agents"].add(agent)
        else:
            used, instead = (model, None) if outcome == "allowed" else (LOCAL_SUMMARIZER, model)
            row = local.setdefault(
                (used, instead), {"model": used, "instead_of": instead, "times": 0, "first_at": at}
            )
        row["times"] += 1
        row["last_at"] = at
    return {
        "from_audit_trail": True,
        "external": [{**r, "agents": sorted(r["agents"])} for r in external.values()],
        "local": list(local.values()),
        "note": "external models are recipients: the text of the conversation was sent to them "
        "to be summarized; local summarizers run inside the process and disclose nothing",
    }


def _agent_names(ctx: SubjectContext, agents: Iterable[str]) -> dict[str, str]:
    """Keyed hash -> name of the workspace's agents (audit entries name agents by hash)."""
    if ctx.pseudonym is None:
        return {}
    return {ctx.pseudonym("agent", name): name for name in agents}


def _aware(when: _dt.datetime) -> str:
    return (when if when.tzinfo is not None else when.astimezone()).isoformat()


def _naive(iso: str) -> _dt.datetime:
    when = _dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return when.astimezone().replace(tzinfo=None) if when.tzinfo is not None else when


def _row(
    artefact: str,
    kind: ArtefactKind,
    agent: str | None,
    rule: Rule | None,
    limit: str | None,
    when: _dt.datetime | None,
    status: str,
    delete_after: _dt.datetime | None,
    held_by: tuple[str, ...],
    note: str,
) -> dict[str, Any]:
    return {
        "artefact": artefact,
        "kind": kind.value,
        "agent": agent,
        "rule": rule.value if rule is not None else None,
        "limit": limit,
        "age_from": _aware(when) if when is not None else None,
        "status": status,
        "delete_after": _aware(delete_after) if delete_after is not None else None,
        "held_by": list(held_by),
        "note": note,
    }


def _by_age(
    policy: Policy,
    artefact: str,
    kind: ArtefactKind,
    agent: str | None,
    when: _dt.datetime | None,
    held_by: tuple[str, ...] = (),
    *,
    in_force: str | None = None,
) -> dict[str, Any]:
    """The row of an artefact under its kind's age rule (held, in force, forever or a date)."""
    rule = AGE_RULES[kind]
    limit = age_limit(policy.retention, rule)
    shown = format_duration(limit) if limit is not None else "forever"
    if held_by:
        note = f"kept: legal hold {', '.join(held_by)}; deleted under {rule.value} once released"
        return _row(artefact, kind, agent, rule, shown, when, "held", None, held_by, note)
    if in_force is not None:
        return _row(artefact, kind, agent, rule, shown, when, "in_force", None, (), in_force)
    if limit is None or when is None:
        note = f"forever: {rule.value} = forever" if limit is None else "kept: its age is unknown"
        return _row(artefact, kind, agent, rule, shown, when, "forever", None, (), note)
    due = when + limit
    note = f"deleted by the first purge after {_aware(due)} ({rule.value} = {shown})"
    return _row(artefact, kind, agent, rule, shown, when, "scheduled", due, (), note)


def _file_row(policy: Policy, seen: FileSeen, holds: HoldSet, now: _dt.datetime) -> dict[str, Any]:
    kind = ArtefactKind(seen.kind)
    held = holds.keeping(seen.agent, seen.subjects) if kind in HOLDABLE else ()
    row = _by_age(policy, seen.source, kind, seen.agent, seen.when, held)
    count = policy.retention.archives_max_count
    if kind is ArtefactKind.ARCHIVE and not held and count is not None:
        return _by_count(row, seen, count, now)
    if kind is ArtefactKind.MEMORY and row["status"] == "scheduled":
        row["note"] += "; each new message moves the date later"
    return row


def _by_count(row: dict[str, Any], seen: FileSeen, count: int, now: _dt.datetime) -> dict[str, Any]:
    """An archive under ``archives_max_count`` (and perhaps an age too: the earlier wins)."""
    by_count = {"rule": Rule.ARCHIVES_MAX_COUNT.value, "limit": f"{count} archives"}
    if seen.rank > count:
        note = (
            f"deleted by the next purge: archive {seen.rank} of {seen.total}, over the {count} kept"
        )
        return {**row, **by_count, "status": "scheduled", "delete_after": _aware(now), "note": note}
    note = (
        f"kept while among the newest {count} archives of its memory (now {seen.rank} of "
        f"{seen.total}); {count - seen.rank + 1} more compaction(s) make it due"
    )
    if row["status"] == "scheduled":
        return {**row, "note": f"{row['note']}; or sooner: {note}"}
    return {**row, **by_count, "status": "by_count", "note": note}


def retention(
    ctx: SubjectContext,
    scope: ErasureScope,
    files: list[FileSeen],
    audit: list[dict[str, Any]] | None,
    out: Path,
    now: _dt.datetime,
) -> dict[str, Any]:
    """Art. 15(1)(d): the rules (criteria), and each cited artefact's deletion under them."""
    policy = ctx.policy
    holds = HoldSet.of(ctx.holds.holds()) if ctx.holds is not None else HoldSet()
    rows = [_file_row(policy, seen, holds, now) for seen in files]
    rows += _consent_rows(ctx, scope, holds)
    rows += _tombstone_rows(ctx, scope)
    if audit:
        oldest = min(_naive(str(e["ts"])) for e in audit)
        rows.append(
            _by_age(policy, f"audit log ({len(audit)} entries)", ArtefactKind.AUDIT, None, oldest)
        )
        if rows[-1]["status"] == "scheduled":
            rows[-1]["note"] += "; the oldest entry first, each with its segment"
    rows.append(_export_row(ctx, out, now))
    return {
        "as_of": _aware(now),
        "purge_schedule": _schedule(policy),
        "rules": [
            {
                "rule": rule.value,
                "applies_to": _APPLIES_TO[rule],
                "limit": _limit_text(policy, rule),
            }
            for rule in Rule
        ],
        "artefacts": rows,
    }


def _limit_text(policy: Policy, rule: Rule) -> str:
    if rule is Rule.ARCHIVES_MAX_COUNT:
        count = policy.retention.archives_max_count
        return "forever" if count is None else f"{count} archives"
    limit = age_limit(policy.retention, rule)
    return "forever" if limit is None else format_duration(limit)


def _schedule(policy: Policy) -> str | None:
    schedule = policy.schedule
    if schedule.purge_cron:
        return f"cron '{schedule.purge_cron}' ({schedule.timezone})"
    if schedule.purge_interval is not None:
        return f"every {format_duration(schedule.purge_interval)}"
    return None


def _consent_rows(ctx: SubjectContext, scope: ErasureScope, holds: HoldSet) -> list[dict[str, Any]]:
    if ctx.consent is None or scope.subject is None:
        return []
    events = ctx.consent.history(scope.subject)
    latest = {e.purpose: n for n, e in enumerate(events)}
    rows = []
    for number, event in enumerate(events):
        in_force = latest[event.purpose] == number and event.granted
        rows.append(
            _by_age(
                ctx.policy,
                f"consent record: {event.action.value} '{event.purpose}' at {event.at}",
                ArtefactKind.CONSENT,
                None,
                _naive(event.at),
                holds.keeping(None, {event.subject}),
                in_force="kept while this consent is in force (the latest grant of its purpose)"
                if in_force
                else None,
            )
        )
    return rows


def _tombstone_rows(ctx: SubjectContext, scope: ErasureScope) -> list[dict[str, Any]]:
    rows = []
    for tombstone in tombstones_of(ctx, scope):
        done = tombstone.completed_at if not tombstone.pending else None
        rows.append(
            _by_age(
                ctx.policy,
                f"erasure record {tombstone.id}",
                ArtefactKind.TOMBSTONE,
                tombstone.scope.agent,
                _naive(done) if done is not None else None,
                in_force=None if done is not None else "kept while the erasure is pending",
            )
        )
    return rows


def _export_row(ctx: SubjectContext, out: Path, now: _dt.datetime) -> dict[str, Any]:
    exports = ctx.exports_dir
    inside = exports is not None and Path(out).resolve().parent == exports.resolve()
    name = f"this export ({Path(out).name})"
    if inside:
        return _by_age(ctx.policy, name, ArtefactKind.EXPORT, None, now)
    managed = exports if exports is not None else f"the deployment's storage ({ctx.agents_where})"
    return _row(
        name,
        ArtefactKind.EXPORT,
        None,
        None,
        None,
        now,
        "not_managed",
        None,
        (),
        f"written outside {managed}, where exports_max_age does not reach: delete it once "
        "handed over (a purge on this host names it once it is past exports_max_age)",
    )
