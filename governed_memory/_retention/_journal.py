"""The purge journal: a plan written down before anything is deleted.

Layout, in ``<governance>/purge/`` (folder 0700, files 0600)::

    lock              flock: one purge at a time per workspace
    journal.jsonl     the plan being applied (format version 1)
    progress          one byte per journal entry done, in order
    receipts/<id>.json  one per finished purge: counts, bytes, policy; no paths

``journal.jsonl`` is a header line, one line per deletion and a footer line
with the totals. It is written to a temporary file, fsynced and renamed into
place, so it exists only complete. The executor then deletes entry by entry,
in journal order, and appends one outcome byte per entry to ``progress``
(``d`` deleted, ``g`` already gone, ``c`` changed since planned, ``h`` held,
``e`` failed). A purge killed at any point leaves the journal; the next purge
resumes it from the first entry without a byte, and re-checking each file
makes the entries in flight at the kill harmless (a file already deleted is
``g``). When the journal is done, a receipt is written and the journal and
progress are removed. Holding the plan on disk instead of in memory also
keeps a purge of millions of files in bounded memory.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import (
    TMP_PREFIX,
    ArtefactKind,
    ensure_private_dir,
    fsync_dir,
    open_private,
    write_all,
)
from .._errors import JournalError
from .._records import check_version
from ._plan import PlanItem, Rule

if TYPE_CHECKING:
    from .._protocols import PurgeJournal

__all__ = [
    "JOURNAL_FORMAT_VERSION",
    "Entry",
    "Journal",
    "JournalError",
    "JournalFolder",
    "write_journal",
]

JOURNAL_FORMAT_VERSION = 1
JOURNAL = "journal.jsonl"
PROGRESS = "progress"
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # built once
_DECODE = json.JSONDecoder().decode
_KINDS = {k.value: k for k in ArtefactKind}
_RULES = {r.value: r for r in Rule}
OUTCOMES = {b"d": "deleted", b"g": "gone", b"c": "changed", b"h": "held", b"e": "failed"}


@dataclass(frozen=True, slots=True)
class Entry:
    """One deletion, as journaled."""

    n: int
    kind: ArtefactKind
    path: str
    rule: Rule
    size: int
    agent: str | None
    ident: tuple[int, int]


class JournalFolder:
    """The plan and progress files in the purge folder: the file backend of :class:`PurgeJournal`.

    ``journal.jsonl`` (header, entries, footer: one JSON line each) is written
    to a temporary file, fsynced and renamed into place; ``progress`` takes
    outcome bytes by ``O_APPEND`` writes. Not safe on network filesystems.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / JOURNAL

    def write_plan(
        self,
        header: Mapping[str, Any],
        entries: Iterable[Sequence[Any]],
        footer: Callable[[], Mapping[str, Any]],
    ) -> bool:
        tmp: Path | None = None
        handle = None
        try:
            for entry in entries:
                if handle is None:
                    ensure_private_dir(self.folder)
                    tmp = self.folder / f"{TMP_PREFIX}journal"
                    handle = os.fdopen(
                        open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                        "w",
                        encoding="utf-8",
                    )
                    handle.write(json.dumps(header) + "\n")
                handle.write(_ENCODE(entry) + "\n")
            if handle is None:
                return False
            handle.write(json.dumps(footer()) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            handle = None
            assert tmp is not None
            os.replace(tmp, self.path)
            fsync_dir(self.folder)
            return True
        finally:
            if handle is not None:
                handle.close()
            if tmp is not None:
                tmp.unlink(missing_ok=True)

    def pending(self) -> bool:
        return self.path.exists()

    def first_and_last(self) -> tuple[Any, Any]:
        """The plan's first and last lines, parsed (any JSON value; checked by the caller).

        Raises:
            FileNotFoundError: there is no plan.
            JournalError: a line is not JSON.
        """
        with open(self.path, "rb") as handle:
            first = handle.readline()
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            handle.seek(max(0, end - 65536))
            last = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        try:
            return json.loads(first), json.loads(last)
        except ValueError as exc:
            raise JournalError(f"purge journal {self.path} is damaged ({exc})") from exc

    def read_header(self) -> dict[str, Any]:
        header = self.first_and_last()[0]
        if not isinstance(header, dict):
            raise JournalError(f"purge journal {self.path} has no header; it is damaged")
        return header

    def read_footer(self) -> dict[str, Any]:
        footer = self.first_and_last()[1]
        if not isinstance(footer, dict) or not isinstance(footer.get("end"), int):
            raise JournalError(f"purge journal {self.path} has no footer; it is damaged")
        return footer

    def read_entries(self) -> Iterator[list[Any]]:
        total = int(self.read_footer()["end"])
        with open(self.path, encoding="utf-8") as handle:
            handle.readline()
            for number, line in enumerate(handle):
                if number >= total:
                    return
                try:
                    entry = _DECODE(line)
                except ValueError as exc:
                    raise JournalError(
                        f"purge journal {self.path} line {number + 2} is damaged ({exc}); "
                        "remove the journal to discard the interrupted purge"
                    ) from exc
                if not isinstance(entry, list):
                    raise JournalError(f"purge journal {self.path} line {number + 2} is damaged")
                yield entry

    def record(self, outcomes: bytes) -> None:
        fd = open_private(self.folder / PROGRESS, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            write_all(fd, outcomes)
        finally:
            os.close(fd)

    def outcomes(self) -> bytes:
        try:
            return (self.folder / PROGRESS).read_bytes()
        except FileNotFoundError:
            return b""

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        (self.folder / PROGRESS).unlink(missing_ok=True)
        fsync_dir(self.folder)


def write_journal(
    folder: Path | PurgeJournal | None,
    header: dict[str, Any],
    items: Iterable[PlanItem],
    *,
    storage: PurgeJournal | None = None,
) -> dict[str, Any]:
    """Write the deletions of ``items`` as the journal; return its footer (the totals).

    ``folder`` is the file backend's purge folder, or a :class:`PurgeJournal`
    of another backend (a database's), which gets the same header and entries.

    Held items are counted in the footer, not journaled. When nothing is to
    be deleted (``footer["end"] == 0``) no file is written at all, so a purge
    that finds nothing leaves nothing behind. ``storage``: the journal's
    backend (None: ``JournalFolder(folder)``).
    """
    count = size = held_bytes = 0
    held: Counter[str] = Counter()
    deleting: Counter[str] = Counter()

    def lines() -> Iterator[list[Any]]:
        nonlocal count, size, held_bytes
        for item in items:
            a = item.artefact
            if item.held:
                held[item.rule.value] += 1
                held_bytes += a.size
                continue
            yield [count, a.kind, a.path, item.rule, a.size, a.agent, *a.ident]
            count += 1
            size += a.size
            deleting[item.rule.value] += 1

    def footer() -> dict[str, Any]:
        return {
            "end": count,
            "bytes": size,
            "rules": dict(deleting),
            "held": dict(held),
            "held_bytes": held_bytes,
        }

    if storage is None:
        if folder is None:
            raise ValueError("write_journal needs the purge folder or a storage= to write to")
        storage = JournalFolder(folder) if isinstance(folder, Path) else folder
    storage.write_plan({"v": JOURNAL_FORMAT_VERSION, **header}, lines(), footer)
    return footer()


class Journal:
    """A complete journal with its progress, read through a :class:`PurgeJournal`.

    Args:
        folder: the purge folder (the file backend, ``JournalFolder(folder)``);
            may be None when ``storage`` is given.
        storage: where the plan is kept (a database backend's
            :class:`PurgeJournal`); None: the files in ``folder``.

    Raises (on open):
        FormatVersionError: written by another format version (see ``check_version``).
        JournalError: not a journal (damaged).
        FileNotFoundError: there is no plan.
    """

    def __init__(self, folder: Path | None, *, storage: PurgeJournal | None = None) -> None:
        if storage is None:
            if folder is None:
                raise ValueError("a Journal needs its purge folder or a storage= to read")
            storage = JournalFolder(Path(folder))
        self.folder = Path(folder) if folder is not None else None
        self.storage: PurgeJournal = storage
        files = storage if isinstance(storage, JournalFolder) else None
        self._files = files
        self.path = files.path if files is not None else Path(repr(storage))  # names it in errors
        if files is not None:
            header, footer = files.first_and_last()
        else:
            header, footer = storage.read_header(), storage.read_footer()
        self.footer: dict[str, Any] = footer
        self.header: dict[str, Any] = check_version(
            header,
            JOURNAL_FORMAT_VERSION,
            f"purge journal {self.path}",
            fix="finish it with the release that wrote it, or remove it to discard that purge",
        )
        if not isinstance(self.footer, dict) or not isinstance(self.footer.get("end"), int):
            raise JournalError(f"purge journal {self.path} has no footer; it is damaged")

    @classmethod
    def find(cls, folder: Path | None, *, storage: PurgeJournal | None = None) -> Journal | None:
        """The unfinished journal in ``folder`` (or ``storage``), or None."""
        if storage is not None and not isinstance(storage, JournalFolder):
            return cls(folder, storage=storage) if storage.pending() else None
        if folder is None or not (Path(folder) / JOURNAL).exists():
            return None
        return cls(folder, storage=storage)

    @property
    def total(self) -> int:
        return int(self.footer["end"])

    def outcomes(self) -> bytes:
        """The outcome byte of every entry done so far, in order."""
        return self.storage.outcomes()

    def record(self, outcomes: bytes) -> None:
        """Append the outcome bytes of the next entries (durable per the storage)."""
        self.storage.record(outcomes)

    def entries(self) -> Iterator[Entry]:
        """Every entry, in order (streamed)."""
        if self._files is None:
            yield from self._entries(enumerate(self.storage.read_entries()))
            return
        with open(self._files.path, encoding="utf-8") as handle:
            handle.readline()
            yield from self._entries(enumerate(handle))

    def _entries(self, rows: Iterator[tuple[int, Any]]) -> Iterator[Entry]:
        for number, row in rows:
            if number >= self.total:
                return
            try:
                fields = _DECODE(row) if isinstance(row, str) else row
                n, kind, path, rule, size, agent, ino, mtime_ns = fields
                entry = Entry(n, _KINDS[kind], path, _RULES[rule], size, agent, (ino, mtime_ns))
            except (ValueError, TypeError, KeyError) as exc:
                raise JournalError(
                    f"purge journal {self.path} line {number + 2} is damaged ({exc}); "
                    "remove the journal to discard the interrupted purge"
                ) from exc
            if n != number:
                raise JournalError(f"purge journal {self.path} is out of order at entry {n}")
            yield entry

    def open_progress(self) -> int:
        """An append descriptor on the progress file (caller closes; the file backend only).

        Raises:
            JournalError: the journal is not kept in files (use :meth:`record`).
        """
        if self.folder is None or self._files is None:
            raise JournalError(
                f"purge journal {self.path} is not kept in files; record progress with "
                "Journal.record(outcomes)"
            )
        return open_private(self.folder / PROGRESS, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def remove(self) -> None:
        """Forget the journal once applied (journal first: progress alone means nothing)."""
        self.storage.remove()


def remove_stale_progress(folder: Path) -> None:
    """Drop a progress file left without its journal (crash between the two unlinks)."""
    if not (folder / JOURNAL).exists():
        (folder / PROGRESS).unlink(missing_ok=True)


if TYPE_CHECKING:
    _conforms: type[PurgeJournal] = JournalFolder  # the file backend of the purge journal seam
