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
import os
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import TMP_PREFIX, FileLock, atomic_write, ensure_private_dir, fsync_dir, held_if_any
from .._crypto import RecordSealing, open_file, seal_file
from .._errors import GovernedMemoryError, StorageError
from ._version import check_version

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
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return [
        n
        for n in names
        if n.endswith(suffix)
        and not n.startswith(TMP_PREFIX)
        and (n.startswith(".") if hidden else not n.startswith("."))
    ]


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


class JsonDocument:
    """A versioned JSON document in one file.

    Args:
        path: the file.
        what: how messages name it, e.g. ``"legal holds file"``.
        version: the format version written and the only one read.
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
        path: Path,
        *,
        what: str,
        version: int,
        lock: FileLock | None = None,
        encode: Encoder = _compact,
        sealing: RecordSealing | None = None,
        purpose: str = "",
        context: str = "",
        fix: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.what = what
        self.version = version
        self.lock = lock
        self.sealing = sealing
        self.purpose = purpose
        self.context = context or self.path.name
        self._encode = encode
        self._fix = fix
        self._path_str = os.fspath(self.path)
        self._mutex = threading.Lock()
        self._ident: tuple[int, int, int] | None = None
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
                st = os.stat(self._path_str)
            except FileNotFoundError:
                self._ident = self._cached = None
                return None
            except OSError as exc:
                raise StorageError(f"cannot read {self.what} {self.path}: {exc}") from exc
            ident = (st.st_ino, st.st_size, st.st_mtime_ns)
            if ident != self._ident:
                self._cached = self._parse()
                self._ident = ident if self._cached is not None else None
            return self._cached

    def _parse(self) -> dict[str, Any] | None:
        try:
            raw = self.path.read_bytes()
            plain = open_file(raw, self.sealing, self.purpose, self.context, self.path)
            document = json.loads(plain.decode("utf-8"))
        except FileNotFoundError:
            return None
        except GovernedMemoryError:
            raise  # sealed without a key, altered, or plaintext where sealing is on
        except OSError as exc:
            raise StorageError(f"cannot read {self.what} {self.path}: {exc}") from exc
        except ValueError as exc:
            raise StorageError(
                f"{self.what} {self.path} is not valid JSON ({exc}); it is damaged"
            ) from exc
        return check_version(document, self.version, f"{self.what} {self.path}", fix=self._fix)

    def locked(self) -> AbstractContextManager[None]:
        """Hold the writers' lock for a block (nothing when the owner serialises writers)."""
        return held_if_any(self.lock)

    def write(self, body: Mapping[str, Any]) -> None:
        """Replace the document by ``body`` (with ``"v"`` first), without taking the lock.

        For a writer already holding :meth:`locked`, or a document without a lock.

        Raises:
            StorageError: not written; the previous document is intact.
        """
        text = self._encode({"v": self.version, **body}) + "\n"
        data = seal_file(text.encode("utf-8"), self.sealing, self.purpose, self.context)
        try:
            ensure_private_dir(self.path.parent)
            atomic_write(self.path, data)
        except OSError as exc:
            raise StorageError(
                f"cannot write {self.what} {self.path}: {exc}; it was NOT changed"
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
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise StorageError(f"cannot read {self.what} {self.path}: {exc}") from exc
            new = convert(raw)
            if new == raw:
                return False
            replace_file(self.path, new, self.what)
            with self._mutex:
                self._ident = None
            return True

    def delete(self) -> bool:
        """Remove the file durably; whether it existed."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        fsync_dir(self.path.parent)
        return True


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import RecordDocument

    _conforms: type[RecordDocument] = JsonDocument
