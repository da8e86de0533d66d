"""The tables of the PostgreSQL backend's audit part (schema ``governed_memory``), as DDL statements.

Schema versions 1 and 2 (``_schema.MIGRATIONS``); statements run in order, in one
transaction, by ``governed-memory db upgrade``. Each is idempotent-free: a migration runs
once, recorded in ``governed_memory.schema_version``.

Tables:

* ``audit_entries``: one row per sealed entry of the deployment's one chain. ``line`` is
  the entry's canonical JSON bytes, exactly the file log's line (what ``verify`` checks);
  ``seq``, ``segment``, ``ts`` and ``event`` are copies for ordering, retention and
  queries, never trusted by ``verify``.
* ``audit_head``: one row, the newest entry (seq, hash, segment) MACed under the audit
  key, rewritten in the same transaction as each append.
* ``audit_pending`` (schema version 2): entries committed with the write they record
  but not chained yet (``_audit``'s group chaining). Each row is MACed under the audit
  key by its writer (a row without a valid MAC is chained as an ``audit.discontinuity``,
  never as what it claims); ``audit_entries.token`` names the pending row an entry
  was chained from.

Tamper evidence and least privilege, in two layers:

1. Privileges. The *schema owner* (the role that runs ``governed-memory db upgrade``)
   owns the tables, the trigger and the purge function. The *application role* the
   hosts connect as gets only what appending needs (:func:`application_grants`):
   ``SELECT, INSERT`` on ``audit_entries``, ``SELECT, INSERT, UPDATE`` on
   ``audit_head``, ``SELECT, INSERT, DELETE`` on ``audit_pending`` (and its sequence)
   and ``EXECUTE`` on ``audit_purge_segments``. It has no ``UPDATE``,
   ``DELETE`` or ``TRUNCATE`` on the entries, and not being the owner it can neither
   ``DROP`` nor ``ALTER`` them (nor disable the trigger).
2. A trigger refuses ``UPDATE``, ``DELETE`` and ``TRUNCATE`` of ``audit_entries`` for
   everyone, the owner too, except a ``DELETE`` while the transaction-local setting
   ``governed_memory.audit_purge`` is ``on``. Only ``audit_purge_segments`` sets it: a
   ``SECURITY DEFINER`` function owned by the schema owner (so it may delete although
   its caller may not) that removes whole segments only when the chain's newest entry
   is the ``audit.purge`` entry naming exactly them and they are the oldest. Setting
   the variable by hand gives the application role nothing (it still lacks ``DELETE``);
   the owner could, but the owner can drop the trigger anyway. A second trigger
   refuses ``UPDATE`` and ``TRUNCATE`` of ``audit_pending`` and lets a ``DELETE`` through
   only for a row whose token the chain already holds: a waiting entry cannot be
   dropped before it is chained.

What this does not stop: a superuser, or the owner, can disable the trigger and
rewrite rows. That is what the chain is for: ``verify`` finds every changed, removed or
reordered entry (the same findings as for an edited file), and signed checkpoints
kept off the database catch a rollback of the whole table.
"""

from __future__ import annotations

__all__ = ["DDL", "PENDING_DDL", "PURGE_SETTING", "application_grants"]

PURGE_SETTING = "governed_memory.audit_purge"
"""The transaction-local setting under which the trigger lets a purge delete rows."""

DDL: tuple[str, ...] = (
    """CREATE TABLE governed_memory.audit_entries (
        seq bigint PRIMARY KEY CHECK (seq > 0),
        segment text NOT NULL,
        ts timestamptz NOT NULL,
        event text NOT NULL,
        line bytea NOT NULL
    )""",
    "CREATE INDEX audit_entries_segment ON governed_memory.audit_entries (segment, seq)",
    """CREATE TABLE governed_memory.audit_head (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        seq bigint NOT NULL,
        hash text NOT NULL,
        segment text NOT NULL,
        mac text NOT NULL
    )""",
    f"""CREATE FUNCTION governed_memory.audit_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' AND current_setting('{PURGE_SETTING}', true) = 'on' THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'governed_memory.audit_entries is append-only: % refused',
            TG_OP
            USING ERRCODE = 'insufficient_privilege',
            HINT = 'audit entries are removed only by retention, whole segments at a time '
                'through governed_memory.audit_purge_segments, recorded in the chain first';
    END
    $$""",
    """CREATE TRIGGER audit_entries_append_only
        BEFORE UPDATE OR DELETE ON governed_memory.audit_entries
        FOR EACH ROW EXECUTE FUNCTION governed_memory.audit_refuse_change()""",
    """CREATE TRIGGER audit_entries_no_truncate
        BEFORE TRUNCATE ON governed_memory.audit_entries
        FOR EACH STATEMENT EXECUTE FUNCTION governed_memory.audit_refuse_change()""",
    f"""CREATE FUNCTION governed_memory.audit_purge_segments(names text[]) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
        newest jsonb;
        last_purged bigint;
        removed bigint;
    BEGIN
        SELECT convert_from(line, 'UTF8')::jsonb INTO newest
            FROM governed_memory.audit_entries ORDER BY seq DESC LIMIT 1;
        SELECT max(seq) INTO last_purged
            FROM governed_memory.audit_entries WHERE segment = ANY (names);
        IF newest IS NULL OR newest->>'event' IS DISTINCT FROM 'audit.purge'
                OR newest->'attrs'->'segments' IS DISTINCT FROM to_jsonb(names)
                OR (newest->'attrs'->>'last_seq')::bigint IS DISTINCT FROM last_purged THEN
            RAISE EXCEPTION 'segments % are not what the newest audit.purge entry records', names
                USING ERRCODE = 'insufficient_privilege',
                HINT = 'append the audit.purge entry naming them first (PgAuditStorage.purge_segments)';
        END IF;
        IF EXISTS (SELECT 1 FROM governed_memory.audit_entries
                   WHERE seq < last_purged AND segment <> ALL (names)) THEN
            RAISE EXCEPTION 'segments % are not the oldest of the audit log', names
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        PERFORM set_config('{PURGE_SETTING}', 'on', true);
        DELETE FROM governed_memory.audit_entries WHERE segment = ANY (names);
        GET DIAGNOSTICS removed = ROW_COUNT;
        PERFORM set_config('{PURGE_SETTING}', 'off', true);
        RETURN removed;
    END
    $$""",
    "REVOKE ALL ON FUNCTION governed_memory.audit_purge_segments(text[]) FROM PUBLIC",
)


PENDING_DDL: tuple[str, ...] = (
    """CREATE TABLE governed_memory.audit_pending (
        id bigserial PRIMARY KEY,
        token bytea NOT NULL UNIQUE,
        at timestamptz NOT NULL,
        event text NOT NULL,
        attrs bytea NOT NULL,
        kid text NOT NULL,
        mac text NOT NULL
    )""",
    "ALTER TABLE governed_memory.audit_entries ADD COLUMN token bytea",
    """CREATE UNIQUE INDEX audit_entries_token ON governed_memory.audit_entries (token)
        WHERE token IS NOT NULL""",
    """CREATE FUNCTION governed_memory.audit_pending_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' AND EXISTS (
                SELECT FROM governed_memory.audit_entries WHERE token = OLD.token) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'governed_memory.audit_pending: % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege',
            HINT = 'a waiting audit entry leaves only once the chain holds it';
    END
    $$""",
    """CREATE TRIGGER audit_pending_append_only
        BEFORE UPDATE OR DELETE ON governed_memory.audit_pending
        FOR EACH ROW EXECUTE FUNCTION governed_memory.audit_pending_refuse_change()""",
    """CREATE TRIGGER audit_pending_no_truncate
        BEFORE TRUNCATE ON governed_memory.audit_pending
        FOR EACH STATEMENT EXECUTE FUNCTION governed_memory.audit_pending_refuse_change()""",
)
"""Schema version 2: entries waiting to be chained (``audit_pending``), see the module docstring."""


def application_grants(role: str) -> tuple[str, ...]:
    """The statements that give the application ``role`` what the audit log needs, no more.

    Run them as the schema owner after ``governed-memory db upgrade``. ``role`` is
    quoted as an identifier (any role name works).
    """
    quoted = '"' + role.replace('"', '""') + '"'
    return (
        f"GRANT USAGE ON SCHEMA governed_memory TO {quoted}",
        f"GRANT SELECT, INSERT ON governed_memory.audit_entries TO {quoted}",
        f"GRANT SELECT, INSERT, UPDATE ON governed_memory.audit_head TO {quoted}",
        f"GRANT SELECT, INSERT, DELETE ON governed_memory.audit_pending TO {quoted}",
        f"GRANT USAGE ON SEQUENCE governed_memory.audit_pending_id_seq TO {quoted}",
        f"GRANT EXECUTE ON FUNCTION governed_memory.audit_purge_segments(text[]) TO {quoted}",
    )
