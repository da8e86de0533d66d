"""Errors of subject requests (export and erasure), re-exported for this package's interface.

``ErasureBlockedError`` (a legal hold covers the data) and
``ErasedDuringCompactionError`` (a summary was built from a subject erased
since) are defined, with every other error, in ``governed_memory._errors``,
whose docstring draws the tree.
"""

from __future__ import annotations

from .._errors import ErasedDuringCompactionError, ErasureBlockedError

__all__ = ["ErasedDuringCompactionError", "ErasureBlockedError"]
