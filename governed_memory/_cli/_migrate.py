"""``governed-memory migrate-storage``: copy a workspace into PostgreSQL, or back into a folder.

The command builds the two ends of :func:`~governed_memory._migrate.migrate_storage`
from the settings: the workspace (``--workspace``) with its stores, keyring
folder, audit log and purge journal, and the database named by
``GOVERNED_MEMORY_DATABASE_URL`` (never printed), its schema upgraded first by
``governed-memory db upgrade``. The keys stay the workspace's: an encrypted
workspace's memories are re-sealed by the database's stores under the same
keyring, opened with the configured master key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .._errors import ConfigurationError
from ._context import CliContext
from ._render import emit_json, json_option

if TYPE_CHECKING:
    from .._governance import Governance
    from .._migrate import StorageEnd

__all__ = ["commands", "migrate_storage_command"]


def _audit_key(cli: CliContext) -> Any:
    from .._audit import audit_key_from_settings

    return audit_key_from_settings(cli.settings())


def _files(cli: CliContext, gov: Governance) -> StorageEnd:
    from .._audit import AuditLog, audit_log_dir
    from .._crypto import KeyringFolder
    from .._migrate import file_end
    from .._retention import JournalFolder
    from .._stores import FileMemoryBackend

    workspace = cli.workspace
    key = _audit_key(cli)
    folder = audit_log_dir(gov.policy, workspace)
    return file_end(
        workspace,
        FileMemoryBackend(workspace, gov.store_factory),
        keys=KeyringFolder(gov.governance_dir / "keyring"),
        audit=AuditLog(folder, key, workspace=workspace) if key is not None else None,
        audit_folder=folder,
        journal=JournalFolder(gov.governance_dir / "purge"),
    )


def _database(cli: CliContext, gov: Governance, url: str) -> tuple[StorageEnd, Any]:
    from .._crypto import Keyring
    from .._migrate import pg_end
    from .._postgres import (
        Database,
        PgAuditStorage,
        PgKeyStorage,
        PgMemoryBackend,
        PgPurgeJournal,
        check_schema,
        pg_store_factory,
    )

    db = Database(url)
    check_schema(db)
    storage = PgKeyStorage(db)
    keyring = None
    if gov.policy.encryption.enabled:
        ring = Keyring(None, gov.keyring.provider, storage=storage)
        keyring = lambda: ring  # noqa: E731
    key = _audit_key(cli)
    end = pg_end(
        db,
        PgMemoryBackend(db, pg_store_factory(db, keyring=keyring, clock=gov.clock)),
        keys=storage,
        audit=PgAuditStorage(db, key) if key is not None else None,
        journal=PgPurgeJournal(db),
    )
    return end, db


@click.command("migrate-storage")
@click.option(
    "--to",
    "target",
    type=click.Choice(["postgres", "files"]),
    required=True,
    help="postgres: copy the workspace into the database; files: copy the database into --workspace.",
)
@click.option(
    "--database-url",
    envvar="GOVERNED_MEMORY_DATABASE_URL",
    default=None,
    show_default=False,
    help="The database (default: GOVERNED_MEMORY_DATABASE_URL; never printed).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_obj
def migrate_storage_command(
    cli: CliContext, target: str, database_url: str | None, yes: bool, as_json: bool
) -> None:
    """Copy the workspace into PostgreSQL (--to postgres) or back into a folder (--to files).

    Resumable: after a crash or kill -9, run the same command again. Every
    item is read back and compared with the source. Stop every host first.
    """
    from .._migrate import migrate_storage

    if not database_url:
        configured = getattr(cli.settings(), "database_url", None)
        database_url = configured.get_secret_value() if configured is not None else None
    if not database_url:
        raise ConfigurationError(
            "migrate-storage needs the database: set GOVERNED_MEMORY_DATABASE_URL (a libpq "
            "URL such as postgresql://app@db.example/governed) or pass --database-url"
        )
    gov = cli.governance()
    files = _files(cli, gov)
    database, db = _database(cli, gov, database_url)
    source, destination = (files, database) if target == "postgres" else (database, files)
    try:
        if not yes:
            click.confirm(
                f"Copy {source.describe} into {destination.describe}? Stop every host first",
                abort=True,
                err=True,
            )

        def progress(what: str, count: int) -> None:
            if not as_json:
                click.echo(f"{what}: {count}", err=True)

        report = migrate_storage(source, destination, progress=progress)
    finally:
        db.close()
    if as_json:
        emit_json(report.to_dict())
        return
    verified = ", ".join(f"{n} {kind}" for kind, n in report.verified.items())
    click.echo(
        f"migrated {report.source} into {report.destination}: "
        f"{sum(report.copied.values())} item(s) copied now; verified {verified}"
    )


commands: list[click.Command] = [migrate_storage_command]
