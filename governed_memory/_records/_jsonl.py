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

Not safe on network filesystems with weak flock/append semantics (NFS, SMB).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Generic, TypeVar

from .._base import (
    FileLock,
    ensure_private_dir,
    fsync_dir,
    held_if_any,
    open_private,
    write_all,
)
from .._crypto import RecordSealing, open_record, seal_record
from .._errors import StorageError
from ._document import replace_file
from ._version import check_version

__all__ = ["JsonlLog", "encode_line"]

Record = TypeVar("Record")
_ENCODE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode
_TAIL = 256  # bytes kept to recognise the same file grown by appends
_CHUNK = 65536


def encode_line(record: Mapping[str, Any]) -> bytes:
    """The plaintext line of ``record`` (compact JSON, sorted keys, no newline)."""
    return _ENCODE(record).encode("utf-8")


class JsonlLog(Generic[Record]):
    """An append-only log of records, shared by every process on a workspace.

    Args:
        path: the log file.
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
    """

    def __init__(
        self,
        path: Path,
        *,
        load: Callable[[dict[str, Any], str], Record],
        what: str,
        lock: FileLock | None = None,
        version: int | None = None,
        sealing: RecordSealing | None = None,
        purpose: str = "",
        context: str = "",
    ) -> None:
        self.path = Path(path)
        self.what = what
        self.lock = lock
        self.version = version
        self.sealing = sealing
        self.purpose = purpose
        self.context = context or self.path.name
        self._load = load
        self._path_str = os.fspath(self.path)  # stat()ed on every gate check: no pathlib there
        self._mutex = threading.RLock()
        self._records: list[Record] = []
        self._offset = 0
        self._ident: tuple[int, int, int] | None = None
        self._tail = b""  # the last bytes read, to recognise the same file grown
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
            StorageError: the log cannot be read, or a complete line is damaged
                (the cache is then left as it was).
            FormatVersionError: a line of another format version.
            SealedRecordError: a sealed line, and no sealing (or key) to open it.
        """
        with self._mutex:
            self._refresh()
            return self._records

    def _refresh(self) -> None:
        try:
            st = os.stat(self._path_str)
        except FileNotFoundError:
            if self._ident is not None or self._offset:
                self._reset()
            return
        except OSError as exc:
            raise StorageError(f"cannot read {self.what} {self.path}: {exc}") from exc
        if (st.st_ino, st.st_size, st.st_mtime_ns) == self._ident:
            return
        try:
            with open(self._path_str, "rb") as handle:
                fst = os.fstat(handle.fileno())  # the file actually read, even if replaced since
                if not self._continues(handle, fst):
                    self._reset()  # replaced (a rewrite) or truncated: read it all
                handle.seek(self._offset)
                data = handle.read()
        except OSError as exc:
            raise StorageError(f"cannot read {self.what} {self.path}: {exc}") from exc
        complete = data[: data.rfind(b"\n") + 1]  # a torn last line stays invisible
        fresh = []  # parsed in full before the cache changes: a bad line leaves it as it was
        for number, raw in enumerate(complete.splitlines(), start=1):
            if raw.strip():
                where = f"{self.what} {self.path} (byte {self._offset}, line +{number})"
                fresh.append(self._load(self.parse(raw, where), where))
        self._records.extend(fresh)
        self._offset += len(complete)
        if complete:
            self._tail = (self._tail + complete)[-_TAIL:]
        self._ident = (fst.st_ino, fst.st_size, fst.st_mtime_ns)

    def _continues(self, handle: BinaryIO, fst: os.stat_result) -> bool:
        """Whether ``handle`` is the file already read, grown by appends only.

        Same inode and not shorter is not enough (a rewrite may reuse a freed
        inode number), so the last bytes read before must still be there.
        """
        if self._ident is None or fst.st_ino != self._ident[0] or fst.st_size < self._offset:
            return False
        handle.seek(self._offset - len(self._tail))
        return handle.read(len(self._tail)) == self._tail

    def _reset(self) -> None:
        self._records, self._offset, self._ident, self._tail = [], 0, None, b""
        self.generation += 1

    def parse(self, raw: bytes, where: str) -> dict[str, Any]:
        """The JSON object of one stored line (opened when sealed), version checked.

        Raises:
            StorageError: not a JSON object (damaged), or in the wrong form.
            FormatVersionError: another format version.
            SealedRecordError: sealed, and no sealing to open it.
        """
        plain = self.open(raw)
        try:
            data = json.loads(plain.decode("utf-8", errors="replace"))
        except ValueError as exc:
            raise StorageError(f"{where} is not a JSON record ({exc}); the log is damaged") from exc
        if self.version is not None:
            return check_version(data, self.version, where)
        if not isinstance(data, dict):
            raise StorageError(f"{where} is not a JSON object; the log is damaged")
        return data

    def open(self, raw: bytes) -> bytes:
        """The plaintext of one stored line (without its newline).

        Raises:
            SealedRecordError: the line is sealed and the log has no sealing.
            StorageError: the line is plaintext but the log seals, or damaged.
        """
        return open_record(raw, self.sealing, self.purpose, self.context, self.path)

    def stored_lines(self) -> list[bytes]:
        """The log's complete lines as stored (sealed or not), read now; [] when absent."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot read {self.what} {self.path}: {exc}") from exc
        return data[: data.rfind(b"\n") + 1].splitlines()

    # -- writing -------------------------------------------------------

    def locked(self) -> AbstractContextManager[None]:
        """Hold the writers' lock for a block (nothing when the owner serialises writers)."""
        return held_if_any(self.lock)

    def append(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (with ``"v"`` when versioned) durably: fsynced before returning.

        Raises:
            StorageError: the log could not be written; nothing was recorded.
        """
        body = {"v": self.version, **record} if self.version is not None else record
        line = seal_record(encode_line(body), self.sealing, self.purpose, self.context) + b"\n"
        try:
            with self._mutex, self.locked():
                ensure_private_dir(self.path.parent)
                created = not os.path.exists(self._path_str)
                fd = open_private(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
                try:
                    _repair_torn_tail(fd)
                    write_all(fd, line)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                if created:
                    fsync_dir(self.path.parent)
        except OSError as exc:
            raise StorageError(
                f"cannot append to {self.what} {self.path}: {exc}; the record was NOT written"
            ) from exc

    def create(self) -> None:
        """Create the log empty, durably, unless it exists (its presence can mean something)."""
        try:
            ensure_private_dir(self.path.parent)
            os.close(open_private(self.path, os.O_WRONLY | os.O_CREAT))
            fsync_dir(self.path.parent)
        except OSError as exc:
            raise StorageError(f"cannot create {self.what} {self.path}: {exc}") from exc

    def rewrite(self, convert: Callable[[bytes], bytes | None]) -> bool:
        """Rewrite every stored line through ``convert`` under the lock; whether the file changed.

        ``convert`` gets each complete non-blank line as stored (sealed or not)
        and returns its new stored form, or None to drop it; blank lines are
        kept and a torn last line is dropped, as a writer would. The file is
        replaced atomically (a crash leaves the old log or the new one); a
        missing log is left missing. An exception from ``convert`` changes
        nothing.
        """
        with self._mutex, self.locked():
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise StorageError(f"cannot read {self.what} {self.path}: {exc}") from exc
            kept = []
            for raw in data[: data.rfind(b"\n") + 1].splitlines():
                new = convert(raw) if raw.strip() else raw
                if new is not None:
                    kept.append(new)
            new_data = b"".join(line + b"\n" for line in kept)
            if new_data == data:
                return False
            replace_file(self.path, new_data, self.what)
            return True

    def delete(self) -> None:
        """Remove the log durably (nothing when it is absent)."""
        self.path.unlink(missing_ok=True)
        with suppress(FileNotFoundError):
            fsync_dir(self.path.parent)


def _repair_torn_tail(fd: int) -> None:
    """Cut a partial last line a crashed writer left (it was never acknowledged)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - _CHUNK)
    while True:
        chunk = os.pread(fd, size - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return
        if start == 0:
            os.ftruncate(fd, 0)
            return
        start = max(0, start - _CHUNK)


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import RecordLog

    _conforms: type[RecordLog] = JsonlLog
