"""Moving a workspace between storage backends: files to PostgreSQL and back (operations layer).

:func:`migrate_storage` copies every persistent part of one :class:`StorageEnd`
into another, resumable after a kill and verified item by item;
:func:`file_end` and :func:`pg_end` open the two kinds of end. The command
``governed-memory migrate-storage`` (``_cli/_migrate.py``) builds them from the
settings.
"""

from __future__ import annotations

from ._copy import MigrationReport, Progress, migrate_storage, verify_copy
from ._ends import MARKER, RecordNames, StorageEnd, file_end, folder_record_names, pg_end
from ._open import database_end, workspace_end

__all__ = [
    "MARKER",
    "MigrationReport",
    "Progress",
    "RecordNames",
    "StorageEnd",
    "database_end",
    "file_end",
    "folder_record_names",
    "migrate_storage",
    "pg_end",
    "verify_copy",
    "workspace_end",
]
