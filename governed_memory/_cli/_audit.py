"""Audit commands: ``audit verify``, ``tail``, ``export``, ``lookup``, ``repair``, ``keygen``, ``checkpoint``.

``audit verify --public-key PUB [--checkpoint FILE]...`` needs no secret at
all: it checks the keyless hash chain and the signed checkpoints
(docs/evidence.md).

These commands read the audit log; only ``repair`` writes to it. They need
only the audit folder and key, so they resolve the settings, the policy and
the workspace rather than a Governance, whose audit trail would also demand
the key of commands (``tail``, ``export``) that read without one.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import secrets
import sys
from pathlib import Path
from typing import Any

import click

from .._audit import (
    AuditEntry,
    AuditKey,
    AuditLog,
    AuditLogLike,
    PublicVerifyReport,
    VerifyReport,
    audit_key_from_settings,
    audit_keys_from_settings,
    audit_log_dir,
    audit_log_exists,
    export_lines,
    export_since,
    latest_checkpoint,
    read_checkpoint,
    verify_public,
    verify_storage,
    write_checkpoint_file,
    write_export,
)
from .._base import parse_duration, resolve_workspace
from .._errors import AuditVerificationError, ConfigurationError, NotFoundError
from ._context import CliContext
from ._evidence import public_key_option, public_keys, signing_key
from ._render import emit_json, emit_table, json_option

__all__ = ["commands"]

_dir_option = click.option(
    "--dir",
    "folder",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Audit folder to read (default: the policy's audit.log_dir, else "
    "<workspace>/.governed_memory/audit).",
)


def _folder(ctx: CliContext, folder: Path | None) -> Path:
    if folder is not None:
        return folder
    from .._policy import resolve_policy

    settings = ctx.settings()
    policy = resolve_policy(settings).policy
    workspace = resolve_workspace(ctx.workspace_arg or settings.workspace_dir)
    return audit_log_dir(policy, workspace)


def _open_log(
    ctx: CliContext,
    folder: Path | None,
    *,
    keys: list[AuditKey] | None = None,
    workspace: Path | None = None,
) -> AuditLogLike:
    """The audit log the commands read and write: the ONE place that opens it.

    ``keys`` (the key first, then its previous versions) for commands that
    write or verify; without them the log is opened to read only, under a
    throw-away key that signs nothing. Refuses a folder that holds no log.
    """
    key, *previous = keys if keys else [AuditKey(secrets.token_bytes(32))]
    if folder is None:
        storage = ctx.storage()
        if storage.files is None:  # a database deployment: its one chain
            log: AuditLogLike = storage.audit_storage(None, key, previous_keys=previous, clock=None)  # type: ignore[assignment]
            return log
    where = _existing(_folder(ctx, folder))
    return AuditLog(where, key, previous_keys=previous, workspace=workspace)


def _workspace(ctx: CliContext) -> Path:
    return resolve_workspace(ctx.workspace_arg or ctx.settings().workspace_dir)


def _key(ctx: CliContext) -> AuditKey:
    key = audit_key_from_settings(ctx.settings())
    if key is None:
        raise ConfigurationError(
            "no audit key is configured; set GOVERNED_MEMORY_AUDIT_KEY (or "
            "GOVERNED_MEMORY_MASTER_KEY, from which it is derived) to the key the log was "
            "written with"
        )
    return key


def _keys(ctx: CliContext) -> list[AuditKey]:
    """The audit key and its previous versions (a derived key during a master key rotation)."""
    _key(ctx)  # the error that names the variables when none is configured
    return audit_keys_from_settings(ctx.settings())


def _details(entry: AuditEntry) -> str:
    skip = {"outcome", "agent.hash", "subject.hash"}
    return " ".join(
        f"{k}={json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}"
        for k, v in sorted(entry.attrs.items())
        if k not in skip
    )


def _rows(entries: list[AuditEntry]) -> list[list[Any]]:
    return [
        [
            e.seq,
            e.ts,
            e.event,
            e.attrs.get("outcome", ""),
            e.attrs.get("agent.hash", ""),
            e.attrs.get("subject.hash", ""),
            _details(e),
        ]
        for e in entries
    ]


TAIL_MAX = 1_000_000
"""The most entries ``audit tail`` shows (it holds them in memory)."""

_COLUMNS = ("seq", "time (UTC)", "event", "outcome", "agent hash", "subject hash", "details")


@click.group("audit")
def audit_group() -> None:
    """Inspect and verify the tamper-evident audit log (see docs/audit.md)."""


@audit_group.command("verify")
@_dir_option
@public_key_option
@click.option(
    "--checkpoint",
    "checkpoint_files",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="With --public-key: a kept checkpoint file (from `audit checkpoint --out`); the log "
    "must still hold the entry it signed. Repeat for each one kept.",
)
@json_option
@click.pass_obj
def verify(
    ctx: CliContext,
    folder: Path | None,
    public_key_values: tuple[str, ...],
    checkpoint_files: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Check every entry's hash, MAC and order; name the first problem and exit 1 on any.

    The workspace's own log (no --dir) is also checked to be this workspace's
    (foreign_log); a log from before that binding gets the notice unbound.
    With --public-key no key is needed: the hash chain and the signed
    checkpoints are checked, the MACs are not (see docs/evidence.md).
    """
    if checkpoint_files and not public_key_values:
        raise click.UsageError("--checkpoint needs --public-key PUB (the key that signed it)")
    report: VerifyReport
    if public_key_values:
        kept = [(str(f), read_checkpoint(f)) for f in checkpoint_files]
        where = _existing(_folder(ctx, folder))
        report = verify_public(where, public_keys(public_key_values), checkpoints=kept)
    else:
        # The workspace's own log is checked against its id; a copy elsewhere (--dir) is not.
        workspace = _workspace(ctx) if folder is None else None
        keys = _keys(ctx)
        log = _open_log(ctx, folder, keys=keys, workspace=workspace)
        try:
            report = verify_storage(log, keys)
        finally:
            log.close()
    if as_json:
        emit_json(report.to_dict())
    else:
        status = "OK" if report.ok else "FAILED"
        span = f"seq {report.first_seq}..{report.last_seq}" if report.first_seq is not None else "-"
        click.echo(
            f"{status}: {report.folder}: {len(report.segments)} segment(s), {report.entries} entries "
            f"({span})"
        )
        if report.purged:
            click.echo(f"purged by retention (recorded in the chain): {', '.join(report.purged)}")
        if report.repaired:
            click.echo(f"torn lines closed off after a crash: {', '.join(report.repaired)}")
        if isinstance(report, PublicVerifyReport):
            _describe_public(report)
        for finding in report.findings:
            click.echo(f"  {finding}")
        if not report.complete:
            click.echo("  (verification stopped here; entries after this point were not checked)")
    if not report.ok:
        first = report.first
        assert first is not None
        raise AuditVerificationError(
            f"audit log verification failed at {first}"
            + (f" ({len(report.problems) - 1} more finding(s))" if len(report.problems) > 1 else "")
        )


@audit_group.command("tail")
@click.option(
    "-n",
    "count",
    type=click.IntRange(min=1, max=TAIL_MAX),
    default=20,
    show_default=True,
    help=f"How many entries (at most {TAIL_MAX:,}; `audit export` writes them all).",
)
@_dir_option
@json_option
@click.pass_obj
def tail(ctx: CliContext, count: int, folder: Path | None, as_json: bool) -> None:
    """Show the newest N entries (unverified; run `audit verify` to check them)."""
    log = _open_log(ctx, folder)
    try:
        entries = list(log.tail(count))
    finally:
        log.close()
    if as_json:
        emit_json([e.to_dict() for e in entries])
        return
    emit_table(None, _COLUMNS, _rows(entries))


def _existing(folder: Path) -> Path:
    if not audit_log_exists(folder):
        raise NotFoundError(
            f"there is no audit log in {folder}; check --workspace and --policy (audit.log_dir), "
            "or pass --dir"
        )
    return folder


@audit_group.command("export")
@click.option(
    "--since",
    required=True,
    help="First time to include: ISO date/time (UTC unless it has an offset) or an age like 30d.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write JSON Lines to this file (0600, atomically); default: stdout.",
)
@_dir_option
@click.pass_obj
def export(ctx: CliContext, since: str, out: Path | None, folder: Path | None) -> None:
    """Write the entries since DATETIME as JSON Lines, exactly as recorded, for reviewers."""
    try:
        start = export_since(since, _dt.datetime.now(_dt.UTC))
    except ConfigurationError as exc:
        raise click.BadParameter(_age_reason(since) or str(exc), param_hint="--since") from None
    log = _open_log(ctx, folder)
    try:
        lines = export_lines(log, start)
    finally:
        log.close()
    if out is None:
        sys.stdout.write("".join(lines))
        return
    write_export(out, lines)
    click.echo(f"exported {len(lines)} entries since {start.isoformat()} to {out}", err=True)


def _age_reason(text: str) -> str | None:
    """Why ``text``, written as an age (``99999999d``), is refused: e.g. over the maximum."""
    if not re.fullmatch(r"\s*\d[\dsmhdwy\s]*[smhdwy]\s*", text.lower()):
        return None
    try:
        parse_duration(text)
    except ValueError as exc:
        return str(exc)
    return None


@audit_group.command("lookup")
@click.option("--subject", "subject_id", default=None, help="A data subject's id.")
@click.option("--agent", default=None, help="An agent name.")
@click.option("--hold", "hold_id", default=None, help="A legal hold id.")
@click.option("--entries", "show_entries", is_flag=True, help="Also list the entries about it.")
@_dir_option
@json_option
@click.pass_obj
def lookup(
    ctx: CliContext,
    subject_id: str | None,
    agent: str | None,
    hold_id: str | None,
    show_entries: bool,
    folder: Path | None,
    as_json: bool,
) -> None:
    """Print the keyed hash the audit log records for a subject, agent or hold."""
    given = [(k, v) for k, v in (("subject", subject_id), ("agent", agent), ("hold", hold_id)) if v]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --subject, --agent or --hold")
    kind, value = given[0]
    assert value is not None
    keys = _keys(ctx)
    digest = keys[0].pseudonym(kind, value)
    # Entries before an audit key change hold the hash under the previous key.
    digests = {k.pseudonym(kind, value) for k in keys}
    attr = {"subject": "subject.hash", "agent": "agent.hash", "hold": "hold.hash"}[kind]
    matches: list[AuditEntry] = []
    if show_entries:
        log = _open_log(ctx, folder)
        try:
            matches = [e for e in log.entries() if digests & _hashes(e.attrs)]
        finally:
            log.close()
    if as_json:
        result: dict[str, Any] = {"kind": kind, "attribute": attr, "hash": digest}
        if show_entries:
            result["entries"] = [e.to_dict() for e in matches]
        emit_json(result)
        return
    click.echo(f"{attr} = {digest}")
    if show_entries:
        emit_table(None, _COLUMNS, _rows(matches))


def _hashes(attrs: Any) -> set[str]:
    found: set[str] = set()
    for key, value in attrs.items():
        if key.endswith(".hash") and isinstance(value, str):
            found.add(value)
        elif key.endswith(".hashes") and isinstance(value, list):
            found.update(v for v in value if isinstance(v, str))
    return found


@audit_group.command("repair")
@_dir_option
@json_option
@click.pass_obj
def repair(ctx: CliContext, folder: Path | None, as_json: bool) -> None:
    """Close off a torn last line left by a crash (recorded as an audit.repair entry)."""
    log = _open_log(ctx, folder, keys=_keys(ctx))
    try:
        written = list(log.repair())
    finally:
        log.close()
    if as_json:
        emit_json([e.to_dict() for e in written])
        return
    if not written:
        click.echo("nothing to repair")
    for entry in written:
        click.echo(f"wrote seq {entry.seq}: {entry.event} {_details(entry)}")


@audit_group.command("keygen")
@click.option(
    "--from-master-key",
    is_flag=True,
    help="Print the audit key now derived from the configured master key instead, to pin it "
    "as GOVERNED_MEMORY_AUDIT_KEY (the log continues; master key rotations no longer touch it).",
)
@click.pass_obj
def keygen(ctx: CliContext, from_master_key: bool) -> None:
    """Print a new random audit key (64 hex digits) for GOVERNED_MEMORY_AUDIT_KEY."""
    from .._audit import generate_audit_key, pinned_audit_key_text

    click.echo(pinned_audit_key_text(ctx.settings()) if from_master_key else generate_audit_key())


def _describe_public(report: PublicVerifyReport) -> None:
    keys = ", ".join(report.key_ids)
    if report.pinned_through is not None:
        click.echo(
            f"signed checkpoints (key {keys}) vouch for entries up to seq {report.pinned_through}"
        )
    for check in report.checkpoints:
        click.echo(f"  checkpoint {check.source}: seq {check.seq}, {check.status}")


@audit_group.command("checkpoint")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the checkpoint to this new file (0600, never overwritten) for an "
    "auditor to keep; default: print it.",
)
@click.option(
    "--latest",
    is_flag=True,
    help="Export the newest checkpoint already in the log (reads only: no key needed) "
    "instead of making one.",
)
@_dir_option
@click.pass_obj
def checkpoint(ctx: CliContext, out: Path | None, latest: bool, folder: Path | None) -> None:
    """Sign the chain head (seq, hash, time) and record it as an audit.checkpoint entry.

    Needs the audit key (it appends to the log) and the signing key. Keep the
    printed or written file: `audit verify --public-key PUB --checkpoint FILE`
    later detects a log cut short or replaced by an older copy.
    """
    if latest:
        reader = _open_log(ctx, folder)
        try:
            made = latest_checkpoint(reader)
        finally:
            reader.close()
    else:
        from .._audit import write_checkpoint

        signer = signing_key(ctx)
        workspace = _workspace(ctx) if folder is None else None
        log = _open_log(ctx, folder, keys=_keys(ctx), workspace=workspace)
        try:
            made = write_checkpoint(log, signer)
        finally:
            log.close()
    if out is not None:
        write_checkpoint_file(out, made)
        click.echo(f"checkpoint of seq {made.seq} written to {out}", err=True)
        return
    emit_json(made.to_dict())


commands: list[click.Command] = [audit_group]
