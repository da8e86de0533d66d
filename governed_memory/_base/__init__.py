"""The bottom layer: time, durations, file operations, names, the workspace layout, locks.

Standard library only, except durations (pydantic types for policy fields), so
every name here is imported on first use: a default-mode Conversation must not
load pydantic through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._artefacts import (
        AUDIT_DIR,
        AUDIT_FILE_KINDS,
        EXPORTS_DIR,
        TOMBSTONES_DIR,
        ArtefactKind,
        FileKind,
        archive_kind,
        classify_agent_file,
        classify_archive,
    )
    from ._clock import Clock, FixedClock, SystemClock, iso_now
    from ._duration import Duration, OptionalDuration, format_duration, parse_duration
    from ._fsutil import (
        DIR_MODE,
        FILE_MODE,
        TMP_PREFIX,
        atomic_write,
        ensure_private_dir,
        fsync_dir,
        link_exclusive,
        open_private,
        remove_stale_temps,
        write_all,
    )
    from ._leader import LeaderLock
    from ._lock import FileLock, FolderLock, held_if_any
    from ._names import validate_agent_name
    from ._nofollow import (
        atomic_write_at,
        exists_at,
        link_exclusive_at,
        lstat_at,
        open_beneath,
        open_dir_at,
        open_file_at,
        open_read_at,
        read_at,
        remove_temps_at,
        write_temp_at,
    )
    from ._syncer import GroupSync
    from ._version import VERSION
    from ._workspace import (
        AGENTS_DIR,
        ARCHIVE_DIR,
        GOVERNANCE_DIR,
        MEMORY_FILE,
        memory_md_path,
        resolve_workspace,
    )

__all__ = [
    "AGENTS_DIR",
    "ARCHIVE_DIR",
    "AUDIT_DIR",
    "AUDIT_FILE_KINDS",
    "DIR_MODE",
    "EXPORTS_DIR",
    "FILE_MODE",
    "GOVERNANCE_DIR",
    "MEMORY_FILE",
    "TMP_PREFIX",
    "TOMBSTONES_DIR",
    "VERSION",
    "ArtefactKind",
    "Clock",
    "Duration",
    "FileKind",
    "FileLock",
    "FixedClock",
    "FolderLock",
    "GroupSync",
    "LeaderLock",
    "OptionalDuration",
    "SystemClock",
    "archive_kind",
    "atomic_write",
    "atomic_write_at",
    "classify_agent_file",
    "classify_archive",
    "ensure_private_dir",
    "exists_at",
    "format_duration",
    "fsync_dir",
    "held_if_any",
    "iso_now",
    "lazy_attributes",
    "link_exclusive",
    "link_exclusive_at",
    "lstat_at",
    "memory_md_path",
    "open_beneath",
    "open_dir_at",
    "open_file_at",
    "open_private",
    "open_read_at",
    "parse_duration",
    "read_at",
    "remove_stale_temps",
    "remove_temps_at",
    "resolve_workspace",
    "validate_agent_name",
    "write_all",
    "write_temp_at",
]

_LAZY: dict[str, str] = {
    "AGENTS_DIR": "._workspace",
    "ARCHIVE_DIR": "._workspace",
    "AUDIT_DIR": "._artefacts",
    "AUDIT_FILE_KINDS": "._artefacts",
    "ArtefactKind": "._artefacts",
    "Clock": "._clock",
    "DIR_MODE": "._fsutil",
    "Duration": "._duration",
    "EXPORTS_DIR": "._artefacts",
    "FILE_MODE": "._fsutil",
    "FileKind": "._artefacts",
    "FileLock": "._lock",
    "FixedClock": "._clock",
    "FolderLock": "._lock",
    "LeaderLock": "._leader",
    "GroupSync": "._syncer",
    "held_if_any": "._lock",
    "GOVERNANCE_DIR": "._workspace",
    "MEMORY_FILE": "._workspace",
    "OptionalDuration": "._duration",
    "SystemClock": "._clock",
    "TMP_PREFIX": "._fsutil",
    "TOMBSTONES_DIR": "._artefacts",
    "VERSION": "._version",
    "archive_kind": "._artefacts",
    "atomic_write": "._fsutil",
    "classify_agent_file": "._artefacts",
    "classify_archive": "._artefacts",
    "ensure_private_dir": "._fsutil",
    "format_duration": "._duration",
    "fsync_dir": "._fsutil",
    "iso_now": "._clock",
    "link_exclusive": "._fsutil",
    "memory_md_path": "._workspace",
    "open_private": "._fsutil",
    "parse_duration": "._duration",
    "remove_stale_temps": "._fsutil",
    "resolve_workspace": "._workspace",
    "validate_agent_name": "._names",
    "write_all": "._fsutil",
    "atomic_write_at": "._nofollow",
    "exists_at": "._nofollow",
    "link_exclusive_at": "._nofollow",
    "lstat_at": "._nofollow",
    "open_beneath": "._nofollow",
    "open_dir_at": "._nofollow",
    "open_file_at": "._nofollow",
    "open_read_at": "._nofollow",
    "read_at": "._nofollow",
    "remove_temps_at": "._nofollow",
    "write_temp_at": "._nofollow",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
