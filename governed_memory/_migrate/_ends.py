"""The two ends of a migration: every persistent part of one workspace, through the storage seam.

A :class:`StorageEnd` bundles what :func:`~._copy.migrate_storage` reads from a
source and writes into a destination: the agents' memory, the record place
and the names it holds, the wrapped keys, the audit chain and the purge
journal. :func:`file_end` opens a workspace folder, :func:`pg_end` a database;
both take the already-built keyring, stores and audit storage, so this module
reads no settings and holds no key.

Listing every record name is the one thing the seam does not offer (a
``RecordPlace`` lists one folder by suffix): the folder end walks the
governance folder, the database end reads the two record tables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import TMP_PREFIX
from .._records import FolderPlace

if TYPE_CHECKING:
    from .._protocols import (
        AuditStorage,
        MemoryBackend,
        PurgeJournal,
        RecordPlace,
        WrappedKeyStorage,
    )

__all__ = ["MARKER", "RecordNames", "StorageEnd", "file_end", "folder_record_names", "pg_end"]

MARKER = ".gm-migration.json"
"""The destination's progress document (in its record place): what is being copied from where."""

WORKSPACE_ID = "audit-workspace-id"
"""The workspace id the audit anchors name (``_audit._binding``): copied as a document."""

_NOT_RECORDS = ("purge/journal.jsonl",)  # the purge journal moves through PurgeJournal, not copied


@dataclass(frozen=True)
class RecordNames:
    """The logs and documents a record place holds, sorted (the migration marker left out)."""

    logs: list[str]
    documents: list[str]


@dataclass(frozen=True)
class StorageEnd:
    """One side of a migration: a workspace folder or a database, as the storage seam sees it.

    Args:
        describe: names the end in messages and in the destination's marker
            (``workspace /srv/ws``, ``PostgreSQL host:5432/db``).
        memory: lists and opens the agents; its stores must have
            ``partition_store`` and, for a destination, ``import_archive``.
        place: the record place (consent, holds, tombstones, receipts, requests).
        record_names: lists every log and document ``place`` holds.
        keys: the keyring's wrapped-key storage (None: the workspace has no keyring).
        audit: the audit chain (None: no audit log); a destination's has ``import_entry``.
        journal: the purge journal, checked for a pending plan (None: none kept).
    """

    describe: str
    memory: MemoryBackend
    place: RecordPlace
    record_names: Callable[[], RecordNames]
    keys: WrappedKeyStorage | None = None
    audit: AuditStorage | None = None
    journal: PurgeJournal | None = None


def folder_record_names(folder: Path, *, skip: tuple[str, ...] = ()) -> RecordNames:
    """Every record in the governance ``folder``: ``*.jsonl`` logs, ``*.json`` documents.

    Temporary files, lock files and the folders ``skip`` names (the keyring, the
    audit log) are not records; the purge journal is not copied.
    """
    logs: list[str] = []
    documents: list[str] = []
    if not folder.is_dir():
        return RecordNames(logs, documents)
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if (
            not path.is_file()
            or path.is_symlink()
            or path.name.startswith(TMP_PREFIX)
            or name == MARKER
            or name in _NOT_RECORDS
            or any(name == s or name.startswith(f"{s}/") for s in skip)
        ):
            continue
        if name.endswith(".jsonl"):
            logs.append(name)
        elif name.endswith(".json") or name == WORKSPACE_ID:
            documents.append(name)
    return RecordNames(logs, documents)


def file_end(
    workspace: Path,
    memory: MemoryBackend,
    *,
    keys: WrappedKeyStorage | None = None,
    audit: AuditStorage | None = None,
    audit_folder: Path | None = None,
    journal: PurgeJournal | None = None,
) -> StorageEnd:
    """The end of a workspace folder (its governance folder is ``<workspace>/.governed_memory``).

    ``audit_folder`` is where ``audit`` keeps its segments, left out of the records.
    """
    from .._base import GOVERNANCE_DIR

    folder = Path(workspace) / GOVERNANCE_DIR
    skip = ["keyring"]
    if audit_folder is not None:
        # Kept outside the governance folder: nothing to leave out.
        with contextlib.suppress(ValueError):
            skip.append(Path(audit_folder).relative_to(folder).as_posix())
    return StorageEnd(
        describe=f"workspace {Path(workspace).resolve()}",
        memory=memory,
        place=FolderPlace(folder),
        record_names=lambda: folder_record_names(folder, skip=tuple(skip)),
        keys=keys,
        audit=audit,
        journal=journal,
    )


def pg_end(
    db: Any,
    memory: MemoryBackend,
    *,
    keys: WrappedKeyStorage | None = None,
    audit: AuditStorage | None = None,
    journal: PurgeJournal | None = None,
) -> StorageEnd:
    """The end of a PostgreSQL database ``db`` (a ``_postgres.Database``, schema upgraded)."""
    from .._postgres import PgPlace

    place = PgPlace(db)

    def names() -> RecordNames:
        with db.transaction("listing the records") as conn:
            logs = conn.execute(
                "SELECT name FROM governed_memory.record_logs WHERE present ORDER BY name"
            ).fetchall()
            documents = conn.execute(
                "SELECT name FROM governed_memory.record_documents ORDER BY name"
            ).fetchall()
        return RecordNames(
            sorted(str(r[0]) for r in logs), sorted(str(r[0]) for r in documents if r[0] != MARKER)
        )

    return StorageEnd(
        describe=f"PostgreSQL {db.where}",
        memory=memory,
        place=place,
        record_names=names,
        keys=keys,
        audit=audit,
        journal=journal,
    )
