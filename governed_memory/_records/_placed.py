"""What a record document and a record log share: a name in a place, its lock, its sealing.

:class:`Placed` is the preamble of :class:`~._document.JsonDocument` and
:class:`~._jsonl.JsonlLog`: it resolves a file path into the file place (or
takes a name in a given place), keeps how messages name it, holds the
writers' lock for a block and hands the lock's token to the place calls made
under it (a database place runs them in the lock's transaction). The codecs
above it decide every byte.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import StorageError
from ._place import FolderPlace

if TYPE_CHECKING:
    from .._crypto import RecordSealing
    from .._protocols import RecordLock, RecordPlace

__all__ = ["Placed"]


class Placed:
    """A record kept under one name of a place, written under one lock, sealed or not.

    Args:
        path: the file; or, with ``place``, the record's name in it.
        what: how messages name it, e.g. ``"consent log"``.
        place: where it lives (default: the file ``path``, in its folder).
        lock: the lock every writer holds; None when the owner serialises
            writers itself (an erasure's files, under the erasure's lock).
        sealing: seal it (encryption at rest); None keeps it plaintext.
        purpose: the sealing purpose (``consent``, ``holds``, ``erasure``).
        context: what a sealed record is bound to: its path inside the
            governance folder (default: its name).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        what: str,
        place: RecordPlace | None,
        lock: RecordLock | None,
        sealing: RecordSealing | None,
        purpose: str,
        context: str,
    ) -> None:
        if place is None:
            path = Path(path)
            place, path = FolderPlace(path.parent), path.name
        self.place: RecordPlace = place
        self.name = str(path)
        self.where = place.describe(self.name)
        """How messages name it (the file place: its path)."""
        self.what = what
        self.lock = lock
        self.sealing = sealing
        self.purpose = purpose
        self.context = context or Path(self.name).name
        self._local = threading.local()  # .under: the token of this thread's held lock

    @property
    def path(self) -> Path:
        """The file (the file place only; messages use :attr:`where`)."""
        if not isinstance(self.place, FolderPlace):
            raise StorageError(f"{self.what} {self.where} is not kept in a file")
        return self.place.path(self.name)

    def locked(self) -> AbstractContextManager[None]:
        """Hold the writers' lock for a block (nothing when the owner serialises writers)."""
        return self._held()

    @contextmanager
    def _held(self) -> Iterator[None]:
        if self.lock is None:
            yield
            return
        with self.lock.held() as token:
            self._local.under = token  # this record's calls in the block run under the lock
            try:
                yield
            finally:
                self._local.under = None

    def _under(self) -> Any:
        return getattr(self._local, "under", None)
