"""The kinds of files a workspace holds, described once for every module that walks it.

Retention, erasure and export all need to answer "what is this file?". The
answer lives here, as data: a small table of :class:`FileKind` entries per
place in the workspace, so a new store format (the encrypted store's
``MEMORY.md.gmenc``, ``history_<ts>.gmenc``) is one more row, not a change to
every scanner::

    <workspace>/agents/<agent>/MEMORY.md[.gmenc]                 memory
    <workspace>/agents/<agent>/archive/history_<ts>[_NNNNNN].md   archive
    <workspace>/agents/<agent>/archive/history_<ts>[_NNNNNN].gmenc
    <governance>/exports/<entry>                                  export (file or folder)
    <governance>/tombstones/<entry>                               tombstone
    <governance>/consent.jsonl                                    consent (one record per line)
    <audit dir>/audit-<period>.jsonl                              audit (whole segments)

``<ts>`` is ``%Y-%m-%d_%H-%M-%S`` in naive local time, as the reference names
archives. Names starting with ``.`` (temporary files ``.gm-tmp-*``, trash)
are never artefacts.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "AGENT_FILE_KINDS",
    "ARCHIVE_FILE_KINDS",
    "ARCHIVE_STAMP",
    "AUDIT_DIR",
    "AUDIT_FILE_KINDS",
    "EXPORTS_DIR",
    "TOMBSTONES_DIR",
    "ArtefactKind",
    "FileKind",
    "archive_kind",
    "classify_agent_file",
    "classify_archive",
    "is_hidden",
]

ARCHIVE_STAMP = "%Y-%m-%d_%H-%M-%S"
EXPORTS_DIR = "exports"
TOMBSTONES_DIR = "tombstones"
AUDIT_DIR = "audit"

_STAMP = r"(?P<stamp>\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2})(?:_\d{6})?"


class ArtefactKind(StrEnum):
    """What a retention rule can apply to."""

    MEMORY = "memory"
    ARCHIVE = "archive"
    EXPORT = "export"
    AUDIT = "audit"
    CONSENT = "consent"
    TOMBSTONE = "tombstone"


@dataclass(frozen=True)
class FileKind:
    """One way a file of a given kind is named.

    Args:
        kind: the artefact kind.
        pattern: matched against the whole file name; a ``stamp`` group, when
            present, holds the time the file was written.
        encrypted: whether the content is ciphertext (its records' subjects
            cannot be read without the key provider).
    """

    kind: ArtefactKind
    pattern: str
    encrypted: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Compiled once: scans match every file name of a workspace.
        object.__setattr__(self, "regex", re.compile(self.pattern))

    def match(self, name: str) -> re.Match[str] | None:
        return self.regex.fullmatch(name)


AGENT_FILE_KINDS: tuple[FileKind, ...] = (
    FileKind(ArtefactKind.MEMORY, r"MEMORY\.md"),
    FileKind(ArtefactKind.MEMORY, r"MEMORY\.md\.gmenc", encrypted=True),
)
"""Files directly in an agent folder."""

ARCHIVE_FILE_KINDS: tuple[FileKind, ...] = (
    FileKind(ArtefactKind.ARCHIVE, r"history_" + _STAMP + r"\.md"),
    FileKind(ArtefactKind.ARCHIVE, r"history_" + _STAMP + r"(?:\.md)?\.gmenc", encrypted=True),
)
"""Files in an agent's ``archive/`` folder."""


AUDIT_FILE_KINDS: tuple[FileKind, ...] = (FileKind(ArtefactKind.AUDIT, r"audit-.+\.jsonl"),)
"""Segments of the hash-chained audit log in the audit folder (``audit-<period>.jsonl``)."""


def is_hidden(name: str) -> bool:
    """Temporary files, trash and dotfiles are never artefacts."""
    return name.startswith(".")


def classify_agent_file(name: str) -> FileKind | None:
    """The kind of a file directly inside an agent folder, or None."""
    if is_hidden(name):
        return None
    for kind in AGENT_FILE_KINDS:
        if kind.match(name):
            return kind
    return None


def classify_archive(name: str) -> tuple[FileKind, _dt.datetime | None] | None:
    """The kind of a file in ``archive/`` and the time in its name, or None.

    The time is None when the name's digits are not a real date (a file
    renamed by hand); callers then fall back to the file's mtime.
    """
    kind = archive_kind(name)
    if kind is None:
        return None
    return kind, _stamp_time(name[len("history_") : len("history_") + 19])


def archive_kind(name: str) -> FileKind | None:
    """The kind of a file in ``archive/`` (without reading the time in its name), or None."""
    if not name.startswith("history_"):
        return None  # also every hidden name: the common case costs one comparison
    for kind in ARCHIVE_FILE_KINDS:
        if kind.regex.fullmatch(name):
            return kind
    return None


def _stamp_time(stamp: str) -> _dt.datetime | None:
    # By hand: strptime costs ~10x more and scans run over every archive.
    try:
        return _dt.datetime(
            int(stamp[0:4]),
            int(stamp[5:7]),
            int(stamp[8:10]),
            int(stamp[11:13]),
            int(stamp[14:16]),
            int(stamp[17:19]),
        )
    except ValueError:
        return None
