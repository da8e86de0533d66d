"""The one format-version check of every governance record.

Every persisted record carries its format version under ``"v"``. A reader
meeting another version refuses it with a :class:`FormatVersionError` that
names the file, both versions and the likely cause: a higher number was
written by a newer governed_memory (upgrade); anything else was never written
by any release (the file is corrupted or was edited).
"""

from __future__ import annotations

from typing import Any

from .._errors import FormatVersionError

__all__ = ["check_version"]


def check_version(
    document: object,
    expected: int,
    where: str,
    *,
    fix: str | None = None,
    also: int | None = None,
) -> dict[str, Any]:
    """Return ``document`` if it is a JSON object of format version ``expected``.

    Args:
        document: the parsed record.
        expected: the version this release reads.
        where: names the file (and the line) in the message, e.g.
            ``"legal holds file /w/.governed_memory/holds.json"``.
        fix: what to do about a newer version, when upgrading is not the
            only way (a purge journal can also be discarded).
        also: an older version the caller reads itself (named in the message only).

    Raises:
        FormatVersionError: another version, or no version at all.
    """
    found = document.get("v") if isinstance(document, dict) else None
    if type(found) is int and found == expected:  # True == 1, but True is no version
        assert isinstance(document, dict)
        return document
    if type(found) is int and found > expected:
        cause = f"It was probably written by a newer governed_memory: {fix or 'upgrade this installation'}"
    else:
        cause = (
            "No release writes that version: the file is corrupted or was edited; restore "
            "it from a backup"
        )
    reads = f"version {expected}" + (f" (and version {also})" if also is not None else "")
    raise FormatVersionError(
        f"{where} has format version {found!r}; this release reads {reads}. {cause}"
    )
