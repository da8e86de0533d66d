"""Errors of subject requests (export and erasure), rooted at GovernedMemoryError::

GovernedMemoryError
├── ErasureBlockedError (PermissionError)   a legal hold covers the data
└── ErasedDuringCompactionError (RuntimeError)
                                            a summary was built from a subject
                                            erased since; re-summarise

ErasedDuringCompactionError is raised by ``Conversation.compact()``, a layer
below, so it is defined in ``governed_memory._errors`` and re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import ErasedDuringCompactionError, GovernedMemoryError
from .._records import Hold

__all__ = ["ErasedDuringCompactionError", "ErasureBlockedError"]


class ErasureBlockedError(GovernedMemoryError, PermissionError):
    """An erasure was refused because a legal hold applies; nothing was erased.

    Attributes:
        holds: the holds that block it (id, who placed it, why).
    """

    def __init__(self, scope: str, holds: Sequence[Hold]) -> None:
        self.holds = tuple(holds)
        described = "; ".join(
            f"hold {h.id!r} on {h.target} placed by {h.placed_by!r} on {h.placed_at} "
            f"because {h.reason!r}"
            for h in self.holds
        )
        super().__init__(
            f"erasure of {scope} refused: a legal hold applies ({described}). Nothing was "
            "erased. Ask the hold's owner to release it (governed-memory hold release), then "
            "run the erasure again"
        )
