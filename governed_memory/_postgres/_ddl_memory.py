"""The tables of the PostgreSQL backend's memory part (schema ``governed_memory``), as DDL statements.

Part of schema version 1 (``_schema.MIGRATIONS``); statements run in order, in one
transaction, by ``governed-memory db upgrade``. Each is idempotent-free: a migration runs
once, recorded in ``governed_memory.schema_version``.

Laid out for the two hot operations (``_memory.py``):

* ``memories``: one row per active memory, an agent's own (``partition`` '') or one
  subject's (the partition's 32 hex digits). ``header`` is the 64-byte header of an
  encrypted memory (its random file id binds the frames to this memory), NULL when
  plaintext. Agents are listed from its ``(agent, partition)`` index.
* ``memory_blocks``: the memory's text in pieces, position 0 the header text: an
  append is one INSERT of one row (one frame per block when encrypted), reading is
  one SELECT in primary-key order. Rows go with their memory (ON DELETE CASCADE).
* ``memory_archives``: one row per archive, the whole text (or sealed archive) in
  ``data``. ``COLLATE "C"`` orders ids byte-wise, oldest first, whatever the
  database's locale.
"""

from __future__ import annotations

__all__ = ["DDL"]

DDL: tuple[str, ...] = (
    """CREATE TABLE governed_memory.memories (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        agent text COLLATE "C" NOT NULL,
        partition text COLLATE "C" NOT NULL DEFAULT '',
        header bytea,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT memories_agent_partition UNIQUE (agent, partition)
    )""",
    """CREATE TABLE governed_memory.memory_blocks (
        memory_id bigint NOT NULL
            REFERENCES governed_memory.memories (id) ON DELETE CASCADE,
        position integer NOT NULL,
        data bytea NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (memory_id, position)
    )""",
    """CREATE TABLE governed_memory.memory_archives (
        agent text COLLATE "C" NOT NULL,
        partition text COLLATE "C" NOT NULL DEFAULT '',
        archive_id text COLLATE "C" NOT NULL,
        data bytea NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (agent, partition, archive_id)
    )""",
)
