"""The two ends of a deployment's migration, opened from its Governance: the folder and the database.

What ``governed-memory migrate-storage`` copies between: the workspace's stores,
keyring folder and audit log as :func:`workspace_end`, and the database's as
:func:`database_end`, whose encrypted stores seal under a keyring over the
database's key storage opened with the workspace's master key. The caller
passes the audit key (None: no audit log) and the purge journal of the
workspace (the retention layer's, a sibling this package does not import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._ends import StorageEnd, file_end, pg_end

if TYPE_CHECKING:
    from .._audit import AuditKey
    from .._governance import Governance
    from .._protocols import PurgeJournal

__all__ = ["database_end", "workspace_end"]


def workspace_end(
    gov: Governance, audit_key: AuditKey | None, journal: PurgeJournal | None = None
) -> StorageEnd:
    """The end of ``gov``'s workspace folder: its stores, keyring folder, audit log and ``journal``."""
    from .._audit import AuditLog, audit_log_dir
    from .._crypto import KeyringFolder
    from .._stores import FileMemoryBackend

    workspace = gov.workspace
    folder = audit_log_dir(gov.policy, workspace)
    return file_end(
        workspace,
        FileMemoryBackend(workspace, gov.store_factory),
        keys=KeyringFolder(gov.governance_dir / "keyring"),
        audit=AuditLog(folder, audit_key, workspace=workspace) if audit_key is not None else None,
        audit_folder=folder,
        journal=journal,
    )


def database_end(gov: Governance, db: Any, audit_key: AuditKey | None) -> StorageEnd:
    """The end of the database ``db`` (a ``_postgres.Database``), its schema checked first.

    Raises:
        SchemaVersionError: the schema is missing or of another version (the
            message names both and ``governed-memory db upgrade``).
    """
    from .._crypto import Keyring
    from .._postgres import (
        PgAuditStorage,
        PgKeyStorage,
        PgMemoryBackend,
        PgPurgeJournal,
        check_schema,
        pg_store_factory,
    )

    check_schema(db)
    storage = PgKeyStorage(db)
    keyring = None
    if gov.policy.encryption.enabled:
        ring = Keyring(None, gov.keyring.provider, storage=storage)
        keyring = lambda: ring  # noqa: E731
    return pg_end(
        db,
        PgMemoryBackend(db, pg_store_factory(db, keyring=keyring, clock=gov.clock)),
        keys=storage,
        audit=PgAuditStorage(db, audit_key) if audit_key is not None else None,
        journal=PgPurgeJournal(db),
    )
