"""What both agent-folder stores share: the folder layout, archive ids, rewrite, stat, delete.

The stores differ in the file suffix (``.md`` or ``.gmenc``) and in how text
becomes bytes (UTF-8 or sealed frames); the rules around them are one: which
files are archives, how an archive id names a file, and how a rewrite is
refused, made atomic and reported. :class:`AgentFolderStore` holds those
rules once and implements the id-based part of the storage seam
(``governed_memory._protocols.AgentStore``); the file paths it also exposes
(:attr:`~AgentFolderStore.folder`, :attr:`~AgentFolderStore.memory_path`,
:meth:`~AgentFolderStore.archive_files`) are the file backend's own, for the
operations that work on files as such (key rotation, workspace encryption,
retention's file scan).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import ClassVar, Self

from .._base import (
    ARCHIVE_DIR,
    MEMORY_FILE,
    TMP_PREFIX,
    FolderLock,
    atomic_write,
    fsync_dir,
    remove_stale_temps,
)
from .._errors import GovernedMemoryError, StorageError
from .._protocols import StoredInfo

__all__ = [
    "SUBJECTS_DIR",
    "AgentFolderStore",
    "compacting",
    "holding",
    "is_partition_name",
    "list_archive_files",
    "plain_partition_name",
    "rewrite_file",
]

ARCHIVE_PREFIX = "history_"
SUBJECTS_DIR = "subjects"
"""The folder of an agent that holds one sub-folder per data subject (isolation = "subject")."""

_PARTITION_CHARS = frozenset("0123456789abcdef")
_PARTITION_LEN = 32


def plain_partition_name(subject_id: str) -> str:
    """The folder name of ``subject_id``'s memory in a plaintext workspace.

    The first 32 hex digits of SHA-256 over ``subject\\0<id>``: stable and
    free of path characters, but not keyed (the plaintext files name the
    subject in their metadata anyway). The encrypted store names the folder
    by the keyring's keyed reference instead.
    """
    digest = hashlib.sha256(b"subject\x00" + subject_id.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:_PARTITION_LEN]


def is_partition_name(name: str) -> bool:
    """Whether ``name`` is a subject folder's name (32 lower-case hex digits)."""
    return len(name) == _PARTITION_LEN and set(name) <= _PARTITION_CHARS


@contextmanager
def holding(folder: Path, locked: Callable[[], AbstractContextManager[object]]) -> Iterator[None]:
    """Hold ``locked()`` for a caller's block (the stores' public ``lock()``).

    Only a failure to take the lock becomes "cannot lock agent folder"; an
    error raised by the caller's own block propagates as it was raised.
    """
    inside = False
    try:
        with locked():
            inside = True
            yield
    except OSError as exc:
        if inside or isinstance(exc, GovernedMemoryError):
            raise
        raise StorageError(f"cannot lock agent folder {folder}: {exc}") from exc


@contextmanager
def compacting(
    memory_path: Path,
    locked: Callable[[], AbstractContextManager[object]],
    archive_dir: Path,
) -> Iterator[None]:
    """Hold ``locked()`` for a compaction of ``memory_path``, its folders cleared of stale temps.

    The body archives and replaces the memory. An ``OSError`` becomes
    :class:`StorageError` saying the memory is unchanged; governed_memory's
    own errors pass through.
    """
    try:
        with locked():
            remove_stale_temps(memory_path.parent)
            remove_stale_temps(archive_dir)
            yield
    except GovernedMemoryError:
        raise
    except OSError as exc:
        raise StorageError(
            f"compaction of {memory_path} failed, memory left unchanged: {exc}"
        ) from exc


def list_archive_files(archive_dir: Path, suffix: str) -> list[Path]:
    """The ``history_*<suffix>`` files in ``archive_dir``, oldest first (names sort by time).

    A missing folder has no archives; temporary files are never archives.
    """
    try:
        names = os.listdir(archive_dir)
    except FileNotFoundError:
        return []
    return [
        archive_dir / name
        for name in sorted(names)
        if name.startswith("history_") and name.endswith(suffix) and not name.startswith(TMP_PREFIX)
    ]


def rewrite_file(
    target: Path,
    locked: Callable[[], AbstractContextManager[object]],
    encode: Callable[[], bytes],
    after: Callable[[], None] | None = None,
) -> None:
    """Atomically replace an existing ``target`` with ``encode()`` under ``locked()``.

    Stale temporary files in the target's folder go first (a crashed writer's
    may hold the text being removed); ``after`` runs once the new file is in
    place (the memory file: drop the open descriptor). A missing target is
    refused; an ``OSError`` becomes :class:`StorageError` saying the file is
    unchanged; governed_memory's own errors pass through.
    """
    try:
        with locked():
            if not target.exists():
                raise StorageError(f"rewrite of {target} refused: the file does not exist")
            remove_stale_temps(target.parent)
            atomic_write(target, encode())
            if after is not None:
                after()
    except GovernedMemoryError:
        raise
    except OSError as exc:
        raise StorageError(f"rewrite of {target} failed, file left unchanged: {exc}") from exc


class AgentFolderStore:
    """The file backend's agent store: one folder, its memory file and ``archive/``.

    Subclasses set :attr:`suffix` (the archive files' ending), ``_folder``,
    ``_memory_path`` and ``_lock`` in ``__init__``, and implement
    :meth:`_encode` (text to the bytes of one file), :meth:`_decode` (an
    archive file's bytes to its text) and ``_close_file``. An archive's id is its file name without the suffix
    (``history_<ts>``), the same in both stores, so ids survive encrypting a
    workspace.
    """

    accepts_utf8_blocks: ClassVar[bool] = True
    suffix: ClassVar[str]

    _folder: Path
    _memory_path: Path
    _lock: FolderLock
    _partition: str | None = None
    """The subject folder's name when this store is one subject's memory of the agent."""

    @property
    def agent(self) -> str:
        if self._partition is not None:
            return self._folder.parent.parent.name
        return self._folder.name

    @property
    def partition(self) -> str | None:
        return self._partition

    @property
    def agent_folder(self) -> Path:
        """The agent's folder (the store's own folder unless it is a subject's partition)."""
        return self._folder.parent.parent if self._partition is not None else self._folder

    # -- subject partitions (isolation = "subject") --------------------------

    def _set_partition(self, partition: str | None) -> None:
        """Make this store the partition ``partition`` of its agent (its folder is the partition's)."""
        if partition is not None:
            if not is_partition_name(partition) or self._folder.name != partition:
                raise StorageError(
                    f"subject folder {self._folder} refused: a subject's memory lives in "
                    f"<agent>/{SUBJECTS_DIR}/<32 hex digits>/, as subject_store() names it"
                )
            if self._folder.parent.name != SUBJECTS_DIR:
                raise StorageError(
                    f"subject folder {self._folder} is not inside an agent's {SUBJECTS_DIR}/ folder"
                )
        self._partition = partition

    def partition_name(self, subject_id: str) -> str:
        """The name of ``subject_id``'s subject folder (the plaintext store's unkeyed hash)."""
        return plain_partition_name(subject_id)

    def _open_partition(self, partition: str) -> Self:
        """A store of the same kind on ``<agent>/subjects/<partition>/`` (creates nothing)."""
        raise NotImplementedError

    def subject_store(self, subject_id: str) -> Self:
        if self._partition is not None:
            raise StorageError(
                f"subject_store({subject_id!r}) called on subject folder {self._folder}; "
                "ask the agent's own store"
            )
        if not isinstance(subject_id, str) or not subject_id:
            raise StorageError(f"subject id {subject_id!r} must be a non-empty string")
        return self._open_partition(self.partition_name(subject_id))

    def subject_stores(self) -> list[Self]:
        if self._partition is not None:
            return []
        folder = self._folder / SUBJECTS_DIR
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [
            self._open_partition(entry.name)
            for entry in sorted(entries, key=lambda e: e.name)
            if is_partition_name(entry.name) and entry.is_dir(follow_symlinks=False)
        ]

    def _partition_path(self, partition: str) -> Path:
        return self._folder / SUBJECTS_DIR / partition / MEMORY_FILE

    @property
    def folder(self) -> Path:
        """The agent folder (file backend only)."""
        return self._folder

    @property
    def memory_path(self) -> Path:
        """The file that holds the active memory (file backend only)."""
        return self._memory_path

    @property
    def archive_dir(self) -> Path:
        return self._folder / ARCHIVE_DIR

    @contextmanager
    def lock(self) -> Iterator[None]:
        with holding(self._folder, self._lock.held):
            yield

    # -- archive ids ---------------------------------------------------------

    def archive_file(self, archive_id: str) -> Path:
        """The file of archive ``archive_id`` (file backend only); refuses any other name.

        An id is a bare ``history_*`` name: no folder, no suffix, never a
        temporary file's, so no id reaches outside ``archive/``.
        """
        if (
            not isinstance(archive_id, str)
            or not archive_id.startswith(ARCHIVE_PREFIX)
            or "/" in archive_id
            or "\\" in archive_id
            or "\0" in archive_id
            or archive_id.endswith(self.suffix)
        ):
            raise StorageError(
                f"archive id {archive_id!r} refused: only bare names like "
                "'history_2026-01-31_12-00-00', as list_archives() returns them, name the "
                f"archives of agent {self.agent!r}"
            )
        return self.archive_dir / (archive_id + self.suffix)

    def archive_files(self) -> list[Path]:
        """The archive files, oldest first (file backend only)."""
        return list_archive_files(self.archive_dir, self.suffix)

    def list_archives(self) -> list[str]:
        return [path.name.removesuffix(self.suffix) for path in self.archive_files()]

    def read_archive(self, archive_id: str) -> str:
        path = self.archive_file(archive_id)
        try:
            return self._read_file(path)
        except FileNotFoundError:
            raise StorageError(
                f"agent {self.agent!r} has no archive {archive_id!r}; use one of list_archives()"
            ) from None

    def _read_file(self, path: Path) -> str:
        """The text of the archive file ``path`` (``FileNotFoundError`` when missing)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read archive {path}: {exc}") from exc
        return self._decode(data, path)

    def _decode(self, data: bytes, path: Path) -> str:
        """The text of archive file ``path`` whose bytes are ``data``."""
        raise NotImplementedError

    def _encode(self, name: str | None, text: str) -> bytes:
        """The bytes of the memory file (``name`` None) or of archive file ``name`` for ``text``."""
        raise NotImplementedError

    def _close_file(self) -> None:
        raise NotImplementedError

    # -- rewriting (erasure) -------------------------------------------------

    def rewrite_memory(self, text: str) -> None:
        rewrite_file(
            self._memory_path, self._lock.held, lambda: self._encode(None, text), self._close_file
        )

    def rewrite_archive(self, archive_id: str, text: str) -> None:
        target = self.archive_file(archive_id)
        rewrite_file(target, self._lock.held, lambda: self._encode(target.name, text))

    # -- what is stored, and where -----------------------------------------------

    def _file(self, archive_id: str | None) -> Path:
        return self._memory_path if archive_id is None else self.archive_file(archive_id)

    def stat(self, archive_id: str | None = None) -> StoredInfo | None:
        try:
            st = self._file(archive_id).stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot stat {self._file(archive_id)}: {exc}") from exc
        return StoredInfo(st.st_size, st.st_mtime)

    def source(self, archive_id: str | None = None) -> str:
        return self._file(archive_id).relative_to(self.agent_folder).as_posix()

    def delete(self) -> None:
        """Remove the agent folder, its subject folders with it (hold :meth:`lock`).

        A subject's partition removes only its own folder. A writer waiting
        on the lock then starts a new, empty memory.
        """
        try:
            shutil.rmtree(self._folder)
            fsync_dir(self._folder.parent)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(
                f"cannot delete agent folder {self._folder}: {exc}; fix the cause and run the "
                "operation again (what was deleted stays deleted)"
            ) from exc
