"""The executor: applies a purge journal, idempotently, under the right locks.

Before deleting an entry it checks, at that moment:

* the path is one the journal may name (an artefact of its kind, inside the
  workspace's layout): a damaged or edited journal cannot delete anything else;
* the file is the one planned (same inode and mtime): an agent that wrote
  again since the plan, or a file replaced by a restore, is left alone (``c``);
* no hold covers it now: a hold placed after the plan still wins (``h``).

Files in an agent folder are deleted while holding that folder's store lock
(the ``flock`` every writer of the agent takes), so a purge never races an
append or a compaction; files of a subject memory
(``agents/<agent>/subjects/<p>/``) while holding that subject folder's lock,
the one its writers take. Consent records are removed by one atomic rewrite of
the consent log under its own lock. Folders in an agent's tree are opened
below ``agents/`` without following a link, and files are unlinked relative
to them: nothing is deleted through a link, and a link in a planned folder's
place counts as gone. All deletions are made durable by one
``sync`` before the purge reports completion.
"""

from __future__ import annotations

import errno
import itertools
import os
import secrets
import shutil
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .._base import (
    AGENTS_DIR,
    ARCHIVE_DIR,
    AUDIT_FILE_KINDS,
    EXPORTS_DIR,
    TOMBSTONES_DIR,
    ArtefactKind,
    FileKind,
    FolderLock,
    archive_kind,
    classify_agent_file,
    fsync_dir,
    open_beneath,
    validate_agent_name,
    write_all,
)
from .._crypto import RecordSealing
from .._errors import GovernedMemoryError, InvalidAgentNameError, UnsafePathError
from .._records import ConsentRegistry, HoldRegistry, HoldSet
from .._stores import SUBJECTS_DIR, AgentStore, StoreFactory, is_partition_name
from ._journal import Entry, Journal, JournalError
from ._scan import agent_store, artefact_subjects, subject_memories

__all__ = ["Executor", "Tally"]

TRASH_PREFIX = ".gm-trash-"
Progress = Callable[[int, int], None]
AuditPurger = Callable[[list[str]], Iterable[str]]
Unit = list[tuple[str | None, ArtefactKind | None, list[Entry]]]
UNIT_ENTRIES = 64


@dataclass
class Tally:
    """What a purge did, per outcome (deletions also per rule)."""

    deleted: Counter[str] = field(default_factory=Counter)
    bytes_freed: int = 0
    held: Counter[str] = field(default_factory=Counter)
    held_bytes: int = 0
    gone: int = 0
    changed: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, entry: Entry, outcome: bytes) -> None:
        if outcome == b"d":
            self.deleted[entry.rule] += 1  # a StrEnum: counts under its str value
            self.bytes_freed += entry.size
        elif outcome == b"h":
            self.held[entry.rule] += 1
            self.held_bytes += entry.size
        elif outcome == b"g":
            self.gone += 1
        elif outcome == b"c":
            self.changed += 1
        else:
            self.failed += 1


class Executor:
    """Applies journals for one workspace.

    Args:
        workspace: the workspace the journal's relative paths start from.
        governance_dir: where consent, exports and tombstones live.
        audit_dir: the audit log's folder.
        holds: consulted again before each deletion.
        store_factory: builds the agent stores whose lock is taken (and that
            read encrypted files when a subject hold needs their subjects).
        audit_purger: removes old audit segments through the audit log, which
            records the removal in its hash chain first (``AuditTrail.
            purge_segments``); without one, audit entries fail (``e``).
        sealing: opens sealed consent records (encrypted workspaces) to check
            their subject against the holds.
        workers: threads deleting in parallel (each on its own agent folder).
    """

    def __init__(
        self,
        workspace: Path,
        governance_dir: Path,
        audit_dir: Path,
        holds: HoldRegistry,
        store_factory: StoreFactory | None = None,
        audit_purger: AuditPurger | None = None,
        sealing: RecordSealing | None = None,
        workers: int = 4,
    ) -> None:
        self.workspace = Path(workspace)
        self.governance_dir = Path(governance_dir)
        self.audit_dir = Path(audit_dir)
        self.holds = holds
        self.store_factory = store_factory
        self.audit_purger = audit_purger
        self.sealing = sealing
        self.workers = max(1, workers)
        self._root = os.fspath(self.workspace)

    def run(self, journal: Journal, tally: Tally, on_progress: Progress | None = None) -> None:
        """Apply every entry of ``journal`` not done yet, adding outcomes to ``tally``.

        Batches (one agent folder, the consent log, the audit log), grouped in
        units of about 64 entries, run on ``workers`` threads: deleting is mostly waiting for the filesystem,
        and different agents' folders are independent (each batch holds its
        own folder's lock). Outcomes are recorded strictly in journal order,
        so ``progress`` stays a prefix of the journal; a batch that finished
        beyond it before a crash is found ``gone`` on resume.

        Deletions in agent folders are not fsynced one by one (a folder fsync
        per agent would cost more than the deletions): :func:`os.sync` runs
        once at the end, before the caller writes the receipt. A power cut
        before then can bring a deleted file back; it is still expired, so
        the next purge deletes it again.
        """
        done = journal.outcomes()
        total = journal.total
        _empty_trash(self.governance_dir / EXPORTS_DIR)
        fd = journal.open_progress()
        window: deque[tuple[Unit, Future[tuple[bytes, list[str]]] | None]] = deque()
        position = 0
        deleted_before = sum(tally.deleted.values())

        def record(unit: Unit, future: Future[tuple[bytes, list[str]]] | None) -> None:
            nonlocal position
            entries = [e for _agent, _kind, batch in unit for e in batch]
            if future is not None:
                outcomes, errors = future.result()
                write_all(fd, outcomes)
                tally.errors.extend(errors[: max(0, 20 - len(tally.errors))])
                todo = [e for e in entries if e.n >= len(done)]
                for i, entry in enumerate(todo):
                    tally.add(entry, outcomes[i : i + 1])
            for entry in entries:
                if entry.n < len(done):
                    tally.add(entry, done[entry.n : entry.n + 1])
            position += len(entries)
            if on_progress is not None:
                on_progress(position, total)

        try:
            with ThreadPoolExecutor(self.workers, thread_name_prefix="gm-purge") as pool:
                for unit in _units(journal.entries()):
                    todo_unit = [
                        (agent, kind, [e for e in batch if e.n >= len(done)])
                        for agent, kind, batch in unit
                    ]
                    busy = any(todo for _a, _k, todo in todo_unit)
                    future = pool.submit(self._apply_unit, todo_unit) if busy else None
                    window.append((unit, future))
                    # Record finished units in order; bound the units in flight.
                    while window and (
                        len(window) > 4 * self.workers
                        or window[0][1] is None
                        or window[0][1].done()
                    ):
                        record(*window.popleft())
                while window:
                    record(*window.popleft())
            if sum(tally.deleted.values()) > deleted_before:
                os.sync()  # every unlink durable before the purge is reported done
        finally:
            for _unit, pending in window:
                if pending is not None:
                    pending.cancel()
            os.close(fd)

    def _apply_unit(self, unit: Unit) -> tuple[bytes, list[str]]:
        """The outcome bytes and error messages of a few batches (on a worker thread)."""
        outcomes = bytearray()
        errors: list[str] = []
        for agent, kind, batch in unit:
            if batch:
                done, failed = self._apply(agent, kind, batch)
                outcomes += done
                errors += failed
        return bytes(outcomes), errors

    def _apply(
        self, agent: str | None, kind: ArtefactKind | None, batch: list[Entry]
    ) -> tuple[bytes, list[str]]:
        """One batch's outcome bytes and error messages."""
        holds = self.holds.active()
        errors: list[str] = []
        if kind is ArtefactKind.CONSENT:
            outcomes = self._consent(batch, holds)
        elif kind is ArtefactKind.AUDIT:
            outcomes = self._audit(batch, errors)
        elif agent is not None:
            outcomes = self._agent(agent, batch, holds)
        else:
            outcomes = b"".join(self._other(e, holds) for e in batch)
        for i, entry in enumerate(batch):
            if outcomes[i : i + 1] == b"e":
                errors.append(f"{entry.path}: could not be deleted")
        return outcomes, errors

    # -- agent folders ---------------------------------------------------

    def _agent(self, agent: str, batch: list[Entry], holds: HoldSet) -> bytes:
        try:
            validate_agent_name(agent)
        except InvalidAgentNameError as exc:
            raise JournalError(f"purge journal names agent {agent!r}: {exc}") from exc
        folder = self.workspace / AGENTS_DIR / agent
        targets = [self._agent_path(entry, agent) for entry in batch]  # refuse before locking
        outcomes = bytearray()
        # One memory at a time (the agent's own, or one subject's), under its folder's lock.
        groups = itertools.groupby(zip(batch, targets, strict=True), key=lambda pair: pair[1][3])
        for partition, group in groups:
            outcomes += self._memory(agent, folder, partition, list(group), holds)
        return bytes(outcomes)

    def _memory(
        self,
        agent: str,
        folder: Path,
        partition: str | None,
        group: list[tuple[Entry, tuple[str, str, FileKind, str | None]]],
        holds: HoldSet,
    ) -> bytes:
        """The outcomes of entries in one memory's folder, deleted under its lock."""
        outcomes = bytearray()
        folders: dict[str, int] = {}  # parent folder -> descriptor, for *at() calls
        try:
            with self._locked(folder, partition, holds.has_subject_holds) as store:
                for entry, (parent, name, kind, _partition) in group:
                    fd = folders.get(parent)
                    if fd is None:
                        fd = folders[parent] = self._open_folder(parent)
                    outcome = b"g" if fd < 0 else _verify(name, entry, fd)
                    if outcome is None:
                        held = holds.for_agent(agent)
                        if not held and store is not None:
                            path = Path(self._root, parent, name)
                            subjects = artefact_subjects(path, kind, store, fd)
                            held = (
                                holds.all_subject_holds()
                                if subjects is None
                                else holds.for_subjects(subjects)
                            )
                        outcome = b"h" if held else _unlink(name, fd)
                    outcomes += outcome
        except (FileNotFoundError, UnsafePathError):
            # The folder is gone (erased meanwhile), or a link stands in its
            # place (or in a subject folder's): nothing is deleted through it.
            return b"g" * len(group)
        finally:
            for fd in folders.values():
                if fd >= 0:
                    os.close(fd)
        return bytes(outcomes)

    @contextmanager
    def _locked(
        self, folder: Path, partition: str | None, read_subjects: bool
    ) -> Iterator[AgentStore | None]:
        """Hold the lock every store of the memory takes: the agent folder's, or the subject's.

        When files must be read for their subjects, the memory's store takes it
        (it decrypts encrypted files under its own lock); otherwise the bare
        folder lock does, without building a store per agent.
        """
        own = folder if partition is None else folder / SUBJECTS_DIR / partition
        if read_subjects:
            if not own.is_dir() and not own.is_symlink():  # a link: the store refuses it
                raise FileNotFoundError(own)
            store = agent_store(folder, self.store_factory)
            try:
                if partition is not None:
                    subs = subject_memories(store)
                    mine = subs.pop(partition, None)
                    for other in subs.values():
                        other.close()
                    if mine is None:
                        raise FileNotFoundError(own)
                    store.close()
                    store = mine
                with store.lock():
                    yield store
            finally:
                store.close()
            return
        lock = FolderLock(own, nofollow=1 if partition is None else 3)
        try:
            with lock.held(create=False):
                yield None
        finally:
            lock.drop()

    def _open_folder(self, parent: str) -> int:
        """A descriptor of the journaled folder ``parent`` (``agents/...``); -1 when it is gone.

        Opened component by component below ``agents/`` without following a
        link: a link planted anywhere in the agent's tree since the plan
        counts as gone, and nothing is deleted through it.
        """
        parts = parent.split("/")
        try:
            return open_beneath(self.workspace / AGENTS_DIR, parts[1:])
        except (FileNotFoundError, NotADirectoryError, UnsafePathError):
            return -1
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return -1
            raise

    def _agent_path(self, entry: Entry, agent: str) -> tuple[str, str, FileKind, str | None]:
        """``(parent folder, file name, kind, subject folder)`` of a journaled agent file.

        The subject folder is None for the agent's own files. Anything else
        than a memory file or archive of the agent or of one of its subject
        memories raises JournalError.
        """
        parts = entry.path.split("/")
        kind: FileKind | None = None
        partition: str | None = None
        if parts[:2] == [AGENTS_DIR, agent]:
            rest = parts[2:]
            if len(rest) >= 3 and rest[0] == SUBJECTS_DIR and is_partition_name(rest[1]):
                partition, rest = rest[1], rest[2:]
            if entry.kind is ArtefactKind.MEMORY and len(rest) == 1:
                kind = classify_agent_file(rest[0])
            elif entry.kind is ArtefactKind.ARCHIVE and len(rest) == 2 and rest[0] == ARCHIVE_DIR:
                kind = archive_kind(rest[1])
        if kind is None or kind.kind is not entry.kind:
            raise _not_purgeable(entry)
        parent, _, name = entry.path.rpartition("/")
        return parent, name, kind, partition

    # -- governance data -------------------------------------------------

    def _other(self, entry: Entry, holds: HoldSet) -> bytes:
        path = self._other_path(entry)
        outcome = _verify(path, entry)
        if outcome is not None:
            return outcome
        if entry.kind is ArtefactKind.EXPORT and holds.has_subject_holds:
            return b"h"  # whose data an export holds is not known: keep it
        if path.is_dir():
            return _remove_tree(path)
        outcome = _unlink(path)
        if outcome == b"d":
            fsync_dir(path.parent)
        return outcome

    def _other_path(self, entry: Entry) -> Path:
        path = self.workspace / entry.path
        name = path.name
        parent = path.parent
        ok = (
            (entry.kind is ArtefactKind.EXPORT and parent == self.governance_dir / EXPORTS_DIR)
            or (
                entry.kind is ArtefactKind.TOMBSTONE
                and parent == self.governance_dir / TOMBSTONES_DIR
                and name.endswith(".json")
            )
            or (
                entry.kind is ArtefactKind.AUDIT
                and parent == self.audit_dir
                and any(k.match(name) for k in AUDIT_FILE_KINDS)
            )
        )
        if not ok or name.startswith("."):
            raise _not_purgeable(entry)
        return path

    def _audit(self, batch: list[Entry], errors: list[str]) -> bytes:
        """Old segments, removed by the audit log itself (oldest first, chain recorded)."""
        paths = [self._other_path(entry) for entry in batch]
        outcome = {p.name: _verify(p, e) for p, e in zip(paths, batch, strict=True)}
        wanted = [name for name, o in outcome.items() if o is None]
        if wanted:
            if self.audit_purger is None:
                errors.append(
                    "audit segments can only be removed through the audit log; configure the "
                    "audit key (GOVERNED_MEMORY_AUDIT_KEY) so the purge is recorded in its chain"
                )
                return b"e" * len(batch)
            try:
                removed = set(self.audit_purger(wanted))
            except (GovernedMemoryError, OSError) as exc:
                errors.append(f"audit segments {wanted}: {exc}")
                removed = set()
            for name in wanted:
                outcome[name] = b"d" if name in removed else b"e"
        return b"".join(outcome[p.name] or b"e" for p in paths)

    def _consent(self, batch: list[Entry], holds: HoldSet) -> bytes:
        registry = ConsentRegistry(self.governance_dir, sealing=self.sealing)
        log = registry.path
        wanted: set[str] = set()
        for entry in batch:
            base, _, digest = entry.path.rpartition("#")
            if (self.workspace / base) != log or not digest:
                raise _not_purgeable(entry)
            wanted.add(digest)
        # Under the registry's lock: a grant made meanwhile is kept, and a
        # subject hold placed since the plan keeps its records.
        done = registry.remove(
            wanted, keep=lambda event: event is not None and event.subject in holds.subjects
        )
        outcome = {
            d: b"d" if d in done.removed else b"h" if d in done.kept else b"g" for d in wanted
        }
        return b"".join(outcome[e.path.rpartition("#")[2]] for e in batch)


def _units(entries: Iterable[Entry]) -> Iterator[Unit]:
    """Consecutive batches grouped into units of about :data:`UNIT_ENTRIES` entries.

    A batch is one agent folder, the consent log or the audit log; a unit is
    what one worker applies in one go (handing each small agent to a thread
    separately would cost more than deleting its files).
    """
    unit: Unit = []
    size = 0
    for (agent, kind), group in itertools.groupby(entries, key=_batch_key):
        batch = list(group)
        unit.append((agent, kind, batch))
        size += len(batch)
        if size >= UNIT_ENTRIES:
            yield unit
            unit, size = [], 0
    if unit:
        yield unit


def _batch_key(entry: Entry) -> tuple[str | None, ArtefactKind | None]:
    """Entries applied together: one agent folder, the consent log, the audit log."""
    special = entry.kind if entry.kind in (ArtefactKind.CONSENT, ArtefactKind.AUDIT) else None
    return entry.agent, special


def _not_purgeable(entry: Entry) -> JournalError:
    return JournalError(
        f"purge journal entry {entry.n} names {entry.path!r} as a {entry.kind.value}, which is "
        "not a purgeable artefact there; the journal is damaged or was edited. Remove "
        "<governance>/purge/journal.jsonl to discard the interrupted purge"
    )


def _verify(path: str | Path, entry: Entry, dir_fd: int | None = None) -> bytes | None:
    """``g`` or ``c`` when the planned file is no longer there as planned; else None."""
    try:
        st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return b"g"
    except OSError:
        return b"e"
    if (st.st_ino, st.st_mtime_ns) != entry.ident:
        return b"c"
    return None


def _unlink(path: str | Path, dir_fd: int | None = None) -> bytes:
    try:
        os.unlink(path, dir_fd=dir_fd)
    except FileNotFoundError:
        return b"g"
    except OSError:
        return b"e"
    return b"d"


def _remove_tree(path: Path) -> bytes:
    """Rename a folder out of sight (atomic), then delete it; a crash leaves only trash."""
    trash = path.with_name(f"{TRASH_PREFIX}{secrets.token_hex(8)}")
    try:
        os.rename(path, trash)
        fsync_dir(path.parent)
        shutil.rmtree(trash)
    except FileNotFoundError:
        return b"g"
    except OSError:
        return b"e"
    return b"d"


def _empty_trash(folder: Path) -> None:
    try:
        names: Iterable[str] = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(TRASH_PREFIX):
            shutil.rmtree(folder / name, ignore_errors=True)
