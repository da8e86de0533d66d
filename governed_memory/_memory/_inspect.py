"""Read-only views of a workspace: which agents have memory, and what it holds.

Everything here reads through an :class:`~governed_memory.AgentStore`
(``read_memory``, ``list_archives``, ``read_archive``), so it works on any
store a policy selects, plaintext or encrypted: pass the store factory the
memory is written with (``Governance.store_factory``); the default is the
plaintext store. Nothing is created or written: a store asked to create a
memory file during inspection raises. (The plaintext store does tighten an
agent folder it locks to 0700, as every governed_memory access does.)

An agent is a folder ``<workspace>/agents/<name>`` whose name is a valid
agent name and does not start with ``.``; symbolic links are not followed.
Asked for by name, a symbolic link in an agent's place, or one anywhere in
its folder (memory file, ``archive/``, an archive, ``subjects/``, a subject
folder), is refused with :class:`~governed_memory._errors.UnsafePathError`
naming it: nothing is read or printed through it.

Subject memories (``isolation = "subject"``: one memory per data subject
inside the agent folder, ``AgentStore.subject_stores()``) belong to their
agent: :func:`list_agents` counts them and adds their records, archives and
bytes to the agent's totals; :func:`agent_records` lists their records after
the agent's own, each with its source (``subjects/<p>/MEMORY.md``).

A deployment that keeps its memory in a database has no agent folders: given
``memory=`` (its :class:`~governed_memory.MemoryBackend`, ``Governance.memory_backend``),
:func:`list_agents`, :func:`agent_info` and :func:`agent_records` give the same
views through it, reading only through the stores.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .._base import AGENTS_DIR, MEMORY_FILE, resolve_workspace, validate_agent_name
from .._errors import NotFoundError, StorageError, UnsafePathError
from .._format import Record, parse_memory, record_ids, record_subjects
from .._protocols import MemoryBackend
from .._stores import AgentStore, FileMemoryBackend, PlaintextAgentStore, StoreFactory

__all__ = ["AgentInfo", "StoredRecord", "agent_info", "agent_names", "agent_records", "list_agents"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class AgentInfo:
    """What :func:`list_agents` reports about one agent folder.

    Attributes:
        name: the agent name (the folder name).
        folder: ``<workspace>/agents/<name>``; None for an agent kept in a
            database (:func:`stored_agents`), which has no folder.
        messages: message blocks in the active memories: the agent's own
            MEMORY.md and each subject memory's.
        archives: archive files (one per compaction), the subject memories' included.
        size_bytes: bytes stored of the active memories plus every archive
            (on disk, or in the database's rows; ciphertext when encrypted).
        last_activity: the newest record's timestamp in an active memory,
            else the newest modification time of a memory or an archive;
            None when the folder holds neither. Naive local time, like the
            timestamps in MEMORY.md.
        subject_memories: how many subject memories the agent has
            (``agents/<name>/subjects/<p>/``, ``isolation = "subject"``).
    """

    name: str
    folder: Path | None
    messages: int
    archives: int
    size_bytes: int
    last_activity: _dt.datetime | None
    subject_memories: int = 0

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (paths and times as strings)."""
        return {
            "name": self.name,
            "folder": None if self.folder is None else str(self.folder),
            "messages": self.messages,
            "archives": self.archives,
            "size_bytes": self.size_bytes,
            "last_activity": self.last_activity.isoformat() if self.last_activity else None,
            "subject_memories": self.subject_memories,
        }


@dataclass(frozen=True)
class StoredRecord:
    """One message read back from an agent's memory or one of its archives.

    Attributes:
        record: the parsed block (role, timestamp, content, metadata).
        source: the file it came from, relative to the agent folder:
            ``MEMORY.md`` or ``archive/history_<ts>.md``, and for a subject
            memory's records ``subjects/<p>/MEMORY.md`` or
            ``subjects/<p>/archive/history_<ts>.md``.
        archived: whether it came from an archive.
        id: the record id a rectification names it by (``rec-`` and 16 hex
            digits, docs/rectification.md); None for a record without a subject.
    """

    record: Record
    source: str
    archived: bool
    id: str | None = None

    @property
    def role(self) -> str:
        return self.record.role

    @property
    def timestamp(self) -> str:
        return self.record.timestamp

    @property
    def content(self) -> str:
        return self.record.content

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        data: dict[str, object] = {
            "role": self.role,
            "timestamp": self.timestamp,
            "content": self.content,
            "source": self.source,
            "archived": self.archived,
        }
        if self.record.subject_id is not None:
            data["subject_id"] = self.record.subject_id
        if self.id is not None:
            data["id"] = self.id
        return data


def _read_only_header() -> str:
    raise StorageError(
        "inspection is read-only but the store tried to create a memory file; "
        "this is a bug in the store, please report it"
    )


def _agents_dir(workspace: PathLike | None) -> Path:
    return resolve_workspace(workspace) / AGENTS_DIR


@contextmanager
def _open(folder: Path, factory: StoreFactory | None) -> Iterator[AgentStore]:
    path = folder / MEMORY_FILE
    if factory is None:
        store: AgentStore = PlaintextAgentStore(path, _read_only_header)
    else:
        store = factory(path, _read_only_header)
    try:
        yield store
    finally:
        store.close()


def agent_names(workspace: PathLike | None = None) -> list[str]:
    """Names of the agent folders in ``workspace``, sorted; [] when there are none."""
    return FileMemoryBackend(resolve_workspace(workspace), PlaintextAgentStore).agents()


def _agent_folder(workspace: PathLike | None, agent_name: str) -> Path:
    name = validate_agent_name(agent_name)
    folder = _agents_dir(workspace) / name
    if folder.is_symlink():  # never followed: it could lead out of the workspace
        raise UnsafePathError(folder, "folder")
    if not folder.is_dir():
        raise NotFoundError(
            f"agent {name!r} has no memory in workspace {resolve_workspace(workspace)} "
            f"(no folder {folder}); list the agents there with `governed-memory agents` "
            "(or governed_memory.list_agents()), or point at another workspace with "
            "--workspace / $WORKSPACE_DIR"
        )
    return folder


def _newest_timestamp(records: list[Record]) -> _dt.datetime | None:
    newest: _dt.datetime | None = None
    for record in records:
        try:
            when = _dt.datetime.fromisoformat(record.timestamp.strip())
        except ValueError:
            continue
        if when.tzinfo is not None:  # written by another tool: compare in local time
            when = when.astimezone().replace(tzinfo=None)
        if newest is None or when > newest:
            newest = when
    return newest


def _info(name: str, folder: Path, factory: StoreFactory | None) -> AgentInfo:
    with _open(folder, factory) as agent:
        return _info_of(agent, folder)


def _info_of(agent: AgentStore, folder: Path | None) -> AgentInfo:
    """:class:`AgentInfo` of the agent whose own store is ``agent``, read through the stores."""
    records: list[Record] = []
    archives = 0
    files = []
    stores = _memories(agent)
    try:
        for store in stores:
            text = store.read_memory()
            names = store.list_archives()
            records += parse_memory(text).records if text is not None else []
            archives += len(names)
            files += [store.stat(), *(store.stat(a) for a in names)]
    finally:
        for store in stores[1:]:
            store.close()
    present = [f for f in files if f is not None]
    last = _newest_timestamp(records)
    if last is None and present:
        last = _dt.datetime.fromtimestamp(max(f.modified for f in present))
    return AgentInfo(
        name=agent.agent,
        folder=folder,
        messages=len(records),
        archives=archives,
        size_bytes=sum(f.size for f in present),
        last_activity=last,
        subject_memories=len(stores) - 1,
    )


def _memories(agent: AgentStore) -> list[AgentStore]:
    """The agent's own store, then each of its subject memories (close those)."""
    return [agent, *agent.subject_stores()]


def list_agents(
    workspace: PathLike | None = None,
    *,
    store_factory: StoreFactory | None = None,
    memory: MemoryBackend | None = None,
) -> list[AgentInfo]:
    """Every agent in ``workspace`` with its message, archive and size counts, sorted by name.

    Args:
        workspace: the workspace folder (default: ``$WORKSPACE_DIR``, else
            ``./agent_workspace``). A missing workspace has no agents.
        store_factory: how memory files are read (default: plaintext).
        memory: list the agents this backend keeps instead
            (``Governance.memory_backend``, a database's): read through its
            stores only, sizes as stored, :attr:`AgentInfo.folder` None;
            ``workspace`` and ``store_factory`` are then not used.

    Raises:
        StorageError: a memory file could not be read (e.g. not UTF-8).
    """
    if memory is not None:
        found = []
        for name in memory.agents():
            with _opened(memory, name) as store:
                found.append(_info_of(store, None))
        return found
    agents_dir = _agents_dir(workspace)
    return [_info(name, agents_dir / name, store_factory) for name in agent_names(workspace)]


def agent_info(
    workspace: PathLike | None,
    agent_name: str,
    *,
    store_factory: StoreFactory | None = None,
    memory: MemoryBackend | None = None,
) -> AgentInfo:
    """:class:`AgentInfo` of one agent (of ``memory`` when given, as :func:`list_agents`).

    Raises:
        InvalidAgentNameError: ``agent_name`` is not a valid folder name.
        NotFoundError: the workspace has no folder for ``agent_name``.
        UnsafePathError: the agent's folder, or a file or folder in it, is a symbolic link.
    """
    if memory is not None:
        with _opened(memory, agent_name) as store:
            return _info_of(store, None)
    folder = _agent_folder(workspace, agent_name)
    return _info(folder.name, folder, store_factory)


def agent_records(
    workspace: PathLike | None,
    agent_name: str,
    *,
    include_archives: bool = False,
    store_factory: StoreFactory | None = None,
    subject_id: str | None = None,
    memory: MemoryBackend | None = None,
) -> list[StoredRecord]:
    """The records of one agent's memory, oldest first, then each subject memory's.

    Args:
        workspace: the workspace folder (None: ``$WORKSPACE_DIR``, else
            ``./agent_workspace``).
        agent_name: the agent.
        include_archives: also return the records of every archive, each
            archive's before the active memory's (archives are named by
            compaction time, so this is chronological per memory).
        store_factory: how memory files are read (default: plaintext).
        subject_id: only this subject's records: its subject memory's, and
            the records of the agent's own memory that name it (as their
            subject or in a summary's lineage).
        memory: read the agent from this backend instead (as :func:`list_agents`).

    Raises:
        InvalidAgentNameError: ``agent_name`` is not a valid folder name.
        NotFoundError: the workspace has no folder for ``agent_name``.
        UnsafePathError: the agent's folder, or a file or folder in it, is a symbolic link.
        StorageError: a file could not be read.
    """
    if memory is not None:
        with _opened(memory, agent_name) as agent:
            return _records_of(agent, include_archives, subject_id)
    folder = _agent_folder(workspace, agent_name)
    with _open(folder, store_factory) as agent:
        return _records_of(agent, include_archives, subject_id)


def _records_of(
    agent: AgentStore, include_archives: bool, subject_id: str | None
) -> list[StoredRecord]:
    """What :func:`agent_records` returns, read from the agent's own store ``agent``."""
    found: list[StoredRecord] = []
    subjects = agent.subject_stores()
    try:
        if subject_id is not None:
            mine = _subject_memory(agent, subjects, subject_id)
            own = _records(agent, include_archives)
            found += [r for r in own if subject_id in record_subjects(r.record)]
            if mine is not None:
                found += _records(mine, include_archives)
            return found
        for store in [agent, *subjects]:
            found += _records(store, include_archives)
    finally:
        for store in subjects:
            store.close()
    return found


@contextmanager
def _opened(memory: MemoryBackend, agent_name: str) -> Iterator[AgentStore]:
    """The own store of ``agent_name`` in ``memory`` (NotFoundError when it has none)."""
    name = validate_agent_name(agent_name)
    if not memory.has_agent(name):
        raise NotFoundError(
            f"agent {name!r} has no memory in {memory!r}; list the agents there with "
            "`governed-memory agents` (or governed_memory.list_agents(memory=...))"
        )
    store = memory.open(name, _read_only_header)
    try:
        yield store
    finally:
        store.close()


def _subject_memory(
    agent: AgentStore, subjects: Sequence[AgentStore], subject_id: str
) -> AgentStore | None:
    """``subject_id``'s memory among the agent's ``subjects`` (None: it has none)."""
    if not subjects or not subject_id:
        return None  # no subject memory at all: naming one could create a keyring
    wanted = agent.subject_store(subject_id)
    try:
        return next((s for s in subjects if s.partition == wanted.partition), None)
    finally:
        wanted.close()


def _records(store: AgentStore, include_archives: bool) -> list[StoredRecord]:
    """The records of one memory (its archives' first, when asked), with their sources."""
    found: list[StoredRecord] = []
    if include_archives:
        for archive in store.list_archives():
            source = store.source(archive)
            records = parse_memory(store.read_archive(archive)).records
            found += _stored(store, records, source, archived=True)
    text = store.read_memory()
    if text is not None:
        found += _stored(store, parse_memory(text).records, store.source(), archived=False)
    return found


def _stored(
    store: AgentStore, records: list[Record], source: str, *, archived: bool
) -> list[StoredRecord]:
    """One file's records with their sources and record ids."""
    ids = record_ids(store.agent, records)
    return [
        StoredRecord(record, source, archived=archived, id=rid)
        for record, rid in zip(records, ids, strict=True)
    ]
