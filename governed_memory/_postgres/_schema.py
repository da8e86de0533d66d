"""The backend's schema: versioned migrations, applied by ``governed-memory db upgrade``.

Every table lives in the schema ``governed_memory``. ``governed_memory.schema_version``
holds one row per applied migration; :func:`upgrade` applies the missing ones in one
transaction under a transaction-scoped advisory lock (two hosts upgrading at once
apply each migration once), and :func:`check` refuses a database whose newest
migration is older or newer than this release's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import SchemaVersionError
from . import _ddl_audit, _ddl_keys, _ddl_memory, _ddl_records
from ._db import advisory_key

if TYPE_CHECKING:
    import psycopg

    from ._db import Database

__all__ = [
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "check_schema",
    "schema_version",
    "upgrade_schema",
    "verify_connection",
]

SCHEMA = "governed_memory"
"""The PostgreSQL schema holding every table of the backend."""

_BASE: tuple[str, ...] = (
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (
        version integer PRIMARY KEY,
        description text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    )""",
)

MIGRATIONS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: (
        "agent memory, registries, keyring, audit log, purge journal",
        (*_ddl_memory.DDL, *_ddl_records.DDL, *_ddl_audit.DDL, *_ddl_keys.DDL),
    ),
    2: ("audit entries waiting to be chained (group chaining)", _ddl_audit.PENDING_DDL),
}
"""Version -> (description, statements). A new release appends; a published one never changes."""

SCHEMA_VERSION = max(MIGRATIONS)
"""The schema version this release reads and writes."""


def schema_version(db: Database) -> int | None:
    """The newest applied migration; None when the database has no governed_memory schema."""
    with db.transaction("reading the schema version") as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_version",))
        exists = row.fetchone()
        if not exists or not exists[0]:
            return None
        got = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
        return None if got is None or got[0] is None else int(got[0])


def upgrade_schema(db: Database) -> tuple[int | None, int]:
    """Apply every missing migration in one transaction; (version before, version after).

    Raises:
        SchemaVersionError: the database is newer than this release.
    """
    with db.transaction("upgrading the schema") as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("schema", SCHEMA),))
        for statement in _BASE:
            conn.execute(statement)
        got = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
        before = None if got is None or got[0] is None else int(got[0])
        if before is not None and before > SCHEMA_VERSION:
            raise SchemaVersionError(_newer(db.where, before))
        for version in sorted(MIGRATIONS):
            if before is not None and version <= before:
                continue
            description, statements = MIGRATIONS[version]
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                f"INSERT INTO {SCHEMA}.schema_version (version, description) VALUES (%s, %s)",
                (version, description),
            )
    return before, SCHEMA_VERSION


def check_schema(db: Database) -> None:
    """Refuse a database whose schema is not this release's, naming both versions and the fix."""
    _refuse_other(schema_version(db), db.where)


def verify_connection(conn: psycopg.Connection[Any], where: str) -> None:
    """:func:`check_schema` on one open connection (``Database(verify=...)``), outside any pool."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_version",))
    exists = row.fetchone()
    version = None
    if exists and exists[0]:
        got = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
        version = None if got is None or got[0] is None else int(got[0])
    conn.rollback()
    _refuse_other(version, where)


def _refuse_other(version: int | None, where: str) -> None:
    if version == SCHEMA_VERSION:
        return
    if version is None:
        raise SchemaVersionError(
            f"the database at {where} has no governed_memory schema (this release uses "
            f"version {SCHEMA_VERSION}); create it with: governed-memory db upgrade"
        )
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(_newer(where, version))
    raise SchemaVersionError(
        f"the database at {where} has schema version {version}, older than this "
        f"release's {SCHEMA_VERSION}; apply the migrations with: governed-memory db upgrade"
    )


def _newer(where: str, version: int) -> str:
    return (
        f"the database at {where} has schema version {version}, newer than this "
        f"release's {SCHEMA_VERSION}: a newer governed_memory upgraded it; upgrade this "
        "host's governed_memory to the same release (never downgrade a database)"
    )
