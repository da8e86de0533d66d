"""Data-subject request commands: ``export``, ``erase`` and ``erasures``.

See docs/subject-requests.md for the procedure these commands serve.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress

from .._subjects import (
    ErasureReceipt,
    PendingErasure,
    ScheduledErasure,
    cancel_scheduled_erasure,
    erase,
    erasure_receipts,
    export_agent,
    export_subject,
    pending_erasure,
    resume_erasures,
    run_due_erasures,
    schedule_erasure,
    subject_context,
)
from ._context import ACTOR_DEFAULT_HELP, CliContext, actor_option
from ._render import emit_json, emit_table, json_option

__all__ = ["commands"]


def _need_scope(subject: str | None, agent: str | None) -> None:
    if subject is None and agent is None:
        raise click.UsageError("give --subject S, --agent A, or both")


_subject_opt = click.option("--subject", default=None, help="The data subject's id.")
_agent_opt = click.option(
    "--agent", default=None, help="One agent: alone, the whole agent; with --subject, only there."
)


@click.command("export")
@_subject_opt
@_agent_opt
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="A new (or empty) folder to write the export to.",
)
@click.option(
    "--include-shared-summaries",
    is_flag=True,
    help="Include the content of summaries also built from other subjects' messages.",
)
@actor_option
@json_option
@click.pass_obj
def export_command(
    ctx: CliContext,
    subject: str | None,
    agent: str | None,
    out_dir: Path,
    include_shared_summaries: bool,
    actor: str | None,
    as_json: bool,
) -> None:
    """Export everything held about a data subject (or an agent) into a new folder.

    Writes export.json (schema: docs/export-schema.json: the data, purposes and
    consent, recipients, retention dates, sources), export.md, report.md (the
    GDPR Art. 15(1) report to hand to the person) and manifest.json (SHA-256
    of each file), all 0600 in a 0700 folder, and an export receipt with the
    export's id in the governance folder. The audit entry and the receipt name
    the actor.
    """
    _need_scope(subject, agent)
    governance = ctx.governance()
    who = ctx.actor(actor)
    # The export records itself through the context's sink: wrapped, it names who ran it.
    sctx = subject_context(governance)
    sctx = dataclasses.replace(sctx, audit=ctx.audit_as(who, sctx.audit))
    if subject is None:
        assert agent is not None
        result = export_agent(sctx, agent, out_dir, actor=who)
    else:
        result = export_subject(
            sctx,
            subject,
            out_dir,
            agent=agent,
            include_shared_summaries=include_shared_summaries,
            actor=who,
        )
    if as_json:
        emit_json(result.to_dict())
        return
    click.echo(
        f"exported {result.records} records and {result.summaries} summaries "
        f"({result.withheld_summaries} withheld) to {result.out_dir}; export id {result.id} "
        f"(receipt {result.receipt}); hand report.md to the person with the folder"
    )
    emit_table(None, ["file", "sha256"], sorted(result.files.items()))


def _receipt_rows(receipt: ErasureReceipt) -> list[list[Any]]:
    return [
        [f.agent, f.file, f.records, f.summaries, "deleted" if f.deleted else "rewritten"]
        for f in receipt.files
    ]


def _show_receipt(receipt: ErasureReceipt) -> None:
    click.echo(
        f"erasure {receipt.id} of {receipt.scope.describe()} complete at {receipt.completed_at} "
        f"under policy {receipt.policy_id} v{receipt.policy_version}: {receipt.records} records "
        f"and {receipt.summaries} summaries removed from {len(receipt.files)} files in "
        f"{len(receipt.agents)} agents"
        + (f"; keys destroyed: {', '.join(receipt.keys_shredded)}" if receipt.keys_shredded else "")
    )
    if receipt.files:
        emit_table(
            None, ["agent", "file", "records", "summaries", "file action"], _receipt_rows(receipt)
        )
    if receipt.blocked:
        kept = sum(b.summaries for b in receipt.blocked)
        click.echo(
            f"partial: {kept} summaries kept, derived from another subject under legal hold "
            f"{', '.join(receipt.blocking_holds)}; the subject's keys are kept too. Run the "
            "erasure again once the hold is released"
        )
        emit_table(
            None,
            ["agent", "file", "summaries kept", "held by"],
            [[b.agent, b.file, b.summaries, ", ".join(b.holds)] for b in receipt.blocked],
        )


@click.command("erase")
@_subject_opt
@_agent_opt
@click.option("--reason", default="", help="Why (stored in the receipt), e.g. a ticket number.")
@click.option("--actor", default=None, help=f"Who asks; {ACTOR_DEFAULT_HELP}.")
@click.option(
    "--grace",
    default=None,
    help="Schedule the erasure this long from now (e.g. 30d) instead of running it now.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_obj
def erase_command(
    ctx: CliContext,
    subject: str | None,
    agent: str | None,
    reason: str,
    actor: str | None,
    grace: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Erase a data subject's records and derived summaries (or a whole agent).

    Refused when a legal hold on the subject (or the agent) applies. A
    summary also derived from another subject under a hold is kept, and the
    receipt says partial, naming the hold. Prints and stores a receipt.
    """
    _need_scope(subject, agent)
    who = ctx.actor(actor)
    # The erasure records itself through the context's sink: wrapped, its
    # entries name who asked (actor.hash), as erasures cancel's entry does.
    sctx = subject_context(ctx.governance())
    sctx = dataclasses.replace(sctx, audit=ctx.audit_as(who, sctx.audit))
    if grace is not None:
        item = schedule_erasure(
            sctx, subject=subject, agent=agent, grace=grace, reason=reason, actor=who
        )
        if as_json:
            emit_json(item.to_dict())
        else:
            click.echo(f"scheduled erasure {item.id} of {item.scope.describe()} for {item.due_at}")
        return
    if not yes:
        what = f"subject {subject!r}" if subject else f"agent {agent!r}"
        try:
            click.confirm(
                f"Erase {what}{' in agent ' + repr(agent) if subject and agent else ''}? "
                "This cannot be undone",
                abort=True,
                err=True,
            )
        except click.Abort:
            if not sys.stdin.isatty():  # nobody could answer: a script, cron, a pipe
                click.echo(
                    "\nerase asks for confirmation and there is no terminal to answer it; "
                    "pass --yes to erase without asking",
                    err=True,
                )
            raise
    with Progress(console=Console(stderr=True), transient=True, disable=as_json) as bar:
        task = bar.add_task("erasing", total=None)

        def step(agent_name: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=f"erasing ({agent_name})")

        receipt = erase(sctx, subject=subject, agent=agent, reason=reason, actor=who, progress=step)
    if as_json:
        emit_json(receipt.to_dict())
    else:
        _show_receipt(receipt)


@click.group("erasures")
def erasures_group() -> None:
    """List, inspect, resume and run scheduled erasures."""


@erasures_group.command("list")
@json_option
@click.pass_obj
def erasures_list(ctx: CliContext, as_json: bool) -> None:
    """Scheduled, pending (interrupted) and completed erasures."""
    sctx = subject_context(ctx.governance())
    tombs = sctx.tombstones()
    scheduled: list[ScheduledErasure] = tombs.scheduled()
    tombstones = tombs.all()
    if as_json:
        emit_json(
            {
                "scheduled": [s.to_dict() for s in scheduled],
                "erasures": [t.to_dict() for t in tombstones],
            }
        )
        return
    rows: list[list[Any]] = [
        [s.id, "scheduled", s.scope.describe(), s.requested_at, f"due {s.due_at}", ""]
        for s in scheduled
    ]
    rows = [[*row, ""] for row in rows]
    for t in tombstones:
        counts = why = ""
        state = t.state
        if t.receipt is not None:
            r = ErasureReceipt.from_dict(t.receipt)
            counts = f"{r.records} records, {r.summaries} summaries, {len(r.files)} files"
            if r.unreached:  # the last run of a pending erasure could not reach these
                state = f"{state} (blocked)"
                why = "; ".join(f"{u.file}: {u.reason}" for u in r.unreached)
            elif r.blocked:  # a hold on another subject of a summary's lineage kept it
                state = f"{state} (partial: held by {', '.join(r.blocking_holds)})"
        elif t.pending:
            why = "interrupted (`erasures show ID` checks what is left)"
        rows.append([t.id, state, t.scope.describe(), t.requested_at, t.completed_at, counts, why])
    emit_table(
        "Erasures",
        ["id", "state", "scope", "requested", "completed / due", "removed", "reason pending"],
        rows,
        whole=["id"],
    )


def _unique(given: str, ids: list[str], what: str) -> str:
    """The one id of ``ids`` that ``given`` is, or is a prefix of (a cut "…" is ignored).

    An unknown id is returned as given, for the command's own not-found message.
    """
    prefix = given.strip().removesuffix("…").removesuffix("...")
    if given in ids or not prefix:
        return given
    matches = sorted(i for i in ids if i.startswith(prefix))
    if len(matches) > 1:
        raise click.BadParameter(
            f"{given!r} is the start of {len(matches)} {what} ids: {', '.join(matches)}; "
            "give more of the id"
        )
    return matches[0] if matches else given


def _erasure_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    cli = ctx.find_object(CliContext)
    if cli is None:
        return value
    governance = cli.governance()
    ids = [r.id for r in erasure_receipts(governance)]
    ids += [t.id for t in subject_context(governance).tombstones().pending() if t.id not in ids]
    return _unique(value, ids, "erasure")


def _scheduled_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    cli = ctx.find_object(CliContext)
    if cli is None:
        return value
    tombs = subject_context(cli.governance()).tombstones()
    return _unique(value, [s.id for s in tombs.scheduled()], "scheduled erasure")


@erasures_group.command("show")
@click.argument("erasure_id", callback=_erasure_id)
@json_option
@click.pass_obj
def erasures_show(ctx: CliContext, erasure_id: str, as_json: bool) -> None:
    """The receipt of one completed erasure, or what a pending one has left and why.

    ERASURE_ID is the full id or the start of one that is unique.
    """
    governance = ctx.governance()
    for receipt in erasure_receipts(governance):
        if receipt.id == erasure_id:
            if as_json:
                emit_json(receipt.to_dict())
            else:
                _show_receipt(receipt)
            return
    pending = pending_erasure(governance, erasure_id)
    if pending is not None:
        if as_json:
            emit_json(pending.to_dict())
        else:
            _show_pending(pending)
        return
    from .._errors import NotFoundError

    raise NotFoundError(
        f"no completed erasure {erasure_id!r} (nor a pending one); `governed-memory erasures "
        "list` shows the ids"
    )


def _show_pending(pending: PendingErasure) -> None:
    click.echo(
        f"erasure {pending.id} of {pending.scope.describe()} is pending: "
        f"{len(pending.unfinished)} item(s) in {len(pending.agents)} agent(s) left; every other "
        "agent is done. Fix each item, then run `governed-memory erasures resume`"
    )
    if pending.unfinished:
        emit_table(
            None,
            ["agent", "file", "error", "reason", "fix"],
            [[u.agent, u.file, u.error, u.reason, u.fix] for u in pending.unfinished],
        )
    last = pending.last_run
    if last is not None and last.unreached:
        click.echo(
            f"last run {last.completed_at}: blocked: {last.records} records and "
            f"{last.summaries} summaries removed from {len(last.files)} files; "
            f"{len(last.unreached)} item(s) not reached"
        )
        emit_table(
            None,
            ["agent", "file", "blocked because"],
            [[u.agent, u.file, u.reason] for u in last.unreached],
        )


@erasures_group.command("resume")
@json_option
@click.pass_obj
def erasures_resume(ctx: CliContext, as_json: bool) -> None:
    """Finish every interrupted erasure."""
    receipts = resume_erasures(ctx.governance())
    if as_json:
        emit_json([r.to_dict() for r in receipts])
        return
    if not receipts:
        click.echo("no interrupted erasure")
    for receipt in receipts:
        _show_receipt(receipt)


@erasures_group.command("run-due")
@json_option
@click.pass_obj
def erasures_run_due(ctx: CliContext, as_json: bool) -> None:
    """Run scheduled erasures whose grace period is over (the scheduler does this too).

    Every due (and interrupted) erasure is tried even when one fails. Exit
    status 1 when any is blocked by a hold or still pending; each is listed
    with why.
    """
    results = run_due_erasures(ctx.governance())
    receipts = [r for r in results if isinstance(r, ErasureReceipt)]
    pending = [r for r in results if isinstance(r, PendingErasure)]
    blocked = [str(r) for r in results if not isinstance(r, ErasureReceipt | PendingErasure)]
    if as_json:
        emit_json(
            {
                "completed": [r.to_dict() for r in receipts],
                "blocked": blocked,
                "pending": [p.to_dict() for p in pending],
            }
        )
    else:
        for receipt in receipts:
            _show_receipt(receipt)
        for message in blocked:
            click.echo(f"blocked: {message}", err=True)
        for item in pending:
            click.echo(f"pending: {item.message()}", err=True)
        if not results:
            click.echo("no erasure due")
    if blocked or pending:
        raise SystemExit(1)


@erasures_group.command("cancel")
@click.argument("erasure_id", callback=_scheduled_id)
@actor_option
@click.pass_obj
def erasures_cancel(ctx: CliContext, erasure_id: str, actor: str | None) -> None:
    """Cancel a scheduled erasure that has not run yet (audited: erase, outcome cancelled)."""
    governance = ctx.governance()
    scheduled = {s.id: s for s in subject_context(governance).tombstones().scheduled()}
    cancel_scheduled_erasure(governance, erasure_id)
    item = scheduled.get(erasure_id)
    ctx.audit_as(actor, governance.audit).record(
        "erase",
        agent=item.scope.agent if item else None,
        subject_id=item.scope.subject if item else None,
        outcome="cancelled",
        erasure_id=erasure_id,
        policy_id=governance.policy.id,
        policy_version=governance.policy.version,
    )
    click.echo(f"cancelled scheduled erasure {erasure_id}")


commands: list[click.Command] = [export_command, erase_command, erasures_group]
