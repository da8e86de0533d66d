"""Database commands: ``db upgrade`` (apply the schema's migrations) and ``db status``.

Both name the server as libpq resolves it (host, port, database; never a user
or password) and work from the settings alone: no audit or master key is
needed to upgrade or inspect the schema. With the file backend there is no
database: ``db status`` says so and how to configure one (exit 0, it is an
answer); ``db upgrade`` has nothing to upgrade and exits 1 with the same fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .._errors import ConfigurationError
from ._context import CliContext
from ._render import emit_json, emit_table, json_option

if TYPE_CHECKING:
    from .._policy import Policy, Settings
    from .._postgres import Database

__all__ = ["commands"]

HOW_TO_CONFIGURE = (
    "set GOVERNED_MEMORY_DATABASE_URL=postgresql://user@host:5432/dbname (or [storage] "
    'backend = "postgres" in the policy, with libpq\'s PG* variables naming the server); '
    "see docs/settings.md"
)


def _configured(cli: CliContext) -> tuple[Settings, Policy, str]:
    """The settings, the effective policy and the backend they choose (the choice validated)."""
    from .._governance import storage_backend
    from .._policy import resolve_policy

    settings = cli.settings()
    policy = resolve_policy(settings).policy
    return settings, policy, storage_backend(settings, policy)


def _database(settings: Settings) -> Database:
    from .._postgres import Database

    url = settings.database_url.get_secret_value() if settings.database_url is not None else ""
    return Database(url, max_size=1)


@click.group("db")
def db_group() -> None:
    """Create and inspect the PostgreSQL schema of a database deployment (see docs/postgres.md)."""


@db_group.command("upgrade")
@json_option
@click.pass_obj
def upgrade(cli: CliContext, as_json: bool) -> None:
    """Apply the schema migrations this release has and the database lacks (idempotent).

    One transaction, under an advisory lock: hosts upgrading at once apply
    each migration once. A database newer than this release is refused.
    """
    from .._postgres import upgrade_schema

    settings, _, backend = _configured(cli)
    if backend != "postgres":
        raise ConfigurationError(
            f"no database is configured (the storage backend is {backend}), so there is no "
            f"schema to upgrade; to store in PostgreSQL, {HOW_TO_CONFIGURE}"
        )
    db = _database(settings)
    try:
        before, after = upgrade_schema(db)
    finally:
        db.close()
    if as_json:
        emit_json({"server": db.where, "before": before, "after": after})
    elif before == after:
        click.echo(f"schema of {db.where} is up to date (version {after})")
    else:
        click.echo(
            f"upgraded the schema of {db.where} from {'none' if before is None else before} "
            f"to version {after}"
        )


@db_group.command("status")
@json_option
@click.pass_obj
def status(cli: CliContext, as_json: bool) -> None:
    """Print the storage backend and, for a database, its server and schema version vs this release."""
    from .._postgres import SCHEMA_VERSION, schema_version

    settings, _, backend = _configured(cli)
    report: dict[str, Any] = {
        "backend": backend,
        "database_url": "set" if settings.database_url is not None else "unset",
        "server": None,
        "schema_version": None,
        "release_schema_version": SCHEMA_VERSION,
        "state": "no database",
    }
    if backend == "postgres":
        db = _database(settings)
        try:
            report["server"] = db.where
            version = schema_version(db)
        finally:
            db.close()
        report["schema_version"] = version
        report["state"] = _state(version)
    if as_json:
        emit_json(report)
        return
    if backend != "postgres":
        click.echo(
            f"backend: {backend} (the workspace's folders); no database is configured. "
            f"To store in PostgreSQL, {HOW_TO_CONFIGURE}"
        )
        return
    emit_table(
        "storage",
        ["key", "value"],
        [
            ("backend", backend),
            ("server", report["server"]),
            ("schema version", _cell(report["schema_version"])),
            ("this release's schema version", SCHEMA_VERSION),
            ("state", report["state"]),
        ],
    )


def _state(version: int | None) -> str:
    from .._postgres import SCHEMA_VERSION

    if version is None:
        return "no schema: run `governed-memory db upgrade`"
    if version < SCHEMA_VERSION:
        return "older than this release: run `governed-memory db upgrade`"
    if version > SCHEMA_VERSION:
        return "newer than this release: upgrade governed_memory on this host"
    return "up to date"


def _cell(value: int | None) -> str:
    return "none" if value is None else str(value)


commands: list[click.Command] = [db_group]
