"""What the audit readers and writers need of a log: any AuditStorage of sealed entries.

``AuditTrail``, :func:`~._checkpoint.write_checkpoint` and the ``audit`` commands
take an :class:`AuditLogLike`, so the file log (``AuditLog``) and the database's
(``PgAuditStorage``) are interchangeable behind them.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._protocols import AuditStorage
from ._entry import AuditEntry

if TYPE_CHECKING:
    from .._base import Clock

__all__ = ["AuditLogLike"]


class AuditLogLike(AuditStorage, Protocol):
    """An :class:`~governed_memory._protocols.AuditStorage` whose records are :class:`AuditEntry`.

    Besides the storage seam: the time of its entries and an append whose
    attributes are made from the newest entry under the log's lock (what an
    ``audit.checkpoint`` signs).
    """

    @property
    def clock(self) -> Clock:
        """The time of the entries."""
        ...

    def append(
        self, event: str, attrs: Mapping[str, Any], *, at: _dt.datetime | None = None
    ) -> AuditEntry: ...

    def append_after(
        self, event: str, attrs_of: Callable[[AuditEntry | None], Mapping[str, Any]]
    ) -> AuditEntry:
        """Append one entry whose attributes ``attrs_of`` makes from the newest entry, locked."""
        ...

    def entries(self) -> Iterator[AuditEntry]: ...

    def tail(self, n: int) -> Sequence[AuditEntry]: ...

    def segment_entries(self, segment_id: str) -> Sequence[AuditEntry]: ...

    def repair(self) -> Sequence[AuditEntry]: ...
