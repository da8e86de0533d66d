"""An append-only JSON Lines log of records: the consent log, an erasure's progress.

Durability and concurrency:

* A writer holds the log's lock, cuts a torn last line a crashed writer may
  have left (it was never acknowledged), appends one complete line and
  fsyncs before returning (the folder too, when the append created the
  file). An acknowledged record survives a power cut, and a torn line never
  merges with the next one.
* Readers take no lock. They only consume complete lines (ending in
  ``\\n``), so a half-written line is invisible until it is complete, and a
  torn one until the next writer cuts it.
* :meth:`JsonlLog.read` first ``stat``s the log: unchanged (inode, size,
  mtime) means the cached records are current; a larger file of the same
  inode whose last bytes read are still in place is read from the last
  offset only; anything else (replaced, truncated, rewritten in place) is
  read again in full and counted in :attr:`JsonlLog.generation`.

Every line is one JSON object, written compact with sorted keys. With a
format ``version`` each carries it under ``"v"`` and a line of another
version is refused (:func:`check_version`); without one (an erasure's
progress) the lines' format is that of the record they belong to. Under
encryption at rest (``sealing`` given) each line is a sealed envelope (see
``_sealing``); everything above holds unchanged, line for line.

A *chained* log (``chained=True``, the consent log) numbers its records and
links each to the one before it (see ``_chain``): a reader refuses a line
replayed, moved or deleted from the middle with a :class:`StorageError`
naming the line, :meth:`JsonlLog.remove` leaves a removal note instead of
breaking the chain, and lines of the ``legacy`` version (written before the
chain) are read as an unchained prefix.

Not safe on network filesystems with weak flock/append semantics (NFS, SMB).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._crypto import RecordSealing, open_record, seal_record
from .._errors import DatabaseError, GovernedMemoryError, StorageError
from ._chain import Chain, Run, is_note, link_of, merge_runs
from ._placed import Placed
from ._version import check_version

if TYPE_CHECKING:
    from .._protocols import RecordLock, RecordPlace, WriteGuard

__all__ = ["JsonlLog", "encode_line"]

Record = TypeVar("Record")
_ENCODE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def encode_line(record: Mapping[str, Any]) -> bytes:
    """The plaintext line of ``record`` (compact JSON, sorted keys, no newline)."""
    return _ENCODE(record).encode("utf-8")


class JsonlLog(Placed, Generic[Record]):
    """An append-only log of records, shared by every process on a workspace.

    Args:
        path: the log file; or, with ``place``, the log's name in it.
        place: where the log lives (default: the file ``path``, in its folder).
        load: builds a record from one line's JSON object; ``where`` names
            the line for messages. Raises StorageError for a damaged one.
        what: how messages name the log, e.g. ``"consent log"``.
        lock: the lock every writer holds; None when the owner serialises
            writers itself (an erasure's progress, under the erasure's lock).
        version: the format version every line carries (None: no version).
        sealing: seal each line (encryption at rest); None keeps plaintext.
        purpose: the sealing purpose (``consent``, ``erasure``).
        context: what a sealed line is bound to: the log's path inside the
            governance folder (default: its name).
        chained: number and link the records (see ``_chain``); needs ``version``.
        legacy: the version of lines written before the chain, still read as
            an unchained prefix (None: none).
        repair: what a message about a broken chain tells the reader to do.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        load: Callable[[dict[str, Any], str], Record],
        what: str,
        place: RecordPlace | None = None,
        lock: RecordLock | None = None,
        version: int | None = None,
        sealing: RecordSealing | None = None,
        purpose: str = "",
        context: str = "",
        chained: bool = False,
        legacy: int | None = None,
        repair: str = "restore it from a backup",
    ) -> None:
        super().__init__(
            path,
            what=what,
            place=place,
            lock=lock,
            sealing=sealing,
            purpose=purpose,
            context=context,
        )
        self._where_path = Path(self.where)
        self.version = version
        self._load = load
        self.chained = chained
        self.legacy = legacy
        self.repair = repair
        self._chain = Chain()  # where the records read so far leave the chain
        self._lines = 0  # complete lines read so far (for messages)
        self._mutex = threading.RLock()
        self._records: list[Record] = []
        self._mark: Any = None
        self.generation = 0
        """Counts the times the log was found replaced and read again in full."""

    @property
    def per_line(self) -> bool:
        """True: each line is one record (see :class:`~._document.JsonDocument`)."""
        return True

    # -- reading -------------------------------------------------------

    def read(self) -> Sequence[Record]:
        """Every record, oldest first (the cached list: do not modify it).

        Raises:
            StorageError: the log cannot be read, a complete line is damaged, or
                (chained) a line breaks the chain (the cache is then left as it was).
            FormatVersionError: a line of another format version.
            SealedRecordError: a sealed line, and no sealing (or key) to open it.
        """
        with self._mutex:
            self._refresh()
            return self._records

    def cached(self) -> tuple[Sequence[Record], int, WriteGuard | None]:
        """What :meth:`read` last returned, without reading: the records, the
        :attr:`generation`, and a guard true while they are still all of the log.

        The guard is None before the first read, and in a place that cannot
        express one (the file place): call :meth:`read` then.
        """
        with self._mutex:
            mark = self._mark
            guard = None if mark is None else self.place.unchanged(self.name, mark)
            return self._records, self.generation, guard

    def _refresh(self) -> None:
        try:
            batch = self.place.read_lines(self.name, self._mark)
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read {self.what} {self.where}: {exc}") from exc
        if batch is None:
            return  # unchanged since the last read
        if batch.restarted:
            self._reset()  # replaced (a rewrite), truncated or removed: read it all
        if batch.mark is None:
            return  # absent
        fresh = []  # parsed in full before the cache changes: a bad line leaves it as it was
        decoded = []
        for number, raw in enumerate(batch.lines, start=1):
            if raw.strip():
                where = f"{self.what} {self.where} ({batch.at}, line +{number})"
                plain, doc = self.decode(raw, where)
                decoded.append((self._lines + number, plain, doc, where))
        chain = self._chain.copy()
        if self.chained:
            self._walk(chain, decoded)
        for _, _, doc, where in decoded:
            if not (self.chained and is_note(doc)):
                fresh.append(self._load(doc, where))
        self._records.extend(fresh)
        self._chain, self._lines = chain, self._lines + len(batch.lines)
        self._mark = batch.mark

    def _reset(self) -> None:
        self._records, self._mark = [], None
        self._chain, self._lines = Chain(), 0
        self.generation += 1

    def _walk(self, chain: Chain, decoded: list[tuple[int, bytes, dict[str, Any], str]]) -> None:
        """Advance ``chain`` over decoded lines (notes first: they may follow what they cover).

        Raises:
            StorageError: a line does not continue the chain (it names the line and the fix).
        """
        at = 0  # the line being checked, for the message
        try:
            for line in decoded:
                at = line[0]
                if is_note(line[2]):
                    chain.note(line[2])
            for at, plain, doc, _ in decoded:  # noqa: B007 (named in the message)
                if not is_note(doc):
                    chain.record(doc, plain, legacy=doc.get("v") != self.version)
            chain.skip_removed()
        except ValueError as exc:
            raise StorageError(
                f"{self.what} {self.where} line {at} breaks the chain of records: {exc}. "
                "The log was edited or partly restored; it is not read (a decision that "
                f"needs it fails) until it is repaired: {self.repair}"
            ) from None

    def parse(self, raw: bytes, where: str) -> dict[str, Any]:
        """The JSON object of one stored line (opened when sealed), version checked.

        Raises:
            StorageError: not a JSON object (damaged), or in the wrong form.
            FormatVersionError: another format version.
            SealedRecordError: sealed, and no sealing to open it.
        """
        return self.decode(raw, where)[1]

    def decode(self, raw: bytes, where: str) -> tuple[bytes, dict[str, Any]]:
        """The plaintext and JSON object of one stored line (see :meth:`parse`)."""
        plain = self.open(raw)
        try:
            data = json.loads(plain.decode("utf-8", errors="replace"))
        except ValueError as exc:
            raise StorageError(f"{where} is not a JSON record ({exc}); the log is damaged") from exc
        legacy = self.legacy is not None and isinstance(data, dict)
        if legacy and type(data.get("v")) is int and data["v"] == self.legacy:
            return plain, data  # the unchained prefix: the chain decides if it may be here
        if self.version is not None:
            return plain, check_version(data, self.version, where, also=self.legacy)
        if not isinstance(data, dict):
            raise StorageError(f"{where} is not a JSON object; the log is damaged")
        return plain, data

    def open(self, raw: bytes) -> bytes:
        """The plaintext of one stored line (without its newline).

        Raises:
            SealedRecordError: the line is sealed and the log has no sealing.
            StorageError: the line is plaintext but the log seals, or damaged.
        """
        return open_record(raw, self.sealing, self.purpose, self.context, self._where_path)

    def stored_lines(self) -> list[bytes]:
        """The log's complete lines as stored (sealed or not), read now; [] when absent."""
        return self._stored() or []

    def _stored(self) -> list[bytes] | None:
        """The log's complete lines as stored, read now; None when the log is absent."""
        try:
            return self.place.stored_lines(self.name, under=self._under())
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read {self.what} {self.where}: {exc}") from exc

    # -- writing -------------------------------------------------------

    def append(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (with ``"v"`` when versioned) durably: fsynced before returning.

        Raises:
            StorageError: the log could not be written; nothing was recorded.
        """
        self._write([record])

    def extend(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append ``records`` durably with one write and one fsync (a chained log: one at most).

        A crash may leave the first lines and a torn one; a torn line is cut
        by the next writer and never read as a record.

        Raises:
            StorageError: the log could not be written; what was not fsynced may be lost.
        """
        if self.chained and len(records) > 1:
            raise StorageError(f"{self.what} {self.where} is chained: append one record at a time")
        if records:
            self._write(records)

    def _write(self, records: Sequence[Mapping[str, Any]]) -> None:
        bodies = [{"v": self.version, **r} if self.version is not None else r for r in records]

        def make(back: Callable[[], Iterator[bytes]]) -> list[bytes]:
            chosen = bodies
            if self.chained:  # under the lock: no other writer takes the same number
                chosen = [{**bodies[0], **self._end_of_chain(back).next_fields()}]
            return [
                seal_record(encode_line(body), self.sealing, self.purpose, self.context)
                for body in chosen
            ]

        try:
            with self._mutex, self.locked():
                self.place.append_lines(self.name, make, under=self._under())
        except DatabaseError:
            raise
        except OSError as exc:
            raise StorageError(
                f"cannot append to {self.what} {self.where}: {exc}; the record was NOT written"
            ) from exc

    def _end_of_chain(self, back: Callable[[], Iterator[bytes]]) -> Chain:
        """Where the log's chain ends: the last chained record, and the runs removed after it.

        Reads back from the end to the last chained record (one line, as a
        rule); a log still holding only unchained lines is walked in full.
        """
        notes: list[dict[str, Any]] = []
        number = 0
        for raw in back():
            if not raw.strip():
                continue
            number += 1
            plain, doc = self._decode_for_append(raw, f"line {number} from the end")
            if is_note(doc):
                notes.append(doc)
                continue
            if doc.get("v") != self.version:
                break  # an unchained record: the chain so far is the walk of all lines
            chain = Chain(int(doc["seq"]), link_of(plain), chained=True)
            for note in notes:
                chain.note(note)
            return chain
        chain = Chain()
        decoded = []
        for number, raw in enumerate(reversed(list(back())), start=1):
            if raw.strip():
                plain, doc = self._decode_for_append(raw, f"line {number}")
                decoded.append((number, plain, doc, ""))
        self._walk(chain, decoded)
        return chain

    def _decode_for_append(self, raw: bytes, line: str) -> tuple[bytes, dict[str, Any]]:
        where = f"{self.what} {self.where} ({line})"
        try:
            plain, doc = self.decode(raw, where)
            if not is_note(doc) and doc.get("v") == self.version:
                int(doc["seq"])
        except (GovernedMemoryError, KeyError, TypeError, ValueError) as exc:
            raise StorageError(
                f"{where} cannot be read ({exc}), so a new record cannot be chained to it; the "
                f"record was NOT written. Repair the log first: {self.repair}"
            ) from exc
        return plain, doc

    def remove(self, drop: Callable[[bytes], bool]) -> bool:
        """Remove every stored line ``drop`` says yes to, in one rewrite; whether it changed.

        A chained log keeps every other line's bytes and ends with one removal
        note listing every run of removed records (see ``_chain``), so the
        chain still reads. A line that cannot be read is never offered to
        ``drop`` (it is kept); an exception from ``drop`` changes nothing.
        """
        if not self.chained:
            return self.rewrite(lambda raw: None if drop(raw) else raw)
        with self._mutex, self.locked():
            lines = self._stored()
            if lines is None:
                return False
            kept: list[bytes] = []
            old = Chain()  # the old notes' runs, and the walk of the unchained prefix
            found = []
            for number, raw in enumerate(lines, start=1):
                doc: dict[str, Any] | None = None
                plain = b""
                if raw.strip():
                    try:
                        plain, doc = self.decode(raw, f"{self.what} {self.where} (line {number})")
                    except (GovernedMemoryError, ValueError):
                        doc = None  # unreadable: kept as it is
                    if doc is not None and is_note(doc):
                        try:
                            old.note(doc)
                        except ValueError as exc:
                            raise StorageError(
                                f"{self.what} {self.where} line {number}: {exc}; nothing was "
                                f"removed. {self.repair}"
                            ) from None
                        continue
                found.append((raw, plain, doc))
            runs = list(old.runs.values())
            prefix = Chain(runs=dict(old.runs))  # the unchained prefix is walked to link it
            for raw, plain, doc in found:
                if doc is None or not drop(raw):
                    if doc is None:
                        prefix.chained = True  # no unchained link can be computed past it
                    elif doc.get("v") != self.version and not prefix.chained:
                        prefix.record(doc, plain, legacy=True)
                    kept.append(raw)
                    continue
                if doc.get("v") == self.version:
                    seq, link = doc.get("seq"), link_of(plain)
                    if type(seq) is not int:
                        raise StorageError(
                            f"{self.what} {self.where}: a record without its sequence number "
                            f"cannot be removed; nothing was removed. {self.repair}"
                        )
                else:
                    if prefix.chained:
                        raise StorageError(
                            f"{self.what} {self.where}: an unchained record after an unreadable "
                            f"line cannot be removed; nothing was removed. {self.repair}"
                        )
                    prefix.record(doc, plain, legacy=True)
                    seq, link = prefix.seq, prefix.link
                runs.append(Run(seq, seq, link))
            if runs:
                note = {"v": self.version, "removed": [r.as_json() for r in merge_runs(runs)]}
                kept.append(
                    seal_record(encode_line(note), self.sealing, self.purpose, self.context)
                )
            return self._replace(kept)

    def _replace(self, lines: list[bytes]) -> bool:
        try:
            return self.place.replace_lines(self.name, lines, under=self._under())
        except DatabaseError:
            raise
        except OSError as exc:
            raise StorageError(
                f"cannot rewrite {self.what} {self.where}: {exc}; it keeps its previous form"
            ) from exc

    def create(self) -> None:
        """Create the log empty, durably, unless it exists (its presence can mean something)."""
        try:
            self.place.create_lines(self.name)
        except DatabaseError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot create {self.what} {self.where}: {exc}") from exc

    def rewrite(self, convert: Callable[[bytes], bytes | None]) -> bool:
        """Rewrite every stored line through ``convert`` under the lock; whether the log changed.

        ``convert`` gets each complete non-blank line as stored (sealed or not)
        and returns its new stored form, or None to drop it; blank lines are
        kept and a torn last line is dropped, as a writer would. The log is
        replaced atomically (a crash leaves the old log or the new one); a
        missing log is left missing. An exception from ``convert`` changes
        nothing.
        """
        with self._mutex, self.locked():
            lines = self._stored()
            if lines is None:
                return False
            kept = []
            for raw in lines:
                new = convert(raw) if raw.strip() else raw
                if new is not None:
                    kept.append(new)
            return self._replace(kept)

    def delete(self) -> None:
        """Remove the log durably (nothing when it is absent)."""
        self.place.delete_lines(self.name)


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import RecordLog

    _conforms: type[RecordLog] = JsonlLog
