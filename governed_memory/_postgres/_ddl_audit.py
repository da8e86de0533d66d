"""The tables of the PostgreSQL backend's audit part (schema ``governed_memory``), as DDL statements.

Part of schema version 1 (``_schema.MIGRATIONS``); statements run in order, in one
transaction, by ``governed-memory db upgrade``. Each is idempotent-free: a migration runs
once, recorded in ``governed_memory.schema_version``.
"""

from __future__ import annotations

__all__ = ["DDL"]

DDL: tuple[str, ...] = ()
