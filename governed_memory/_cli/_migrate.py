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

import click

from .._errors import ConfigurationError
from ._context import CliContext
from ._render import emit_json, json_option

__all__ = ["commands", "migrate_storage_command"]


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
    from .._audit import audit_key_from_settings
    from .._migrate import database_end, migrate_storage, workspace_end
    from .._postgres import Database
    from .._retention import JournalFolder

    if not database_url:
        configured = getattr(cli.settings(), "database_url", None)
        database_url = configured.get_secret_value() if configured is not None else None
    if not database_url:
        raise ConfigurationError(
            "migrate-storage needs the database: set GOVERNED_MEMORY_DATABASE_URL (a libpq "
            "URL such as postgresql://app@db.example/governed) or pass --database-url"
        )
    gov = cli.governance()
    key = audit_key_from_settings(cli.settings())
    files = workspace_end(gov, key, JournalFolder(gov.governance_dir / "purge"))
    db = Database(database_url)
    try:
        database = database_end(gov, db, key)
        source, destination = (files, database) if target == "postgres" else (database, files)
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
