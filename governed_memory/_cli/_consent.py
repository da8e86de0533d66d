"""Consent commands: ``consent grant``, ``withdraw``, ``status``, ``history``."""

from __future__ import annotations

from dataclasses import asdict

import click

from .._records import ConsentEvent
from ._context import ACTOR_DEFAULT_HELP, CliContext
from ._render import emit_json, emit_table, json_option

__all__ = ["commands"]


_subject = click.option("--subject", "subject_id", required=True, help="The data subject's id.")
_purpose = click.option(
    "--purpose", required=True, help="The purpose: persist, summarize, or one the policy defines."
)
_actor = click.option(
    "--actor",
    default=None,
    help=f"Who records this (e.g. dpo@example.org); {ACTOR_DEFAULT_HELP}.",
)


def _event_row(event: ConsentEvent) -> dict[str, str]:
    row = asdict(event)
    row["action"] = event.action.value
    row["state"] = "granted" if event.granted else "withdrawn"
    return row


@click.group("consent")
def consent_group() -> None:
    """Record and inspect consent per data subject and purpose (see docs/consent.md)."""


def _change(
    ctx: CliContext, subject_id: str, purpose: str, actor: str | None, grant: bool, as_json: bool
) -> None:
    governance = ctx.governance()
    who = ctx.actor(actor)
    if grant:
        event = governance.grant(subject_id, purpose, actor=who)
    else:
        event = governance.withdraw(subject_id, purpose, actor=who)
    if as_json:
        emit_json(_event_row(event))
        return
    verb = "granted" if grant else "withdrawn"
    click.echo(
        f"{verb}: subject {event.subject!r}, purpose {event.purpose!r}, at {event.at}, "
        f"by {event.actor}, under policy {event.policy_id} v{event.policy_version}"
    )


@consent_group.command("grant")
@_subject
@_purpose
@_actor
@json_option
@click.pass_obj
def grant(ctx: CliContext, subject_id: str, purpose: str, actor: str | None, as_json: bool) -> None:
    """Record that SUBJECT consents to PURPOSE (durable when the command returns)."""
    _change(ctx, subject_id, purpose, actor, True, as_json)


@consent_group.command("withdraw")
@_subject
@_purpose
@_actor
@json_option
@click.pass_obj
def withdraw(
    ctx: CliContext, subject_id: str, purpose: str, actor: str | None, as_json: bool
) -> None:
    """Record that SUBJECT withdraws PURPOSE; running agents obey it from their next write."""
    _change(ctx, subject_id, purpose, actor, False, as_json)


@consent_group.command("status")
@click.option("--subject", "subject_id", default=None, help="One subject (default: every subject).")
@click.option("--purpose", default=None, help="One purpose (default: every purpose of the policy).")
@json_option
@click.pass_obj
def status(ctx: CliContext, subject_id: str | None, purpose: str | None, as_json: bool) -> None:
    """Show the current consent of each subject for each purpose."""
    governance = ctx.governance()
    consent = governance.policy.consent
    purposes = list(consent.purposes)
    if purpose is not None:
        if purpose not in purposes:
            raise click.BadParameter(
                f"purpose {purpose!r} is not defined by policy {governance.policy.id}; "
                f"use one of {purposes}",
                param_hint="--purpose",
            )
        purposes = [purpose]
    subjects = [subject_id] if subject_id is not None else governance.consent.subjects()
    rows = []
    for subject in subjects:
        latest = governance.consent.status(subject)
        for name in purposes:
            event = latest.get(name)
            rows.append(
                {
                    "subject": subject,
                    "purpose": name,
                    "required": name in consent.required_for,
                    "state": "never given" if event is None else _event_row(event)["state"],
                    "at": event.at if event else None,
                    "actor": event.actor if event else None,
                    "policy": f"{event.policy_id} v{event.policy_version}" if event else None,
                }
            )
    if as_json:
        emit_json(rows)
        return
    emit_table(
        f"consent under policy {governance.policy.id} v{governance.policy.version}",
        ["subject", "purpose", "required", "state", "since", "by", "recorded under"],
        [
            (
                r["subject"],
                r["purpose"],
                "yes" if r["required"] else "no",
                r["state"],
                r["at"],
                r["actor"],
                r["policy"],
            )
            for r in rows
        ],
    )


@consent_group.command("history")
@click.option("--subject", "subject_id", default=None, help="One subject (default: everyone).")
@json_option
@click.pass_obj
def history(ctx: CliContext, subject_id: str | None, as_json: bool) -> None:
    """Every grant and withdrawal, oldest first: the proof of consent."""
    governance = ctx.governance()
    rows = [_event_row(e) for e in governance.consent.history(subject_id)]
    if as_json:
        emit_json(rows)
        return
    emit_table(
        "consent history",
        ["at", "subject", "purpose", "action", "actor", "policy"],
        [
            (
                r["at"],
                r["subject"],
                r["purpose"],
                r["action"],
                r["actor"],
                f"{r['policy_id']} v{r['policy_version']}",
            )
            for r in rows
        ],
    )


commands: list[click.Command] = [consent_group]
