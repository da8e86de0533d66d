"""The PostgreSQL backend: every protocol of the storage seam over one database.

Selected by ``GOVERNED_MEMORY_DATABASE_URL`` or the policy's ``[storage]`` table
(docs/postgres.md). Needs the ``postgres`` extra (psycopg 3 and psycopg_pool);
importing this package imports neither until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "Database",
    "PgAgentStore",
    "PgAuditStorage",
    "PgKeyStorage",
    "PgLeadership",
    "PgLock",
    "PgMemoryBackend",
    "PgPlace",
    "PgPurgeJournal",
    "PgStores",
    "advisory_key",
    "check_schema",
    "open_storage",
    "pg_store_factory",
    "schema_version",
    "upgrade_schema",
]

if TYPE_CHECKING:
    from ._audit import PgAuditStorage
    from ._db import Database, advisory_key
    from ._deployment import open_storage
    from ._journal import PgPurgeJournal
    from ._keyring import PgKeyStorage
    from ._leader import PgLeadership
    from ._memory import PgAgentStore
    from ._memory_backend import PgMemoryBackend, PgStores, pg_store_factory
    from ._records import PgLock, PgPlace
    from ._schema import SCHEMA, SCHEMA_VERSION, check_schema, schema_version, upgrade_schema

_LAZY: dict[str, str] = {
    "Database": "._db",
    "PgAuditStorage": "._audit",
    "advisory_key": "._db",
    "PgAgentStore": "._memory",
    "PgStores": "._memory_backend",
    "pg_store_factory": "._memory_backend",
    "PgMemoryBackend": "._memory_backend",
    "PgLock": "._records",
    "PgPlace": "._records",
    "PgKeyStorage": "._keyring",
    "PgLeadership": "._leader",
    "PgPurgeJournal": "._journal",
    "SCHEMA": "._schema",
    "SCHEMA_VERSION": "._schema",
    "check_schema": "._schema",
    "open_storage": "._deployment",
    "schema_version": "._schema",
    "upgrade_schema": "._schema",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
