"""Writing a newly generated master key to its own file (for the CLI's ``keys generate --out``).

A key file is created, never replaced: overwriting one would lose the key and
with it every data key it wraps. The file is 0600 whatever the umask, and its
bytes are fsynced (and the folder's entry with them) before the caller reports
it. The folder must exist already: the key belongs outside the workspace, in a
place the operator chose, so nothing here creates folders. A failure (missing
or unwritable folder, full disk) raises an error that names the path and the
fix, and leaves no file behind.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .._base import fsync_dir, open_private, write_all
from .._errors import ConfigurationError, StorageError

__all__ = ["write_key_file"]


def write_key_file(path: Path, key: str) -> None:
    """Create ``path`` holding ``key`` and a newline, mode 0600, durably.

    Args:
        path: the new file; its folder must exist and be writable.
        key: the key's text form (for a master key, base64 of 32 bytes).

    Raises:
        ConfigurationError: ``path`` exists already, or its folder is missing,
            not a folder, or not writable; the message says what to do.
        StorageError: writing failed (a full disk, an I/O error); no file is left.
    """
    folder = path.parent
    try:
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError as exc:
        raise ConfigurationError(
            f"{path} already exists; a key file is never overwritten (that would lose the "
            "key). Choose another path"
        ) from exc
    except FileNotFoundError as exc:
        raise ConfigurationError(
            f"cannot create the key file {path}: the folder {folder} does not exist; "
            f"create it first (mkdir -m 700 {folder}) or choose another path"
        ) from exc
    except NotADirectoryError as exc:
        raise ConfigurationError(
            f"cannot create the key file {path}: {folder} is not a folder; choose a path "
            "inside an existing folder"
        ) from exc
    except PermissionError as exc:
        raise ConfigurationError(
            f"cannot create the key file {path}: permission denied in the folder {folder}; "
            "choose a folder you can write to, or fix its permissions"
        ) from exc
    except OSError as exc:
        raise StorageError(
            f"cannot create the key file {path}: {exc.strerror or exc}; {_fix(exc)}"
        ) from exc
    try:
        try:
            write_all(fd, (key + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(folder)
    except BaseException as exc:
        # The file is ours (O_EXCL): a torn or unsynced key must not look usable.
        path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StorageError(
                f"could not write the key file {path}: {exc.strerror or exc}; no file was "
                f"kept; {_fix(exc)}, then generate the key again"
            ) from exc
        raise


def _fix(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space on that disk or choose a path on another one"
    if exc.errno == errno.EROFS:
        return "the disk is mounted read-only; choose a path on a writable disk"
    return "check the disk and the folder, or choose another path"
