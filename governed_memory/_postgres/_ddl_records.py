"""The tables of the PostgreSQL backend's records part (schema ``governed_memory``), as DDL statements.

Part of schema version 1 (``_schema.MIGRATIONS``); statements run in order, in one
transaction, by ``governed-memory db upgrade``. Each is idempotent-free: a migration runs
once, recorded in ``governed_memory.schema_version``.

A log (consent, requests, an erasure's progress) is one ``record_logs`` row and one
``record_lines`` row per line, numbered by ``seq`` within the log; a document (holds, a
tombstone, a receipt) one ``record_documents`` row. ``line`` and ``body`` hold the very
bytes the file backend's lines and files hold (without a line's newline), so a sealed
record stays sealed and migrating is a byte copy. ``generation`` changes on every rewrite,
removal or write (one sequence for all), so a reader's "changed?" check is one key lookup.
"""

from __future__ import annotations

__all__ = ["DDL"]

DDL: tuple[str, ...] = (
    "CREATE SEQUENCE governed_memory.record_generation",
    """CREATE TABLE governed_memory.record_logs (
        name text PRIMARY KEY,
        generation bigint NOT NULL DEFAULT nextval('governed_memory.record_generation'),
        last_seq bigint NOT NULL DEFAULT 0,
        present boolean NOT NULL DEFAULT true
    )""",
    """CREATE TABLE governed_memory.record_lines (
        log text NOT NULL REFERENCES governed_memory.record_logs (name) ON DELETE CASCADE,
        seq bigint NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (log, seq)
    )""",
    """CREATE TABLE governed_memory.record_documents (
        name text PRIMARY KEY,
        generation bigint NOT NULL DEFAULT nextval('governed_memory.record_generation'),
        body bytea NOT NULL
    )""",
)
