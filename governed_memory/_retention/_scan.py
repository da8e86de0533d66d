"""One pass over a workspace, producing the planner's :class:`WorkspaceState`.

The scan is lazy and streams: agents are read one folder at a time (sorted by
name, so plans are reproducible), and nothing but names and ``stat`` results
is kept. File contents are read only when a subject hold exists, since only
then does it matter whose records a file holds.

Subject memories (``agents/<agent>/subjects/<p>/``, ``isolation = "subject"``)
are scanned like the agent's own folder, each as an :class:`AgentState` of its
agent with its ``partition`` set; their artefacts are named by their
workspace-relative paths (``agents/A/subjects/<p>/archive/history_...``). Only
folders under ``subjects/`` with a subject folder's name are memories; the
scan never takes one for an agent.

Symbolic links in an agent's folder tree are never followed: a link in an
agent's, ``subjects/``'s, a subject folder's, ``archive/``'s or a file's place
is not listed, so its target is never aged (nor, then, deleted). The scan
checks names with ``lstat``; that check may race with a link planted
meanwhile, which is why the executor opens every folder again without
following a link and checks each file's identity before it deletes.

Times: an archive's age comes from the timestamp in its name
(``history_<ts>``), which survives copies and restores from backup; a file
whose name carries no valid time falls back to its mtime. Active memory is
aged by its mtime (the last write), exports and audit segments by their
mtime, consent records and tombstones by the time recorded inside them.
"""

from __future__ import annotations

import datetime as _dt
import operator
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .._base import (
    AGENTS_DIR,
    ARCHIVE_DIR,
    AUDIT_DIR,
    AUDIT_FILE_KINDS,
    EXPORTS_DIR,
    MEMORY_FILE,
    TMP_PREFIX,
    TOMBSTONES_DIR,
    ArtefactKind,
    FileKind,
    classify_agent_file,
    classify_archive,
    read_at,
)
from .._crypto import RecordSealing
from .._errors import GovernedMemoryError, UnsafePathError
from .._format import subjects_in_text
from .._records import ConsentRegistry, HoldSet, TombstoneStore
from .._stores import (
    SUBJECTS_DIR,
    AgentStore,
    PlaintextAgentStore,
    StoreFactory,
    is_partition_name,
)
from ._state import AgentState, Artefact, WorkspaceState

if TYPE_CHECKING:
    from .._audit import SegmentInfo

__all__ = [
    "agent_store",
    "artefact_subjects",
    "consent_artefacts",
    "local_time",
    "naive_time",
    "scan_workspace",
    "subject_memories",
]


def local_time(epoch: float) -> _dt.datetime:
    """An mtime as naive local time (the clock's convention)."""
    return _dt.datetime.fromtimestamp(epoch)


def naive_time(iso: str) -> _dt.datetime:
    """An ISO time from a record, as naive local time."""
    when = _dt.datetime.fromisoformat(iso)
    return when.astimezone().replace(tzinfo=None) if when.tzinfo is not None else when


def _no_header() -> str:  # a store built for reading never creates a memory file
    return ""


def agent_store(folder: Path, factory: StoreFactory | None) -> AgentStore:
    """The store of the agent in ``folder`` (plaintext unless ``factory`` says otherwise)."""
    if factory is None:
        return PlaintextAgentStore(folder / MEMORY_FILE, _no_header)
    return factory(folder / MEMORY_FILE, _no_header)


def subject_memories(store: AgentStore) -> dict[str, AgentStore]:
    """The subject memories of the agent ``store``, by subject folder name (close each).

    The storage seam opens a subject's memory by subject id, which a scan of
    folder names does not know; ``subject_stores()`` lists them all at once.
    """
    return {str(s.partition): s for s in store.subject_stores()}


def _named_by(store: AgentStore, path: Path, archive_id: str | None) -> bool:
    """Whether ``path`` is the file ``store.source(archive_id)`` names (its last parts)."""
    source = store.source(archive_id).split("/")
    return list(path.parts[-len(source) :]) == source


def artefact_subjects(
    path: Path, kind: FileKind, store: AgentStore | None, dir_fd: int | None = None
) -> frozenset[str] | None:
    """The subjects of a memory file or archive (records and lineage); None if unreadable.

    Plaintext is read directly, never through a link (relative to ``dir_fd``,
    the open folder of ``path``, when given). Encrypted files are read through
    ``store`` (the encrypted store decrypts); without one, or when decryption
    fails, the answer is None and holds treat the file as possibly the subject's.
    """
    try:
        if not kind.encrypted:
            name = path.name if dir_fd is not None else os.fspath(path)
            data = read_at(dir_fd, name, path)
            text = data.decode("utf-8", errors="replace")
        elif store is None or not _reads_encrypted(store):
            return None
        elif kind.kind is ArtefactKind.MEMORY:
            if not _named_by(store, path, None):
                return None
            text = store.read_memory() or ""
        else:
            archive_id = Path(path.name).stem  # classify_archive checked the name
            if not _named_by(store, path, archive_id):
                return None  # not a file of this store's kind, or of another memory
            text = store.read_archive(archive_id)
    except FileNotFoundError:
        return frozenset()
    except (OSError, GovernedMemoryError):
        return None
    # Each record's subject and each summary's lineage: a summary is the data of
    # every subject it was derived from, so a hold on any of them keeps the file.
    # (Default mode: no metadata line, no subject; the text is not parsed.)
    return frozenset(subjects_in_text(text))


def _reads_encrypted(store: AgentStore) -> bool:
    """Whether ``store`` is an encrypted store (its own memory file is of an encrypted kind)."""
    own = classify_agent_file(store.source().rsplit("/", 1)[-1])  # a subject's: subjects/<p>/...
    return own is not None and own.encrypted


def scan_workspace(
    workspace: Path,
    *,
    governance_dir: Path,
    audit_dir: Path | None = None,
    holds: HoldSet | None = None,
    store_factory: StoreFactory | None = None,
    sealing: RecordSealing | None = None,
) -> WorkspaceState:
    """Describe ``workspace`` for the planner (lazily: the disk is read while iterating).

    Args:
        governance_dir: where consent, tombstones and exports live.
        audit_dir: the audit log's folder (default ``<governance_dir>/audit``).
        holds: the holds in force; files are read for subjects only when one
            of them is a subject hold.
        store_factory: builds agent stores to read encrypted files.
        sealing: opens sealed consent records and tombstones (encrypted workspaces).
    """
    holds = holds or HoldSet()
    read = holds.has_subject_holds
    return WorkspaceState(
        agents=_agents(Path(workspace), read, store_factory),
        others=_others(
            Path(workspace),
            Path(governance_dir),
            audit_dir or Path(governance_dir) / AUDIT_DIR,
            sealing,
        ),
        holds=holds,
    )


def _rel(workspace: Path, path: Path) -> str:
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)


def _entries(folder: str | Path, *, hidden: bool = False) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` by name; hidden ones only with ``hidden``, never temporaries."""
    try:
        with os.scandir(folder) as it:
            entries = [
                e
                for e in it
                if not e.name.startswith(TMP_PREFIX if hidden else ".")  # never temporaries
            ]
    except (FileNotFoundError, NotADirectoryError):
        return []
    entries.sort(key=_NAME)
    return entries


_NAME = operator.attrgetter("name")


def _agents(
    workspace: Path, read_subjects: bool, factory: StoreFactory | None
) -> Iterator[AgentState]:
    # Hidden names included: ".hidden" is a valid agent name, and its files age like any.
    root = workspace / AGENTS_DIR
    for entry in _entries(root, hidden=True):
        if entry.is_dir(follow_symlinks=False):
            yield from _agent(Path(entry.path), entry.name, read_subjects, factory)


def _agent(
    folder: Path, name: str, read_subjects: bool, factory: StoreFactory | None
) -> Iterator[AgentState]:
    """The agent's own memory, then each of its subject memories (by folder name)."""
    base = f"{AGENTS_DIR}/{name}/"
    store = agent_store(folder, factory) if read_subjects else None
    subs: dict[str, AgentStore] = {}
    try:
        yield _memory(folder, base, name, None, store)
        # A link named subjects/ is never listed (its target is not aged).
        subjects = folder / SUBJECTS_DIR
        entries = [] if subjects.is_symlink() else _entries(subjects)
        if store is not None and entries:
            try:
                subs = subject_memories(store)
            except UnsafePathError:
                return  # a subject folder is a link: none of this agent's is read or aged
        for entry in entries:
            if not is_partition_name(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue  # not a subject memory: never an artefact
            partition = entry.name
            sub = subs.pop(partition, None)
            if store is not None and sub is None:
                continue  # removed since listed (an erasure)
            try:
                where = f"{base}{SUBJECTS_DIR}/{partition}/"
                yield _memory(Path(entry.path), where, name, partition, sub)
            finally:
                if sub is not None:
                    sub.close()
    finally:
        for sub in subs.values():
            sub.close()
        if store is not None:
            store.close()


def _memory(
    folder: Path, base: str, name: str, partition: str | None, store: AgentStore | None
) -> AgentState:
    """The memory file(s) and archives in ``folder`` (the agent's, or one subject's)."""
    subjects: Callable[[str, FileKind], frozenset[str] | None] = (
        (lambda p, k: artefact_subjects(Path(p), k, store))
        if store is not None
        else (lambda p, k: None)  # no subject hold: no file is read
    )
    memory: list[Artefact] = []
    archives: list[Artefact] = []
    for entry in _entries(folder):
        if entry.name == ARCHIVE_DIR and entry.is_dir(follow_symlinks=False):
            for item in _entries(entry.path):
                found = classify_archive(item.name)
                if found is None or not item.is_file(follow_symlinks=False):
                    continue
                kind, named_at = found
                st = item.stat(follow_symlinks=False)
                archives.append(
                    Artefact(
                        ArtefactKind.ARCHIVE,
                        f"{base}{ARCHIVE_DIR}/{item.name}",
                        st.st_size,
                        local_time(st.st_mtime),
                        named_at,
                        name,
                        subjects(item.path, kind),
                        ident=(st.st_ino, st.st_mtime_ns),
                    )
                )
            continue
        file_kind = classify_agent_file(entry.name)
        if file_kind is None or not entry.is_file(follow_symlinks=False):
            continue
        st = entry.stat(follow_symlinks=False)
        memory.append(
            Artefact(
                ArtefactKind.MEMORY,
                base + entry.name,
                st.st_size,
                local_time(st.st_mtime),
                None,
                name,
                subjects(entry.path, file_kind),
                ident=(st.st_ino, st.st_mtime_ns),
            )
        )
    return AgentState(name, tuple(memory), tuple(archives), partition)


def _others(
    workspace: Path, governance: Path, audit: Path, sealing: RecordSealing | None
) -> Iterator[Artefact]:
    yield from _exports(workspace, governance / EXPORTS_DIR)
    yield from _tombstones(workspace, governance, sealing)
    yield from _consent(workspace, governance, sealing)
    yield from _audit(workspace, audit)


def _tree_size(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                continue
    return total


def _exports(workspace: Path, folder: Path) -> Iterator[Artefact]:
    for entry in _entries(folder):
        if entry.is_symlink():
            continue
        st = entry.stat(follow_symlinks=False)
        size = _tree_size(Path(entry.path)) if entry.is_dir() else st.st_size
        yield Artefact(
            ArtefactKind.EXPORT,
            _rel(workspace, Path(entry.path)),
            size,
            local_time(st.st_mtime),
            ident=(st.st_ino, st.st_mtime_ns),
        )


def _tombstones(
    workspace: Path, governance: Path, sealing: RecordSealing | None
) -> Iterator[Artefact]:
    store = TombstoneStore(governance, sealing=sealing)  # reads sealed ones too
    for entry in _entries(governance / TOMBSTONES_DIR):
        if not entry.name.endswith(".json") or not entry.is_file(follow_symlinks=False):
            continue
        st = entry.stat(follow_symlinks=False)
        completed: _dt.datetime | None = None
        try:
            data = store.document(entry.name[: -len(".json")])
            if isinstance(data, dict) and data.get("state") == "complete":
                completed = naive_time(str(data["completed_at"]))
        except (OSError, ValueError, KeyError, TypeError):
            completed = None  # unreadable: kept, never guessed
        yield Artefact(
            ArtefactKind.TOMBSTONE,
            _rel(workspace, Path(entry.path)),
            st.st_size,
            local_time(st.st_mtime),
            completed,
            current=completed is None,  # a pending erasure still needs it
            ident=(st.st_ino, st.st_mtime_ns),
        )


def _consent(
    workspace: Path, governance: Path, sealing: RecordSealing | None
) -> Iterator[Artefact]:
    registry = ConsentRegistry(governance, sealing=sealing)
    return consent_artefacts(registry, _rel(workspace, registry.path))


def consent_artefacts(registry: ConsentRegistry, base: str) -> Iterator[Artefact]:
    """The registry's consent records, named ``<base>#<record id>``; the latest grant of a pair is current.

    Read through the registry (:meth:`ConsentRegistry.records`): a record it
    cannot read (damaged, sealed and unopenable) is never offered for deletion.
    Aged by the time recorded in the record, on every backend.
    """
    records = registry.records()
    latest: dict[tuple[str, str], int] = {}
    for number, record in enumerate(records):
        if record.event is not None:
            latest[(record.event.subject, record.event.purpose)] = number
    for number, record in enumerate(records):
        event = record.event
        if event is None:
            continue
        try:
            at = naive_time(event.at)
        except ValueError:
            continue  # an unreadable record is never deleted
        in_force = latest[(event.subject, event.purpose)] == number and event.granted
        yield Artefact(
            ArtefactKind.CONSENT,
            f"{base}#{record.id}",
            record.size,
            at,
            at,
            subjects=frozenset({event.subject}),
            current=in_force,
        )


def _audit(workspace: Path, folder: Path) -> Iterator[Artefact]:
    """Audit segments, oldest first; the newest (where entries are appended) is current.

    A segment's age is the time of its last entry (it holds nothing newer),
    its mtime when that entry cannot be read.
    """
    from .._audit import list_segments

    segments = [
        s
        for s in list_segments(folder)
        if any(k.match(s.name) for k in AUDIT_FILE_KINDS) and s.path.is_file()
    ]
    for number, segment in enumerate(segments):
        try:
            st = segment.path.stat()
        except FileNotFoundError:
            continue
        yield Artefact(
            ArtefactKind.AUDIT,
            _rel(workspace, segment.path),
            st.st_size,
            local_time(st.st_mtime),
            _last_entry_time(segment),
            current=number == len(segments) - 1 or segment.first_seq is None,
            ident=(st.st_ino, st.st_mtime_ns),
        )


def _last_entry_time(segment: SegmentInfo) -> _dt.datetime | None:
    try:
        entry = segment.last_entry()
    except OSError:
        return None
    return entry.time.astimezone().replace(tzinfo=None) if entry is not None else None
