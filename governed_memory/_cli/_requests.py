"""The request register commands: ``requests open``, ``verify``, ``extend``, ``close``, ``list``, ``show``.

See docs/subject-requests.md for the procedure they serve (a request from
arrival to closing) and docs/cli.md for every option.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from .._base import parse_duration
from .._records import KINDS, OUTCOMES
from .._subjects import (
    Standing,
    SubjectContext,
    close_request,
    extend_request,
    open_request,
    standings,
    subject_context,
    verify_request,
)
from ._context import CliContext, actor_option
from ._render import emit_json, emit_table, json_option

__all__ = ["commands"]


def _context(ctx: CliContext, actor: str | None) -> tuple[SubjectContext, str]:
    """The subject context whose audit entries name the command's actor, and that actor."""
    who = ctx.actor(actor)
    sctx = subject_context(ctx.governance())
    return dataclasses.replace(sctx, audit=ctx.audit_as(who, sctx.audit)), who


def _standing_of(sctx: SubjectContext, request_id: str) -> Standing:
    sctx.requests().get(request_id)  # NotFoundError naming the id and the fix
    return next(s for s in standings(sctx) if s.request.id == request_id)


def _print(sctx: SubjectContext, request_id: str, as_json: bool, done: str) -> None:
    found = _standing_of(sctx, request_id)
    if as_json:
        emit_json(found.to_dict())
        return
    r = found.request
    click.echo(f"{done} {r.id}: {r.kind} request of subject {r.subject!r}, {_due_text(found)}")


def _due_text(found: Standing) -> str:
    r = found.request
    if found.state == "closed":
        assert r.closing is not None
        return f"closed ({r.closing.outcome}) at {r.closing.at}"
    own = f", internal deadline {found.internal_due}" if found.internal_due else ""
    days = found.days_left
    left = f"{days} days left" if days >= 0 else f"{-days} days past the deadline"
    return f"due {r.due}{own} ({found.state}: {left})"


@click.group("requests")
def requests_group() -> None:
    """The register of data-subject requests: arrival, identity, deadline, closing."""


@requests_group.command("open")
@click.option("--subject", required=True, help="The data subject's id.")
@click.option("--kind", required=True, type=click.Choice(KINDS), help="What the person asks for.")
@click.option("--received", required=True, help="The day the request arrived, YYYY-MM-DD.")
@click.option("--channel", default=None, help="How it arrived (e.g. email, letter, web form).")
@click.option("--reference", default=None, help="Your case or ticket number.")
@actor_option
@json_option
@click.pass_obj
def requests_open(
    ctx: CliContext,
    subject: str,
    kind: str,
    received: str,
    channel: str | None,
    reference: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Enter a request in the register; prints its id and due date (GDPR Art. 12(3))."""
    sctx, who = _context(ctx, actor)
    request = open_request(
        sctx,
        subject=subject,
        kind=kind,
        received=received,
        actor=who,
        channel=channel,
        reference=reference,
    )
    _print(sctx, request.id, as_json, "opened")


@requests_group.command("verify")
@click.argument("request_id")
@click.option("--by", "by", required=True, help="Who verified the person's identity.")
@click.option("--method", required=True, help="How (e.g. 'id document', 'account login').")
@click.option("--at", "at", default=None, help="When, YYYY-MM-DD[THH:MM] (default: now).")
@json_option
@click.pass_obj
def requests_verify(
    ctx: CliContext, request_id: str, by: str, method: str, at: str | None, as_json: bool
) -> None:
    """Record that the identity of the person behind REQUEST_ID was verified (who, how, when)."""
    sctx, _ = _context(ctx, by)
    verify_request(sctx, request_id, by=by, method=method, at=at)
    _print(sctx, request_id, as_json, "verified")


@requests_group.command("extend")
@click.argument("request_id")
@click.option(
    "--months",
    type=click.IntRange(1, 2),
    required=True,
    help="Further months in all (1 or 2; Art. 12(3)).",
)
@click.option("--reason", required=True, help="Why (told to the person, with the extension).")
@click.option(
    "--told", default=None, help="The day the person was told, YYYY-MM-DD (default: today)."
)
@actor_option
@json_option
@click.pass_obj
def requests_extend(
    ctx: CliContext,
    request_id: str,
    months: int,
    reason: str,
    told: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Extend REQUEST_ID's time limit; only within the first month, the person told why."""
    sctx, who = _context(ctx, actor)
    extend_request(sctx, request_id, months=months, reason=reason, actor=who, told=told)
    _print(sctx, request_id, as_json, "extended")


@requests_group.command("close")
@click.argument("request_id")
@click.option("--receipt", default=None, help="The id of the receipt that answered it.")
@click.option(
    "--outcome",
    type=click.Choice(OUTCOMES),
    default=None,
    help="answered (the default), partial, refused or withdrawn.",
)
@click.option("--reason", default=None, help="Why (required to refuse, or for a partial answer).")
@actor_option
@json_option
@click.pass_obj
def requests_close(
    ctx: CliContext,
    request_id: str,
    receipt: str | None,
    outcome: str | None,
    reason: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Close REQUEST_ID with the receipt that answered it, or as refused with the reasons."""
    sctx, who = _context(ctx, actor)
    close_request(sctx, request_id, actor=who, receipt=receipt, outcome=outcome, reason=reason)
    _print(sctx, request_id, as_json, "closed")


def _within(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        span = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if span is None or span.total_seconds() % 86400:
        raise click.BadParameter(
            f"{value!r} is not a whole number of days; give e.g. '7d' (deadlines are days)"
        )
    return span.days


@requests_group.command("list")
@click.option("--overdue", is_flag=True, help="Only requests past their deadline.")
@click.option(
    "--due-within",
    "due_within",
    default=None,
    callback=_within,
    help="Only requests due within this many days (e.g. 7d), overdue ones included.",
)
@click.option("--all", "include_closed", is_flag=True, help="Closed requests too.")
@click.option(
    "--fail-if-any", is_flag=True, help="Exit with status 1 when any request is listed (cron)."
)
@json_option
@click.pass_obj
def requests_list(
    ctx: CliContext,
    overdue: bool,
    due_within: int | None,
    include_closed: bool,
    fail_if_any: bool,
    as_json: bool,
) -> None:
    """The open requests with their due dates (oldest first); --overdue for cron checks."""
    if overdue and due_within is not None:
        raise click.UsageError("give --overdue or --due-within, not both")
    found = standings(subject_context(ctx.governance()))
    if overdue:
        found = [s for s in found if s.past_deadline]
    elif due_within is not None:
        found = [s for s in found if s.request.open and s.days_left <= due_within]
    elif not include_closed:
        found = [s for s in found if s.request.open]
    found.sort(key=lambda s: (s.deadline, s.request.id))
    if as_json:
        emit_json([s.to_dict() for s in found])
    else:
        emit_table(
            "Data-subject requests",
            ["id", "kind", "subject", "received", "due", "deadline", "state", "days left"],
            [_row(s) for s in found],
            whole=["id"],
        )
    if fail_if_any and found:
        raise SystemExit(1)


def _row(found: Standing) -> list[Any]:
    r = found.request
    state = found.state if r.closing is None else f"closed ({r.closing.outcome})"
    return [
        r.id,
        r.kind,
        r.subject,
        r.received,
        r.due,
        found.deadline,
        state,
        "" if r.closing is not None else found.days_left,
    ]


@requests_group.command("show")
@click.argument("request_id")
@json_option
@click.pass_obj
def requests_show(ctx: CliContext, request_id: str, as_json: bool) -> None:
    """Everything the register holds about REQUEST_ID: its events, deadline and closing."""
    sctx = subject_context(ctx.governance())
    found = _standing_of(sctx, request_id)
    if as_json:
        emit_json(found.to_dict())
        return
    r = found.request
    rows: list[tuple[str, Any]] = [
        ("id", r.id),
        ("kind", r.kind),
        ("subject", r.subject),
        ("received", f"{r.received}" + (f" by {r.channel}" if r.channel else "")),
        ("reference", r.reference),
        ("opened", f"{r.opened_at} by {r.opened_by} ({r.source})"),
        ("note", r.note),
        ("due", _due_text(found)),
        ("first month ends", r.first_due),
    ]
    if r.verification is not None:
        v = r.verification
        rows.append(("identity verified", f"{v.at} by {v.by}: {v.method}"))
    else:
        rows.append(("identity verified", "not yet (`requests verify`)"))
    if r.extension is not None:
        e = r.extension
        rows.append(
            ("extended", f"by {e.months} months at {e.at} by {e.by}: {e.reason}; told {e.told}")
        )
    for b in r.blockers:
        rows.append(("blocked", f"{b.at}: {b.reason}"))
    if r.closing is not None:
        c = r.closing
        answer = f" with receipt {c.receipt}" if c.receipt else ""
        why = f": {c.reason}" if c.reason else ""
        rows.append(("closed", f"{c.outcome}{answer} at {c.at} by {c.by}{why}"))
    emit_table(f"Request {r.id}", ["", ""], [(k, v) for k, v in rows if v is not None])


commands: list[click.Command] = [requests_group]
