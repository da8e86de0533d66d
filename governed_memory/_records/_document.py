"""One JSON document replaced atomically: legal holds, erasure records, scheduler state.

A writer replaces the whole file (temporary file, fsync, rename, folder
fsync) under the document's lock, so concurrent writers never lose an update
and a crash leaves the old document or the new one. Readers take no lock
and parse the file again only when its ``stat`` (inode, size, mtime)
changed. The document carries its format version under ``"v"``, checked on
every read (:func:`check_version`).

Under encryption at rest (``sealing`` given) the file is one sealed envelope
(see ``_sealing``) around the same plaintext, plus a newline.

Not safe on network filesystems with weaker rename or flock semantics (NFS, SMB).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import atomic_write
from .._crypto import RecordSealing, open_file, seal_file
from .._errors import DatabaseError, GovernedMemoryError, StorageError
from ._place import FolderPlace
from ._placed import Placed
from ._version import check_version

if TYPE_CHECKING:
    from .._protocols import RecordLock, RecordPlace

__all__ = ["Encoder", "JsonDocument", "replace_file", "stored_names"]

Encoder = Callable[[dict[str, Any]], str]
"""Turns a document into its JSON text (each registry keeps its own layout)."""


def stored_names(folder: Path, suffix: str, *, hidden: bool = False) -> list[str]:
    """The names in ``folder`` ending in ``suffix``: a registry's documents, or (``hidden``) its logs.

    A folder of documents keyed by id (tombstones, scheduled erasures,
    rectifications, export receipts) keeps each as ``<id><suffix>`` and its
    progress logs as hidden ``.<id><suffix>``; temporary files a crashed write
    left (``.gm-tmp-*``) are neither. A missing folder holds nothing.
    """
    return FolderPlace(folder).names("", suffix, hidden=hidden)


def _compact(document: dict[str, Any]) -> str:
    return json.dumps(document)


def replace_file(path: Path, data: bytes, what: str) -> None:
    """Replace ``path`` by ``data`` atomically and durably (the old bytes stay on failure).

    Raises:
        StorageError: the file could not be replaced; it keeps its previous form.
    """
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise StorageError(
            f"cannot rewrite {what} {path}: {exc}; it keeps its previous form"
        ) from exc


class JsonDocument(Placed):
    """A versioned JSON document in one file (or, with ``place``, one document of a place).

    Args:
        path: the file; or, with ``place``, the document's name in it.
        what: how messages name it, e.g. ``"legal holds file"``.
        version: the format version written and the only one read.
        place: where the document lives (default: the file ``path``, in its folder).
        lock: the lock every writer of the file holds; None when the owner
            serialises writers itself (an erasure's files, under its lock).
        encode: the document's JSON text (default ``json.dumps``), so the
            bytes of every registry stay what they were.
        sealing: seal the file (encryption at rest); None keeps it plaintext.
        purpose: the sealing purpose (``holds``, ``erasure``).
        context: what a sealed file is bound to: its path inside the
            governance folder.
        fix: what to do about a newer format version, when upgrading is not
            the only way.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        what: str,
        version: int,
        place: RecordPlace | None = None,
        lock: RecordLock | None = None,
        encode: Encoder = _compact,
        sealing: RecordSealing | None = None,
        purpose: str = "",
        context: str = "",
        fix: str | None = None,
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
        self.version = version
        self._encode = encode
        self._fix = fix
        self._mutex = threading.Lock()
        self._ident: Any = None
        self._cached: dict[str, Any] | None = None

    @property
    def per_line(self) -> bool:
        """False: the whole file is one record (see :class:`~._jsonl.JsonlLog`)."""
        return False

    def read(self) -> dict[str, Any] | None:
        """The document (None when the file does not exist); one ``stat`` when unchanged.

        Raises:
            StorageError: unreadable or not JSON (damaged).
            FormatVersionError: another format version.
            SealedRecordError: sealed, and no sealing (or key) to open it.
        """
        with self._mutex:
            try:
                ident, raw = self.place.read_document(self.name, self._ident, under=self._under())
            except GovernedMemoryError:
                raise
            except OSError as exc:
                raise StorageError(f"cannot read {self.what} {self.where}: {exc}") from exc
            if ident is None:
                self._ident = self._cached = None
                return None
            if ident != self._ident or raw is not None:
                assert raw is not None  # a new mark comes with the bytes
                self._cached = self._parse(raw)
                self._ident = ident
            return self._cached

    def _parse(self, raw: bytes) -> dict[str, Any]:
        try:
            where = Path(self.where)
            plain = open_file(raw, self.sealing, self.purpose, self.context, where)
            document = json.loads(plain.decode("utf-8"))
        except GovernedMemoryError:
            raise  # sealed without a key, altered, or plaintext where sealing is on
        except ValueError as exc:
            raise StorageError(
                f"{self.what} {self.where} is not valid JSON ({exc}); it is damaged"
            ) from exc
        return check_version(document, self.version, f"{self.what} {self.where}", fix=self._fix)

    def write(self, body: Mapping[str, Any]) -> None:
        """Replace the document by ``body`` (with ``"v"`` first), without taking the lock.

        For a writer already holding :meth:`locked`, or a document without a lock.

        Raises:
            StorageError: not written; the previous document is intact.
        """
        text = self._encode({"v": self.version, **body}) + "\n"
        data = seal_file(text.encode("utf-8"), self.sealing, self.purpose, self.context)
        try:
            self.place.write_document(self.name, data, under=self._under())
        except DatabaseError:
            raise
        except OSError as exc:
            raise StorageError(
                f"cannot write {self.what} {self.where}: {exc}; it was NOT changed"
            ) from exc
        with self._mutex:
            self._ident = None

    def replace(self, body: Mapping[str, Any]) -> None:
        """Replace the document by ``body`` under the writers' lock."""
        with self.locked():
            self.write(body)

    def rewrite(self, convert: Callable[[bytes], bytes]) -> bool:
        """Replace the stored bytes by ``convert(stored)`` under the lock; whether they changed.

        For converting the stored form (sealing, unsealing); a missing file is
        left missing.
        """
        with self.locked():
            try:
                _, raw = self.place.read_document(self.name, None, under=self._under())
            except GovernedMemoryError:
                raise
            except OSError as exc:
                raise StorageError(f"cannot read {self.what} {self.where}: {exc}") from exc
            if raw is None:
                return False
            new = convert(raw)
            if new == raw:
                return False
            try:
                self.place.write_document(self.name, new, under=self._under())
            except DatabaseError:
                raise
            except OSError as exc:
                raise StorageError(
                    f"cannot rewrite {self.what} {self.where}: {exc}; it keeps its previous form"
                ) from exc
            with self._mutex:
                self._ident = None
            return True

    def delete(self) -> bool:
        """Remove the file durably; whether it existed."""
        return self.place.delete_document(self.name)


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import RecordDocument

    _conforms: type[RecordDocument] = JsonDocument
