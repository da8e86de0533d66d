"""File handling both agent-folder stores share: compaction's frame, archive listing, rewrite.

The stores differ in the file suffix (``.md`` or ``.gmenc``) and in how text
becomes bytes (UTF-8 or sealed frames); the rules around them are one: which
files are archives, and how a rewrite is refused, made atomic and reported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from .._base import TMP_PREFIX, atomic_write, remove_stale_temps
from .._errors import GovernedMemoryError, StorageError

__all__ = ["compacting", "holding", "list_archive_files", "rewrite_file"]


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
