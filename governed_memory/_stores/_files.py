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
retention's file scan). :class:`FolderSync` puts folder fsyncs off to one
pass per folder for an operation that changes many files (an erasure).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat as _stat
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import ClassVar, Self

from .._base import (
    ARCHIVE_DIR,
    MEMORY_FILE,
    FolderLock,
    GroupSync,
    atomic_write_at,
    exists_at,
    lstat_at,
    open_beneath,
    open_dir_at,
    read_at,
    remove_temps_at,
    write_temp_at,
)
from .._errors import GovernedMemoryError, StorageError, UnsafePathError
from .._protocols import StoredInfo

__all__ = [
    "LINEAGE_INDEX",
    "SUBJECTS_DIR",
    "AgentFolderStore",
    "FolderSync",
    "holding",
    "is_partition_name",
    "plain_partition_name",
]

ARCHIVE_PREFIX = "history_"
SUBJECTS_DIR = "subjects"
"""The folder of an agent that holds one sub-folder per data subject (isolation = "subject")."""

LINEAGE_INDEX = ".gm-lineage.json"
"""In ``subjects/``: which subject memories may hold another subject's data (see ``lineage_index``)."""
_INDEX_FORMAT = "governed-memory-lineage-index"
_INDEX_VERSION = 1

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


class FolderSync:
    """Folder fsyncs put off to one pass: each folder once, however many files changed in it.

    An erasure replaces or deletes files in many folders; a rename is
    durable once its folder is fsynced. :meth:`add` keeps a descriptor of
    each folder (a duplicate, so the caller may close its own), and
    :meth:`flush` fsyncs each one: after the renames of many agents, the
    first fsync commits the filesystem's journal and the others find little
    left to do. Call :meth:`flush` before anything says the change is
    complete (a receipt); :meth:`close` flushes too. Not thread-safe.
    """

    LIMIT = 256
    """Folders kept open at most; the next :meth:`add` flushes them first."""

    def __init__(self) -> None:
        self._fds: dict[tuple[int, int], int] = {}

    def add(self, dir_fd: int) -> None:
        """Fsync the folder ``dir_fd`` at the next :meth:`flush` (once, whatever the count)."""
        st = os.fstat(dir_fd)
        key = (st.st_dev, st.st_ino)
        if key in self._fds:
            return
        if len(self._fds) >= self.LIMIT:
            self.flush()
        self._fds[key] = os.dup(dir_fd)

    def flush(self) -> None:
        """Fsync every folder added since the last flush (``OSError`` after trying each)."""
        fds, self._fds = list(self._fds.values()), {}
        failed: OSError | None = None
        for fd in fds:
            try:
                os.fsync(fd)
            except OSError as exc:
                failed = failed or exc
            finally:
                os.close(fd)
        if failed is not None:
            raise failed

    def close(self) -> None:
        self.flush()


def replace_at(dir_fd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in ``dir_fd`` by a new fsynced file holding ``data`` (folder not fsynced)."""
    tmp = write_temp_at(dir_fd, data)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def sync_dir(dir_fd: int, sync: FolderSync | None) -> None:
    if sync is None:
        os.fsync(dir_fd)
    else:
        sync.add(dir_fd)


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
    _sync: FolderSync | None = None
    """Inside :meth:`syncing`: where folder fsyncs are put off to."""

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

    def partition_store(self, partition: str) -> Self:
        """The subject memory named ``partition`` (a folder name :attr:`partition` gave), creating nothing.

        For a migration, which knows a subject memory by its stored name only.
        """
        if self._partition is not None or not is_partition_name(partition):
            raise StorageError(
                f"partition_store({partition!r}) refused: ask the agent's own store for a "
                "name of 32 hex digits, as a subject store's partition gives it"
            )
        return self._open_partition(partition)

    def subject_store(self, subject_id: str) -> Self:
        if self._partition is not None:
            raise StorageError(
                f"subject_store({subject_id!r}) called on subject folder {self._folder}; "
                "ask the agent's own store"
            )
        if not isinstance(subject_id, str) or not subject_id:
            raise StorageError(f"subject id {subject_id!r} must be a non-empty string")
        return self._open_partition(self.partition_name(subject_id))

    def subject_stores(self, only: Collection[str] | None = None) -> list[Self]:
        """Every subject memory of the agent; a link among them is refused, never skipped.

        A symbolic link ``subjects/`` or ``subjects/<p>`` raises
        :class:`UnsafePathError`: skipping it would hide a subject's memory
        from export and erasure, following it would read and write outside.
        ``only``: just the memories with those folder names (those that exist).
        """
        if self._partition is not None:
            return []
        folder = self._folder / SUBJECTS_DIR
        try:
            with self._opened(SUBJECTS_DIR) as fd, os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
                names = []
                for entry in entries:
                    if not is_partition_name(entry.name) or (
                        only is not None and entry.name not in only
                    ):
                        continue
                    if entry.is_symlink():
                        raise UnsafePathError(folder / entry.name, "folder")
                    if entry.is_dir(follow_symlinks=False):
                        names.append(entry.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [self._open_partition(name) for name in names]

    def lineage_index(self) -> frozenset[str] | None:
        """The subject memories of the agent that may hold another subject's data; None: unknown.

        Under isolation a subject's memory holds only their own records and
        summaries (a compaction's lineage is the subject alone); only
        :func:`isolate_subjects` moving records written before isolation can
        put a summary naming others in it. ``subjects/.gm-lineage.json``
        lists those memories (folder names only), so export and erasure of
        one subject read that subject's memory and the listed ones, never
        every other subject's. It is written by a walk that read every
        memory (:meth:`write_lineage_index`) and kept by ``isolate_subjects``
        (:meth:`note_mixed_lineage`). None when the file is missing (a
        workspace from before the index, an agent never walked), damaged or
        of another version: the caller reads every memory, as without it.
        """
        if self._partition is not None:
            return None
        try:
            with self._opened(SUBJECTS_DIR) as fd:
                data = json.loads(read_at(fd, LINEAGE_INDEX, self._folder / SUBJECTS_DIR))
        except (OSError, ValueError, GovernedMemoryError):
            return None
        if (
            not isinstance(data, dict)
            or data.get("format") != _INDEX_FORMAT
            or data.get("version") != _INDEX_VERSION
            or not isinstance(data.get("mixed"), list)
            or not all(isinstance(p, str) and is_partition_name(p) for p in data["mixed"])
        ):
            return None
        return frozenset(data["mixed"])

    def write_lineage_index(self, mixed: Iterable[str]) -> None:
        """Record that of the agent's subject memories only ``mixed`` may hold others' data.

        Call it under the agent's lock, right after reading every subject
        memory. Nothing is written when the agent has no ``subjects/``.
        """
        body = {"format": _INDEX_FORMAT, "version": _INDEX_VERSION, "mixed": sorted(set(mixed))}
        with suppress(FileNotFoundError, NotADirectoryError), self._opened(SUBJECTS_DIR) as fd:
            atomic_write_at(fd, LINEAGE_INDEX, json.dumps(body).encode("utf-8"))

    def note_mixed_lineage(self, partition: str) -> None:
        """Add ``partition`` to the index before data naming another subject is written to it.

        Without an index nothing is written: the next walk reads every memory anyway.
        """
        known = self.lineage_index()
        if known is not None and partition not in known:
            self.write_lineage_index(known | {partition})

    def _partition_path(self, partition: str) -> Path:
        return self._folder / SUBJECTS_DIR / partition / MEMORY_FILE

    def _settle(self, syncer: GroupSync, fd: int, ident: tuple[int, int]) -> None:
        """Make the appends to ``fd``'s file durable, then close ``fd`` (a ``dup``).

        Called after the folder lock is released: the writers of the file
        share the ``fdatasync`` (group commit, :class:`GroupSync`), and none
        waits for the lock while the disk flushes. The ``dup`` taken under
        the lock keeps the file open even if another thread closes the
        store's own descriptor meanwhile; a file replaced since (compaction,
        erasure) was written durably by whoever replaced it.
        """
        try:
            syncer.sync(fd, ident)
        except OSError as exc:
            raise StorageError(
                f"cannot make the append to {self.memory_path} durable: {exc}; the add is not "
                'reported as done (durability.sync = "commit"). Check the disk'
            ) from exc
        finally:
            os.close(fd)

    def _folder_lock(self) -> FolderLock:
        """The lock of the store's folder, which opens it without following a link.

        Its last component (a subject store: the last three, ``<agent>/subjects/<p>``)
        is the library's own; the workspace and ``agents/`` above may be links.
        """
        return FolderLock(
            self._folder,
            on_drop=self._close_file,
            nofollow=1 if self._partition is None else 3,
        )

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

    # -- the folders, never through a link ----------------------------------

    @contextmanager
    def _opened(self, sub: str | None = None, *, create: bool = False) -> Iterator[int]:
        """A new descriptor of the store's folder, or of its folder ``sub`` (``archive``).

        Opened component by component without following a link (the lock's
        :meth:`FolderLock.open_folder`); ``FileNotFoundError`` when missing
        and not ``create``. Closed after the block.
        """
        fd = self._lock.open_folder(create=create)
        try:
            if sub is None:
                yield fd
                return
            child = open_dir_at(fd, sub, self._folder / sub, create=create)
            try:
                yield child
            finally:
                os.close(child)
        finally:
            os.close(fd)

    def _locate(self, path: Path) -> tuple[str | None, str]:
        """``(sub-folder or None, name)`` of a file of this store; any other path is refused."""
        target = Path(path)
        if target.parent == self._folder:
            return None, target.name
        if target.parent == self.archive_dir:
            return ARCHIVE_DIR, target.name
        raise StorageError(
            f"{target} is not a file of the store of {self._folder}; only its memory file and "
            f"the files in {self.archive_dir} are"
        )

    def read_file(self, path: Path) -> bytes:
        """The bytes of ``path``, a file in the store's folder or ``archive/`` (file backend only).

        ``FileNotFoundError`` when missing; :class:`UnsafePathError` when it,
        or a folder on the way inside the agent folder, is a link.
        """
        sub, name = self._locate(path)
        with self._opened(sub) as fd:
            return read_at(fd, name, Path(path))

    def has_file(self, path: Path) -> bool:
        """Whether ``path`` (a file of this store) exists; a link is refused, never followed."""
        sub, name = self._locate(path)
        try:
            with self._opened(sub) as fd:
                return exists_at(fd, name, Path(path))
        except (FileNotFoundError, NotADirectoryError):
            return False

    def write_file(self, path: Path, data: bytes) -> None:
        """Replace (or create) ``path``, a file of this store, atomically (hold :meth:`lock`)."""
        sub, name = self._locate(path)
        with self._opened(sub, create=sub is not None) as fd:
            atomic_write_at(fd, name, data)

    def remove_file(self, path: Path) -> None:
        """Remove ``path``, a file of this store, durably (hold :meth:`lock`); a link is refused."""
        sub, name = self._locate(path)
        with self._opened(sub) as fd:
            lstat_at(fd, name, Path(path))
            os.unlink(name, dir_fd=fd)
            os.fsync(fd)

    def _remove_own_temps(self) -> int:
        """Remove the temporary files in the store's folder and ``archive/`` (lock held)."""
        removed = 0
        with self._opened() as fd:
            removed += remove_temps_at(fd)
            try:
                archive = open_dir_at(fd, ARCHIVE_DIR, self.archive_dir)
            except (FileNotFoundError, NotADirectoryError):
                return removed
            try:
                removed += remove_temps_at(archive)
            finally:
                os.close(archive)
        return removed

    def remove_temps(self) -> int:
        """Remove every temporary file a crashed writer left in the agent's folders; how many.

        A compaction or rewrite killed before its rename leaves a
        ``.gm-tmp-*`` file that may hold the old text (of an erased subject,
        too). This removes those of the store's folder and ``archive/`` and,
        on the agent's own store, of every subject folder and its
        ``archive/``, each under that folder's lock (the agent's first, the
        order every writer takes them in), so no live writer's file goes. A
        missing agent folder has none; a link in the tree is refused
        (:class:`UnsafePathError`) before anything of that folder is removed.
        """
        try:
            with self._lock.held(create=False):
                removed = self._remove_own_temps()
                for sub in self.subject_stores():
                    try:
                        removed += sub.remove_temps()
                    finally:
                        sub.close()
                return removed
        except FileNotFoundError:
            return 0
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot remove temporary files in {self._folder}: {exc}") from exc

    @contextmanager
    def _compacting(self) -> Iterator[None]:
        """Hold the lock for a compaction, the folder and ``archive/`` cleared of stale temps.

        The body archives and replaces the memory. An ``OSError`` becomes
        :class:`StorageError` saying the memory is unchanged; governed_memory's
        own errors pass through.
        """
        try:
            with self._lock.held():
                self._remove_own_temps()
                yield
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(
                f"compaction of {self._memory_path} failed, memory left unchanged: {exc}"
            ) from exc

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

    def archive_files(self, suffix: str | None = None) -> list[Path]:
        """The archive files (``history_*<suffix>``, default the store's), oldest first.

        File backend only. A missing folder has no archives; temporary files
        are never archives; a link (``archive/`` itself, or an archive file)
        is refused with :class:`UnsafePathError`, never listed as an archive
        and never skipped.
        """
        suffix = self.suffix if suffix is None else suffix
        found: list[Path] = []
        try:
            with self._opened(ARCHIVE_DIR) as fd, os.scandir(fd) as it:
                for entry in sorted(it, key=lambda e: e.name):
                    name = entry.name
                    if not name.startswith(ARCHIVE_PREFIX) or not name.endswith(suffix):
                        continue
                    if entry.is_symlink():
                        raise UnsafePathError(self.archive_dir / name, "file")
                    found.append(self.archive_dir / name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return found

    def list_archives(self) -> list[str]:
        try:
            return [path.name.removesuffix(self.suffix) for path in self.archive_files()]
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot list archives in {self.archive_dir}: {exc}") from exc

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
            data = self.read_file(path)
        except (FileNotFoundError, GovernedMemoryError):
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

    def read_memory(self) -> str | None:
        raise NotImplementedError

    def _close_file(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- one pass over the files (export, erasure) --------------------------

    def read_texts(
        self, before: Callable[[str | None], None] | None = None
    ) -> list[tuple[str | None, str]]:
        """(archive id or None for the active memory, text) of every file: the memory, then archives.

        One pass: ``archive/`` is opened and listed once and each archive
        read relative to it. ``before`` is told each id before it is read (a
        report names the file that failed). Errors as :meth:`read_archive`.
        """
        if before is not None:
            before(None)
        found: list[tuple[str | None, str]] = []
        memory = self.read_memory()
        if memory is not None:
            found.append((None, memory))
        try:
            with self._opened(ARCHIVE_DIR) as fd, os.scandir(fd) as it:
                names = sorted(
                    e.name
                    for e in it
                    if e.name.startswith(ARCHIVE_PREFIX) and e.name.endswith(self.suffix)
                )
                for name in names:
                    archive_id = name.removesuffix(self.suffix)
                    if before is not None:
                        before(archive_id)
                    path = self.archive_dir / name
                    found.append((archive_id, self._decode(read_at(fd, name, path), path)))
        except (FileNotFoundError, NotADirectoryError):
            pass
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read the archives in {self.archive_dir}: {exc}") from exc
        return found

    # -- rewriting (erasure) -------------------------------------------------

    @contextmanager
    def syncing(self, sync: FolderSync) -> Iterator[None]:
        """Within the block, rewrites and :meth:`delete` leave their folder's fsync to ``sync``.

        Each new file is still fsynced before its rename; the folders are
        fsynced by ``sync.flush()``, once each, however many files changed.
        """
        previous, self._sync = self._sync, sync
        try:
            yield
        finally:
            self._sync = previous

    def rewrite_memory(self, text: str) -> None:
        self._rewrite(self._memory_path, lambda: self._encode(None, text), self._close_file)

    def rewrite_archive(self, archive_id: str, text: str) -> None:
        target = self.archive_file(archive_id)
        self._rewrite(target, lambda: self._encode(target.name, text))

    def import_archive(self, archive_id: str, text: str) -> None:
        """Store ``text`` as archive ``archive_id``, created or replaced atomically (a migration).

        Keeps the id the source gave it, so a receipt citing :meth:`source` stays
        true; an encrypted store seals it as :meth:`compact` would.
        """
        target = self.archive_file(archive_id)
        try:
            with self._lock.held():
                self.write_file(target, self._encode(target.name, text))
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"import of {target} failed, file left unchanged: {exc}") from exc

    def _rewrite(
        self, target: Path, encode: Callable[[], bytes], after: Callable[[], None] | None = None
    ) -> None:
        """Atomically replace an existing ``target`` with ``encode()`` under the lock.

        Stale temporary files in the store's folder and ``archive/`` go first
        (a crashed writer's may hold the text being removed); ``after`` runs
        once the new file is in place (the memory file: drop the open
        descriptor). A missing target is refused, and so is a link; an
        ``OSError`` becomes :class:`StorageError` saying the file is
        unchanged; governed_memory's own errors pass through. Inside
        :meth:`syncing` the folder's fsync is left to its ``FolderSync``.
        """
        try:
            with self._lock.held():
                if not self.has_file(target):
                    raise StorageError(f"rewrite of {target} refused: the file does not exist")
                self._remove_own_temps()
                sync = self._sync
                if sync is None:
                    self.write_file(target, encode())
                else:
                    sub, name = self._locate(target)
                    with self._opened(sub) as fd:
                        replace_at(fd, name, encode())
                        sync.add(fd)
                if after is not None:
                    after()
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"rewrite of {target} failed, file left unchanged: {exc}") from exc

    # -- what is stored, and where -----------------------------------------------

    def _file(self, archive_id: str | None) -> Path:
        return self._memory_path if archive_id is None else self.archive_file(archive_id)

    def stat(self, archive_id: str | None = None) -> StoredInfo | None:
        path = self._file(archive_id)
        sub, name = self._locate(path)
        try:
            with self._opened(sub) as fd:
                st = lstat_at(fd, name, path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot stat {path}: {exc}") from exc
        if not _stat.S_ISREG(st.st_mode):
            return None
        return StoredInfo(st.st_size, st.st_mtime)

    def source(self, archive_id: str | None = None) -> str:
        # Built from names (called for every file a request cites): the same
        # text as the path relative to the agent folder, without pathlib.
        prefix = "" if self._partition is None else f"{SUBJECTS_DIR}/{self._partition}/"
        if archive_id is None:
            return prefix + self._memory_path.name
        if not archive_id.startswith(ARCHIVE_PREFIX) or "/" in archive_id or "\\" in archive_id:
            self.archive_file(archive_id)  # refused with its message
        return f"{prefix}{ARCHIVE_DIR}/{archive_id}{self.suffix}"

    def delete(self) -> None:
        """Remove the agent folder, its subject folders with it (hold :meth:`lock`).

        A subject's partition removes only its own folder. A writer waiting
        on the lock then starts a new, empty memory. The folder is removed
        relative to its parent's descriptor, and ``rmtree`` never follows a
        link inside it (it removes the link); a link in the folder's place is
        refused. The parent folder is fsynced now, or inside :meth:`syncing` by its ``FolderSync``.
        """
        own = 1 if self._partition is None else 3
        folder = self._folder if len(self._folder.parts) > own else self._folder.absolute()
        try:
            parent = open_beneath(folder.parents[own - 1], folder.parts[-own:-1])
            try:
                lstat_at(parent, self._folder.name, self._folder)
                shutil.rmtree(self._folder.name, dir_fd=parent)
                sync_dir(parent, self._sync)
            finally:
                os.close(parent)
        except FileNotFoundError:
            return
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(
                f"cannot delete agent folder {self._folder}: {exc}; fix the cause and run the "
                "operation again (what was deleted stays deleted)"
            ) from exc
