"""Retention commands: ``purge``, ``hold place|release|list``, ``scheduler run|status``."""

from __future__ import annotations

import datetime as _dt
import logging
import signal
import sys
import threading
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._errors import StorageError
from .._records import Hold
from .._retention import PurgeReport, Retention
from ._context import ACTOR_DEFAULT_HELP, CliContext
from ._memory import human_size
from ._render import emit_json, emit_table, json_option

__all__ = ["commands"]

if TYPE_CHECKING:
    _ParamBase = click.ParamType[Any, _dt.datetime]
else:  # click < 8.2 has no generic ParamType
    _ParamBase = click.ParamType

PROGRESS_THRESHOLD = 500  # journal entries from which a progress bar is worth showing
TABLE_LIMIT = 200
AS_OF_FIRST_YEAR = 1970
AS_OF_LAST_YEAR = 8000


class _DateTime(_ParamBase):
    """An ISO 8601 date or date-time; without an offset it is local time."""

    name = "DATETIME"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> _dt.datetime:
        if isinstance(value, _dt.datetime):
            return value
        try:
            when = _dt.datetime.fromisoformat(str(value).strip())
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO 8601 date or date-time; write e.g. 2027-01-31 or "
                "2027-01-31T03:00 (local time) or 2027-01-31T03:00+00:00",
                param,
                ctx,
            )
        # Retention adds and subtracts durations of up to 1000 years (and an
        # offset) from this moment; datetime spans years 1 to 9999.
        if not AS_OF_FIRST_YEAR <= when.year <= AS_OF_LAST_YEAR:
            self.fail(
                f"{value!r} is outside the years {AS_OF_FIRST_YEAR} to {AS_OF_LAST_YEAR}, the "
                "moments a purge can be planned for; give a date in that range",
                param,
                ctx,
            )
        return when


@click.command("purge")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; change nothing.")
@click.option(
    "--as-of",
    type=_DateTime(),
    default=None,
    help=(
        "Plan as of this moment instead of now (ISO 8601). A later moment needs --dry-run; "
        "floors such as audit_min_age always count from now."
    ),
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=TABLE_LIMIT,
    show_default=True,
    help="Rows of the dry-run table (--json lists all).",
)
@json_option
@click.pass_obj
def purge(
    ctx: CliContext, dry_run: bool, as_of: _dt.datetime | None, limit: int, as_json: bool
) -> None:
    """Delete what the retention policy requires (see docs/retention.md).

    Held data is skipped; an interrupted purge is finished first. Exit status
    1 when some artefact could not be deleted, or when --as-of is later than
    now without --dry-run (nothing is deleted then).
    """
    retention = Retention(ctx.governance())
    if dry_run:
        report = retention.purge(dry_run=True, as_of=as_of)
        if as_json:
            emit_json({**report.to_dict(), "items": _items(report)})
        else:
            _plan_table(report, limit)
            _report_table(report)
        return
    report = _apply(retention, as_of, show_progress=not as_json)
    if as_json:
        emit_json(report.to_dict())
    else:
        _report_table(report)
    if report.failed:
        raise StorageError(
            f"{report.failed} artefact(s) could not be deleted ({'; '.join(report.errors[:3])}); "
            "check their permissions and run `governed-memory purge` again"
        )


def _apply(retention: Retention, as_of: _dt.datetime | None, show_progress: bool) -> PurgeReport:
    console = Console(stderr=True)
    with Progress(
        TextColumn("purging"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (show_progress and console.is_terminal),
    ) as bar:
        task: list[Any] = []

        def on_progress(done: int, total: int) -> None:
            if total < PROGRESS_THRESHOLD:
                return
            if not task:
                task.append(bar.add_task("purge", total=total))
            bar.update(task[0], completed=done, total=total)

        return retention.purge(as_of=as_of, on_progress=on_progress)


def _items(report: PurgeReport) -> list[dict[str, Any]]:
    assert report.plan is not None
    return [
        {
            "rule": item.rule.value,
            "kind": item.artefact.kind.value,
            "path": item.artefact.path,
            "agent": item.artefact.agent,
            "bytes": item.artefact.size,
            "time": item.artefact.when.isoformat(),
            "detail": item.detail,
            "held_by": list(item.held_by),
        }
        for item in report.plan.items
    ]


def _plan_table(report: PurgeReport, limit: int) -> None:
    assert report.plan is not None
    items = report.plan.items
    rows = [
        (
            i.rule.value,
            i.artefact.path,
            human_size(i.artefact.size),
            i.detail,
            "held: " + ", ".join(i.held_by) if i.held else "delete",
        )
        for i in items[:limit]
    ]
    title = f"Purge plan as of {report.as_of:%Y-%m-%d %H:%M:%S} (dry run, nothing deleted)"
    emit_table(title, ["rule", "artefact", "size", "why", "action"], rows)
    if len(items) > limit:
        click.echo(f"... and {len(items) - limit} more (use --limit or --json to see all)")
    if report.pending_journal:
        click.echo(
            f"An interrupted purge has {report.pending_journal} entries left; the next purge "
            "finishes it first."
        )


def _report_table(report: PurgeReport) -> None:
    rules = sorted(set(report.deleted) | set(report.held))
    verb = "would delete" if report.dry_run else "deleted"
    rows: list[tuple[Any, ...]] = [
        (rule, report.deleted.get(rule, 0), report.held.get(rule, 0)) for rule in rules
    ]
    rows.append(("total", report.total_deleted, report.total_held))
    title = "Purge report (dry run)" if report.dry_run else "Purge report"
    emit_table(title, ["rule", verb, "held (skipped)"], rows)
    freed = "to free" if report.dry_run else "freed"
    lines = [
        f"as of {report.as_of:%Y-%m-%d %H:%M:%S}, policy {report.policy_id} "
        f"v{report.policy_version}",
        f"bytes {freed}: {report.bytes_freed} ({human_size(report.bytes_freed)})",
    ]
    lines.append(f"held bytes kept: {report.held_bytes}")
    if not report.dry_run:
        lines.append(
            f"already gone: {report.gone}, changed since planned (kept): {report.changed}, "
            f"failed: {report.failed}"
        )
    if report.resumed:
        lines.append(f"finished the interrupted purge {report.resumed} first")
    if report.discarded:
        lines.append(
            f"dropped the interrupted purge {report.discarded}: it was planned under another "
            "policy version"
        )
    if report.purge_id:
        lines.append(f"purge id: {report.purge_id}")
    lines += [f"not purged: {note}" for note in report.notes]
    click.echo("\n".join(lines))


# -- holds -------------------------------------------------------------------


def _target(agent: str | None, subject: str | None, allow_id: bool = False) -> None:
    if agent is not None and subject is not None:
        raise click.UsageError("give --agent or --subject, not both")
    if agent is None and subject is None and not allow_id:
        raise click.UsageError("give --agent AGENT or --subject SUBJECT")


def _hold_row(hold: Hold) -> dict[str, Any]:
    return asdict(hold) | {"active": hold.active}


_agent_opt = click.option("--agent", default=None, help="The agent whose whole folder is held.")
_subject_opt = click.option(
    "--subject", default=None, help="The data subject whose records are held, in every agent."
)
_actor_opt = click.option(
    "--actor",
    default=None,
    help=f"Who acts (e.g. legal@example.org); {ACTOR_DEFAULT_HELP}.",
)


@click.group("hold")
def hold_group() -> None:
    """Legal holds: keep an agent's or a subject's data from purges and erasure."""


@hold_group.command("place")
@_agent_opt
@_subject_opt
@click.option("--reason", required=True, help="Why (e.g. the case number); required.")
@_actor_opt
@json_option
@click.pass_obj
def hold_place(
    ctx: CliContext,
    agent: str | None,
    subject: str | None,
    reason: str,
    actor: str | None,
    as_json: bool,
) -> None:
    """Place a hold on one agent or one subject (durable when the command returns)."""
    _target(agent, subject)
    hold = Retention(ctx.governance()).holds.place(
        agent=agent, subject=subject, reason=reason, actor=ctx.actor(actor)
    )
    if as_json:
        emit_json(_hold_row(hold))
    else:
        click.echo(f"placed {hold.id} on {hold.target} by {hold.placed_by} at {hold.placed_at}")


@hold_group.command("release")
@_agent_opt
@_subject_opt
@click.option("--id", "hold_id", default=None, help="The hold to release (see `hold list`).")
@click.option("--reason", default=None, help="Why it is released (optional).")
@_actor_opt
@json_option
@click.pass_obj
def hold_release(
    ctx: CliContext,
    agent: str | None,
    subject: str | None,
    hold_id: str | None,
    reason: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Release a hold, chosen by --id or by its --agent / --subject."""
    _target(agent, subject, allow_id=hold_id is not None)
    hold = Retention(ctx.governance()).holds.release(
        hold_id=hold_id,
        agent=agent,
        subject=subject,
        actor=ctx.actor(actor),
        reason=reason,
    )
    if as_json:
        emit_json(_hold_row(hold))
    else:
        click.echo(f"released {hold.id} on {hold.target} by {hold.released_by}")


@hold_group.command("list")
@click.option("--all", "include_released", is_flag=True, help="Include released holds.")
@json_option
@click.pass_obj
def hold_list(ctx: CliContext, include_released: bool, as_json: bool) -> None:
    """List the active holds (with --all, released ones too)."""
    holds = Retention(ctx.governance()).holds.holds(include_released=include_released)
    if as_json:
        emit_json([_hold_row(h) for h in holds])
        return
    rows = [
        (
            h.id,
            "agent" if h.agent is not None else "subject",
            h.agent if h.agent is not None else h.subject,
            h.reason,
            h.placed_by,
            h.placed_at,
            "active" if h.active else f"released {h.released_at} by {h.released_by}",
        )
        for h in holds
    ]
    emit_table(
        "Legal holds", ["id", "on", "target", "reason", "placed by", "placed at", "state"], rows
    )


# -- scheduler -----------------------------------------------------------------


@click.group("scheduler")
def scheduler_group() -> None:
    """Scheduled purges from the policy's [schedule] (see docs/retention.md)."""


@scheduler_group.command("run")
@click.option(
    "--leader-retry",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds between attempts to take over from another scheduler.",
)
@click.pass_obj
def scheduler_run(ctx: CliContext, leader_retry: float) -> None:
    """Run scheduled purges in the foreground until SIGTERM or SIGINT."""
    from .._scheduler import start_scheduler

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log = logging.getLogger("governed_memory.scheduler")
    governance = ctx.governance()
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        log.info("received %s; stopping after the current run", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        handle = start_scheduler(governance, leader_retry=leader_retry)
        log.info(
            "scheduler started for workspace %s (policy %s v%s)",
            governance.workspace,
            governance.policy.id,
            governance.policy.version,
        )
        while not stop.wait(0.5):
            pass
        handle.stop()
        log.info("scheduler stopped")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@scheduler_group.command("status")
@json_option
@click.pass_obj
def scheduler_status(ctx: CliContext, as_json: bool) -> None:
    """Show the schedule, the last successful run and whether a run is overdue."""
    from .._scheduler import schedule_status

    status = schedule_status(ctx.governance())
    if as_json:
        emit_json(status)
        return
    emit_table("Scheduled purges", ["setting", "value"], list(status.items()))


commands: list[click.Command] = [purge, hold_group, scheduler_group]
