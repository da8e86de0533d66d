"""Reading the audit log for reviewers (for the CLI's ``audit`` commands).

``audit_log_exists`` tells a folder holding a log from an empty or mistyped
one; ``export_since`` reads the first time to export from an ISO date/time or
an age (``30d``, the policy's duration grammar); ``export_lines`` gives the
entries since that time as JSON Lines, exactly as recorded (unverified:
``verify_log`` checks them); ``write_export`` writes those lines to a file,
0600 and atomically, so a failure leaves the previous file (or none) and no
temporary file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .._base import atomic_write, ensure_private_dir, parse_duration
from .._errors import ConfigurationError, StorageError
from ._log import HEAD_FILE, iter_entries, list_segments

if TYPE_CHECKING:
    from .._protocols import AuditStorage

__all__ = ["audit_log_exists", "export_lines", "export_since", "write_export"]


def audit_log_exists(folder: Path) -> bool:
    """Whether ``folder`` holds an audit log (a segment or the head file)."""
    return bool(list_segments(folder)) or (folder / HEAD_FILE).exists()


def export_since(text: str, now: _dt.datetime) -> _dt.datetime:
    """The time ``text`` names: an ISO date/time (UTC unless offset), or ``now`` minus an age.

    Raises:
        ConfigurationError: ``text`` is neither; the message shows both forms.
    """
    try:
        when = _dt.datetime.fromisoformat(text)
    except ValueError:
        try:
            age = parse_duration(text)
        except ValueError:
            age = None
        if age is None:
            raise ConfigurationError(
                f"{text!r} is neither an ISO date/time (2026-11-01, 2026-11-01T08:00:00Z) nor an "
                "age such as 7d or 12h"
            ) from None
        return now - age
    return when if when.tzinfo is not None else when.replace(tzinfo=_dt.UTC)


def export_lines(folder: Path | AuditStorage, since: _dt.datetime) -> list[str]:
    """The entries of the log in ``folder`` (or an AuditStorage) at or after ``since``, one JSON line each.

    Each line is the entry's dictionary with sorted keys, ending in a newline.
    """
    entries = iter_entries(folder) if isinstance(folder, Path) else folder.entries()
    lines = []
    for entry in entries:
        body = entry.to_dict()
        if _time(str(body["ts"])) >= since:
            lines.append(json.dumps(body, sort_keys=True, ensure_ascii=False) + "\n")
    return lines


def _time(ts: str) -> _dt.datetime:
    return _dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.UTC)


def write_export(path: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` to ``path`` (0600, atomically; a missing folder is created 0700).

    An existing file is replaced: an export is a copy of entries that stay in
    the log, so the newest one wins.

    Raises:
        StorageError: the folder cannot be created or written, or the disk is
            full; the message names the path and the fix. The previous file
            (if any) is intact, and folders this call created are removed again.
    """
    data = "".join(lines).encode("utf-8")
    folder = path.parent
    created = _missing_folders(folder)
    try:
        ensure_private_dir(folder)
        atomic_write(path, data)
    except OSError as exc:
        for made in created:  # innermost first; only the empty ones we made
            with contextlib.suppress(OSError):
                made.rmdir()
        raise StorageError(
            f"could not write the audit export {path}: {exc.strerror or exc}; {_fix(exc, folder)}"
        ) from exc


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its missing parents, innermost first."""
    missing: list[Path] = []
    probe = folder
    while not probe.exists() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    return missing


def _fix(exc: OSError, folder: Path) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"choose a folder you can write to, or fix the permissions of {folder}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space on that disk or choose a path on another one"
    if exc.errno == errno.ENOTDIR:
        return f"{folder} is not a folder; choose a path inside a folder"
    if exc.errno == errno.EROFS:
        return "the disk is mounted read-only; choose a path on a writable disk"
    return "check the disk and the folder, or choose another path"
