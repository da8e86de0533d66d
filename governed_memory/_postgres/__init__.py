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
    "PgMemoryBackend",
    "PgStores",
    "advisory_key",
    "check_schema",
    "pg_store_factory",
    "schema_version",
    "upgrade_schema",
]

if TYPE_CHECKING:
    from ._db import Database, advisory_key
    from ._memory import PgAgentStore
    from ._memory_backend import PgMemoryBackend, PgStores, pg_store_factory
    from ._schema import SCHEMA, SCHEMA_VERSION, check_schema, schema_version, upgrade_schema

_LAZY: dict[str, str] = {
    "Database": "._db",
    "advisory_key": "._db",
    "PgAgentStore": "._memory",
    "PgStores": "._memory_backend",
    "pg_store_factory": "._memory_backend",
    "PgMemoryBackend": "._memory_backend",
    "SCHEMA": "._schema",
    "SCHEMA_VERSION": "._schema",
    "check_schema": "._schema",
    "schema_version": "._schema",
    "upgrade_schema": "._schema",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
