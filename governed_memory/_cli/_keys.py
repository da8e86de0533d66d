"""Encryption commands: ``keys generate|status|rotate``, ``encrypt-workspace``, ``decrypt-workspace``.

Key material is never printed except by ``keys generate`` (which prints or
writes the new key it made, and nothing else). Everything else shows key ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from .._crypto import LocalKeyProvider, generate_master_key, keyring_status
from .._errors import StorageError
from ._context import CliContext, actor_option
from ._render import emit_json, emit_table, json_option

if TYPE_CHECKING:
    from .._crypto import Keyring, KeyringStatus
    from .._governance import AuditSink

__all__ = ["commands"]

ProgressFn = Callable[[str, int, int], None]


@contextmanager
def _progress(enabled: bool) -> Iterator[ProgressFn]:
    """A progress bar on stderr (none for --json or when stderr is not a terminal)."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda phase, done, total: None
        return
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
    ) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)  # type: ignore[arg-type]

        yield update


def _keyring(
    cli: CliContext,
    *,
    require_key: bool = True,
    old_key_file: Path | None = None,
    observer: AuditSink | None = None,
) -> Keyring:
    """The workspace's keyring; a command that changes keys passes the audit ``observer``."""
    from .._governance import open_keyring

    extra = [LocalKeyProvider.from_file(old_key_file)] if old_key_file is not None else []
    settings = cli.settings()
    return open_keyring(
        cli.storage(settings),
        settings,
        require_key=require_key,
        extra_old=extra,
        observer=observer,
    )


@click.group("keys")
def keys_group() -> None:
    """Manage encryption keys: generate a master key, show which key wraps what, rotate (docs/encryption.md)."""


@keys_group.command("generate")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the key to this new file (mode 0600, in an existing folder; never "
    "overwritten) instead of printing it.",
)
@json_option
def generate(out: Path | None, as_json: bool) -> None:
    """Create a new random master key (base64 of 32 bytes) and show its key id.

    Printed on stdout unless --out is given. Store it outside the workspace:
    in a secret manager, or a 0600 file named by GOVERNED_MEMORY_MASTER_KEY_FILE.
    A missing or unwritable folder, an existing file or a full disk ends with
    a one-line error naming the path and the fix, and no file is left.
    """
    key = generate_master_key()
    key_id = LocalKeyProvider.from_base64(key).key_id
    if out is not None:
        from .._keys import write_key_file

        write_key_file(out, key)
    if as_json:
        emit_json(
            {"key_id": key_id, "file": str(out) if out else None, **({} if out else {"key": key})}
        )
    elif out is not None:
        click.echo(f"wrote master key {key_id} to {out} (mode 0600)")
    else:
        click.echo(key)
        click.echo(f"key id: {key_id}", err=True)


@keys_group.command("status")
@json_option
@click.pass_obj
def status(cli: CliContext, as_json: bool) -> None:
    """Show the keyring: each data key, its generations and the master key id wrapping it."""
    keyring = _keyring(cli, require_key=False)
    report = _status_report(keyring, cli)
    storage = cli.storage()
    if storage.files is None:  # a database keeps the wrapped keys: name it, never its URL
        report = dataclasses.replace(report, folder=f"{storage.where} (wrapped keys only)")
    if as_json:
        emit_json(report.as_dict())
        return
    click.echo(f"keyring: {report.folder}" + ("" if report.exists else " (not created yet)"))
    if report.exists:
        click.echo(f"workspace id: {report.workspace_id}")
    click.echo(f"configured master key: {report.master_key_id or '(none configured)'}")
    if report.inside_workspace:
        click.echo(
            "note: the keyring is inside the workspace, so a backup of the workspace keeps the "
            "wrapped keys and crypto-shredding does not reach it (see SECURITY.md)"
        )
    if report.reencrypt_pending:
        click.echo(
            "a re-encryption was interrupted: run `governed-memory keys rotate` to finish it"
        )
    if not report.exists:
        return
    emit_table(
        "Wrapped keys per master key",
        ["master key id", "wrapped keys", "current"],
        [
            (k, n, "yes" if k == report.master_key_id else "")
            for k, n in report.by_master_key.items()
        ],
    )
    emit_table(
        "Data keys",
        ["kind", "name", "ref", "current gen", "generations", "wrapped by", "state"],
        [
            (
                k.kind,
                k.name,
                k.ref[:12],
                k.current,
                ",".join(map(str, k.generations)) or "-",
                ",".join(sorted(set(k.wrapped_by))) or "-",
                k.state if k.state != "shredded" else f"shredded {k.shredded_at or ''}".strip(),
            )
            for k in report.keys
        ],
    )


def _status_report(keyring: Keyring, cli: CliContext) -> KeyringStatus:
    try:
        return keyring_status(keyring, cli.storage().files or cli.workspace)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        # keyring_status reads keyring.json as JSON without checking its shape.
        raise StorageError(
            f"the keyring file {keyring.meta_path} is damaged: it is not the JSON "
            "object this release writes. Nothing was changed; restore the keyring folder from "
            "its backup (or point GOVERNED_MEMORY_KEYRING_DIR at the right keyring)"
        ) from exc


@keys_group.command("rotate")
@click.option(
    "--old-key-file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="File holding the previous master key (else GOVERNED_MEMORY_MASTER_KEY_OLD[_FILE]).",
)
@click.option("--reencrypt", is_flag=True, help="Also re-encrypt all data under fresh data keys.")
@actor_option
@json_option
@click.pass_obj
def rotate(
    cli: CliContext, old_key_file: Path | None, reencrypt: bool, actor: str | None, as_json: bool
) -> None:
    """Re-wrap every data key under the current master key (GOVERNED_MEMORY_MASTER_KEY).

    The previous key must still be given while this runs. Resumable: run it
    again after an interruption. Nothing is printed of the keys but their ids.
    Audited (keys.rotate, keys.reencrypt) with the actor.
    """
    from .._keys import rotate as run

    settings = cli.settings()
    given_old = settings.master_key_old is not None or settings.master_key_old_file is not None
    if old_key_file is not None and not given_old:
        # The old key also gives the audit key's previous version, when the
        # audit key derives from the master key (versioned audit keys).
        settings = cli.settings(master_key_old_file=old_key_file)
    storage = cli.storage(settings)
    audit = cli.audit_as(actor, cli.governance(settings).audit)
    keyring = _keyring(cli, old_key_file=old_key_file, observer=audit)
    with _progress(not as_json) as progress:
        # A database's keyring (no files): its wrapped keys are re-wrapped in their rows,
        # and --reencrypt is refused before anything changes.
        report = run(storage.files, keyring, reencrypt_data=reencrypt, progress=progress)
    if as_json:
        emit_json(report.as_dict())
        return
    emit_table(
        f"Rotation to master key {report.to_key_id}",
        ["what", "count"],
        [
            (name.replace("_", " "), value)
            for name, value in report.as_dict().items()
            if isinstance(value, int)
        ],
    )
    if report.from_key_ids:
        click.echo(
            f"no longer used: {', '.join(report.from_key_ids)} (keep it until backups made under it expire)"
        )


def _migrate(cli: CliContext, direction: str, actor: str | None, as_json: bool) -> None:
    from .._keys import decrypt_workspace, encrypt_workspace

    keyring = _keyring(cli, observer=cli.audit_as(actor))
    run = encrypt_workspace if direction == "encrypt" else decrypt_workspace
    with _progress(not as_json) as progress:
        report = run(cli.file_workspace(), keyring, progress=progress)
    if as_json:
        emit_json(report.as_dict())
        return
    click.echo(
        f"{direction}ed {report.converted} file(s) in {report.agents} agent(s) "
        f"({report.subjects} subject memories, {report.renamed} subject folders renamed); "
        f"{report.already_done} finished by an earlier run"
    )


@click.command("encrypt-workspace")
@actor_option
@json_option
@click.pass_obj
def encrypt_workspace(cli: CliContext, actor: str | None, as_json: bool) -> None:
    """Encrypt every plaintext MEMORY.md and archive of the workspace (idempotent, crash-safe).

    Subject memories (agents/<agent>/subjects/<p>/) are encrypted too and
    their folders renamed to the keyed name. Stop the agents first. Each plaintext file is removed only after its
    encrypted copy was read back and found identical. The consent log, the
    holds file and the erasure records are sealed too. Audited
    (encrypt-workspace) with the actor.
    """
    _migrate(cli, "encrypt", actor, as_json)


@click.command("decrypt-workspace")
@actor_option
@json_option
@click.pass_obj
def decrypt_workspace(cli: CliContext, actor: str | None, as_json: bool) -> None:
    """Turn every encrypted memory and archive (and sealed record) back into plaintext (idempotent).

    Audited (decrypt-workspace) with the actor.
    """
    _migrate(cli, "decrypt", actor, as_json)


def _signing_commands() -> None:
    from ._evidence import keys_commands

    for command in keys_commands:
        keys_group.add_command(command)


_signing_commands()

commands: list[click.Command] = [keys_group, encrypt_workspace, decrypt_workspace]
