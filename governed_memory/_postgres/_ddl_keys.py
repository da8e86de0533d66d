"""The tables of the PostgreSQL backend's keyring and purge journal (schema ``governed_memory``).

Part of schema version 1 (``_schema.MIGRATIONS``); statements run in order, in one
transaction, by ``governed-memory db upgrade``. Each is idempotent-free: a migration runs
once, recorded in ``governed_memory.schema_version``.

* ``keyring_meta``: one row, the keyring's ``keyring.json`` bytes (workspace id and
  the index key, wrapped by the master key).
* ``keyring_entries``: one row per agent, subject or purpose key: its ref (an HMAC,
  never a subject id) and its entry's JSON bytes (every generation wrapped).
* ``keyring_counter``: one row, the change counter every host compares before
  reusing the keys it remembers.
* ``purge_plans`` / ``purge_entries`` / ``purge_outcomes``: a purge's journal by name
  (header, footer, the entries in order) and the outcome bytes recorded so far.

No key material is ever stored: every key in these rows is wrapped.
"""

from __future__ import annotations

__all__ = ["DDL"]

DDL: tuple[str, ...] = (
    """CREATE TABLE governed_memory.keyring_meta (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        data bytea NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE governed_memory.keyring_entries (
        ref bytea PRIMARY KEY CHECK (octet_length(ref) BETWEEN 1 AND 64),
        data bytea NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE governed_memory.keyring_counter (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        value bigint NOT NULL
    )""",
    "INSERT INTO governed_memory.keyring_counter (singleton, value) VALUES (true, 0)",
    """CREATE TABLE governed_memory.purge_plans (
        name text PRIMARY KEY,
        header text NOT NULL,
        footer text NOT NULL,
        total bigint NOT NULL CHECK (total > 0),
        written_at timestamptz NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE governed_memory.purge_entries (
        name text NOT NULL REFERENCES governed_memory.purge_plans (name) ON DELETE CASCADE
            DEFERRABLE INITIALLY DEFERRED,
        n bigint NOT NULL,
        entry text NOT NULL,
        PRIMARY KEY (name, n)
    )""",
    """CREATE TABLE governed_memory.purge_outcomes (
        name text NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        outcomes bytea NOT NULL,
        PRIMARY KEY (name, seq)
    )""",
)
