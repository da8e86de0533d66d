"""A counter every process on the host sees change at once, for the cost of a memory read.

The keyring bumps it whenever a current data key changes (a shredding, a new
generation, a re-wrap), after the entry file is replaced. A writer remembers
the current keys together with the counter; before each add it compares the
counter, which costs no system call because the file is mapped shared into
memory. It is not fsynced: it only orders changes between live processes.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from pathlib import Path

from .._base import FILE_MODE, ensure_private_dir

__all__ = ["ChangeCounter"]

_U64 = struct.Struct(">Q")
_unpack_from = _U64.unpack_from


class ChangeCounter:
    """An 8-byte counter in ``path``, mapped shared (created on first use).

    Never replace or truncate the file while processes run: they keep their
    mapping of it. Restart processes after restoring a keyring from a backup.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._view: mmap.mmap | None = None
        self._lock = threading.Lock()

    def _map(self) -> mmap.mmap:
        with self._lock:
            if self._view is None:
                ensure_private_dir(self.path.parent)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
                try:
                    if os.fstat(fd).st_size < _U64.size:
                        os.ftruncate(fd, _U64.size)  # only ever grows: creators may race
                    self._view = mmap.mmap(fd, _U64.size, mmap.MAP_SHARED)
                finally:
                    os.close(fd)  # the mapping stays valid
            return self._view

    def read(self) -> int:
        view = self._view
        if view is None:
            view = self._map()
        value: int = _unpack_from(view)[0]
        return value

    def bump(self) -> None:
        """Advance the counter (the caller serialises writers, e.g. with the keyring lock)."""
        view = self._view if self._view is not None else self._map()
        _U64.pack_into(view, 0, (_U64.unpack_from(view)[0] + 1) % (1 << 64))
