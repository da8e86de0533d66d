"""The ``rectify`` command (GDPR Art. 16): list a subject's record ids, correct one, resume.

See docs/rectification.md for the procedure it serves.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._errors import ConfigurationError
from .._subjects import (
    RectificationReceipt,
    SubjectRecord,
    rectification_receipts,
    rectify,
    resume_rectifications,
    subject_context,
    subject_records,
)
from ._context import CliContext, actor_option
from ._render import emit_json, emit_table, json_option

if TYPE_CHECKING:
    from .._memory import Summarizer
    from .._wiring import Governance

__all__ = ["commands"]


def _summarizer(model: str | None, api_base: str | None) -> Summarizer | None:
    """The summarizer ``--summarizer-model`` names (None: the local extractive one)."""
    if model is None:
        return None
    from .._memory import ExtractiveSummarizer, LiteLLMSummarizer

    if model == ExtractiveSummarizer.model:
        return ExtractiveSummarizer()
    if model.startswith("local/"):
        raise ConfigurationError(
            f"summarizer model {model!r} is not a built-in local summarizer; use "
            f"{ExtractiveSummarizer.model!r} or an external model name"
        )
    return LiteLLMSummarizer(model, api_base=api_base)


def _read_text(text: str | None, text_file: Path | None) -> str:
    if (text is None) == (text_file is None):
        raise click.UsageError("give the corrected content with --text or --text-file (one)")
    if text is not None:
        return text
    assert text_file is not None
    try:
        data = sys.stdin.buffer.read() if str(text_file) == "-" else text_file.read_bytes()
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"--text-file {text_file} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"--text-file {text_file} cannot be read: {exc.strerror}; check the path"
        ) from None


def _show(receipt: RectificationReceipt) -> None:
    click.echo(
        f"rectification {receipt.id} of record {receipt.record_id} ({receipt.agent}) "
        f"{receipt.state} at {receipt.completed_at} under policy {receipt.policy_id} "
        f"v{receipt.policy_version}: {receipt.records} copies corrected, summaries "
        f"{receipt.summaries_marked} marked, {receipt.summaries_regenerated} regenerated"
        + (
            f", {receipt.summaries_held} kept by hold(s) {', '.join(receipt.holds)}"
            if receipt.holds
            else ""
        )
    )
    if receipt.fallback:
        click.echo(f"regeneration fell back to marking: {receipt.fallback}")
    if receipt.files:
        emit_table(
            None,
            ["file", "records", "marked", "regenerated", "held"],
            [
                [f.file, f.records, f.summaries_marked, f.summaries_regenerated, f.summaries_held]
                for f in receipt.files
            ],
        )


@click.command("rectify")
@click.option("--subject", default=None, help="The data subject whose record is corrected.")
@click.option(
    "--record",
    "record_id",
    default=None,
    help="The record's id (rec-...), from --list or the export.",
)
@click.option("--text", default=None, help="The corrected content of the record.")
@click.option(
    "--text-file",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    default=None,
    help="Read the corrected content from this UTF-8 file ('-': standard input).",
)
@click.option("--reason", default="", help="Why (stored in the receipt), e.g. a ticket number.")
@click.option(
    "--summarizer-model",
    default=None,
    help="Model that regenerates summaries under summarization.on_rectify = 'regenerate' "
    "(default: local/extractive); the policy's summarizer rules apply.",
)
@click.option("--api-base", default=None, help="API base URL for --summarizer-model.")
@click.option(
    "--list", "list_records", is_flag=True, help="List the subject's records and their ids."
)
@click.option("--agent", default=None, help="With --list: only this agent.")
@click.option("--resume", is_flag=True, help="Finish every interrupted rectification.")
@click.option("--receipts", is_flag=True, help="List the receipts of completed rectifications.")
@actor_option
@json_option
@click.pass_obj
def rectify_command(
    ctx: CliContext,
    subject: str | None,
    record_id: str | None,
    text: str | None,
    text_file: Path | None,
    reason: str,
    summarizer_model: str | None,
    api_base: str | None,
    list_records: bool,
    agent: str | None,
    resume: bool,
    receipts: bool,
    actor: str | None,
    as_json: bool,
) -> None:
    """Correct a data subject's record everywhere it is stored (GDPR Art. 16).

    The record (named by its id: --list shows them) is corrected in the
    active memory and every archive; the summaries built from it are marked
    or regenerated per the policy's summarization.on_rectify. The audit
    entry and the receipt carry keyed hashes of the old and new content,
    never the content. Refused under a legal hold on the subject or agent.
    """
    governance = ctx.governance()
    who = ctx.actor(actor)
    sctx = subject_context(governance)
    sctx = dataclasses.replace(sctx, audit=ctx.audit_as(who, sctx.audit))
    summarizer = _summarizer(summarizer_model, api_base)
    if receipts:
        found = rectification_receipts(sctx)
        if as_json:
            emit_json([r.to_dict() for r in found])
            return
        emit_table(
            "Rectifications",
            ["id", "state", "record", "agent", "completed", "corrected", "summaries"],
            [
                [
                    r.id,
                    r.state,
                    r.record_id,
                    r.agent,
                    r.completed_at,
                    r.records,
                    f"{r.summaries_marked} marked, {r.summaries_regenerated} regenerated",
                ]
                for r in found
            ],
            whole=["id", "record"],
        )
        return
    if resume:
        done = resume_rectifications(sctx, summarizer=summarizer, gate=governance)
        if as_json:
            emit_json([r.to_dict() for r in done])
        elif not done:
            click.echo("no interrupted rectification")
        for receipt in [] if as_json else done:
            _show(receipt)
        return
    if subject is None:
        raise click.UsageError("give --subject S (with --list, or with --record ID and --text)")
    if list_records:
        _list(
            ctx,
            governance,
            subject_records(sctx, subject, agent=agent),
            subject,
            agent,
            who,
            as_json,
        )
        return
    if record_id is None:
        raise click.UsageError(
            "give --record ID (governed-memory rectify --subject S --list shows them)"
        )
    content = _read_text(text, text_file)
    receipt = rectify(
        sctx,
        subject=subject,
        record=record_id,
        text=content,
        reason=reason,
        actor=who,
        summarizer=summarizer,
        gate=governance,
    )
    if as_json:
        emit_json(receipt.to_dict())
    else:
        _show(receipt)


def _list(
    ctx: CliContext,
    governance: Governance,
    records: list[SubjectRecord],
    subject: str,
    agent: str | None,
    who: str,
    as_json: bool,
) -> None:
    # A read of personal data, recorded before anything is printed (as `show` does).
    policy = governance.policy
    ctx.audit_as(who).record(
        "memory.show",
        agent=agent,
        subject_id=subject,
        outcome="ok",
        records=len(records),
        archives=True,
        policy_id=policy.id,
        policy_version=policy.version,
    )
    if as_json:
        emit_json([r.to_dict() for r in records])
        return
    emit_table(
        f"Records of {subject}",
        ["id", "agent", "file", "role", "timestamp", "content"],
        [[r.id, r.agent, r.file, r.role, r.timestamp, _short(r.content)] for r in records],
        whole=["id"],
    )


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


commands = [rectify_command]
