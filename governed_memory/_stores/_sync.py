"""Folder fsyncs put off and done once per folder (an erasure changing many files in many folders).

A rename or an unlink is durable once its folder is fsynced. An operation
that replaces or deletes many files can fsync each new file before its
rename and leave the folders to one :class:`FolderSync` pass at its end,
before it reports success: one fsync per folder however many files changed
there, and after the first, the filesystem's journal holds little left to
commit. Until the flush a power cut may bring an old file back, so the
caller must not report the change complete before it.
"""

from __future__ import annotations

import os
from contextlib import suppress

from .._base import write_temp_at

__all__ = ["FolderSync", "replace_at", "sync_dir"]


class FolderSync:
    """Folder fsyncs put off to one pass: each folder once, however many files changed in it.

    An erasure replaces or deletes files in many folders; a rename is
    durable once its folder is fsynced. :meth:`add` keeps a descriptor of
    each folder (a duplicate, so the caller may close its own), and
    :meth:`flush` fsyncs each one: after the renames of many agents, the
    first fsync commits the filesystem's journal and the others find little
    left to do. Call :meth:`flush` before anything says the change is
    complete (a receipt); :meth:`close` flushes too. Not thread-safe.
    """

    LIMIT = 256
    """Folders kept open at most; the next :meth:`add` flushes them first."""

    def __init__(self) -> None:
        self._fds: dict[tuple[int, int], int] = {}

    def add(self, dir_fd: int) -> None:
        """Fsync the folder ``dir_fd`` at the next :meth:`flush` (once, whatever the count)."""
        st = os.fstat(dir_fd)
        key = (st.st_dev, st.st_ino)
        if key in self._fds:
            return
        if len(self._fds) >= self.LIMIT:
            self.flush()
        self._fds[key] = os.dup(dir_fd)

    def flush(self) -> None:
        """Fsync every folder added since the last flush (``OSError`` after trying each)."""
        fds, self._fds = list(self._fds.values()), {}
        failed: OSError | None = None
        for fd in fds:
            try:
                os.fsync(fd)
            except OSError as exc:
                failed = failed or exc
            finally:
                os.close(fd)
        if failed is not None:
            raise failed

    def close(self) -> None:
        self.flush()


def replace_at(dir_fd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in ``dir_fd`` by a new fsynced file holding ``data`` (folder not fsynced)."""
    tmp = write_temp_at(dir_fd, data)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def sync_dir(dir_fd: int, sync: FolderSync | None) -> None:
    if sync is None:
        os.fsync(dir_fd)
    else:
        sync.add(dir_fd)
