"""Retention on a deployment that keeps no files (a database): scan and execute through the seam.

The planner (``_plan``), the holds and the journal's entries are those of the
file backend; what differs is where the state is read and how an artefact is
deleted. :func:`scan_deployment` reads the agents through the memory backend
(``Governance.memory_backend``: archive ids and their times, the active
memory's ``stat().modified`` for idle memory), consent records and tombstones
through their registries on the record place, and audit segments through the
audit storage (``expired_segments``). :class:`StoreExecutor` applies a
:class:`StoredJournal` (a :class:`~governed_memory._protocols.PurgeJournal`, the
database's ``purge_plans`` rows) entry by entry:

* an archive or idle memory is deleted by its store (``delete_archive``,
  ``delete_memory``) inside the store's lock, after checking that it is
  still there as planned (the same stored time: ``c`` when written since)
  and that no hold covers it now: a hold placed on any host since the plan
  is in the database and still wins (``h``);
* consent records go by one rewrite of the consent log under its lock;
* a completed erasure's tombstone by deleting its document;
* audit segments by ``purge_segments``, which records the removal in the
  chain first.

Artefacts are named as the file backend names them (``agents/<a>/archive/
history_<ts>.md``, ``consent.jsonl#<id>``, ``tombstones/<id>.json``,
``audit/<segment>``), so plans and receipts read the same on both. The
``ident`` of a stored artefact is ``(0, stored time in microseconds)``.
Exports are folders an operator wrote somewhere (``export --out``): a
database deployment keeps none, so none is scanned; ``exports_max_age`` is
applied by naming the overdue ones from their receipts (``_exports``,
``PurgeReport.unmanaged_exports``), for the operator to delete.
"""

from __future__ import annotations

import datetime as _dt
import functools
import itertools
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._base import ARCHIVE_DIR, TOMBSTONES_DIR, ArtefactKind, classify_archive
from .._errors import GovernedMemoryError, JournalError, StorageError
from .._format import subjects_in_text
from .._records import ConsentRegistry, HoldSet, TombstoneStore, check_version
from .._stores import ENCRYPTED_SUFFIX, SUBJECTS_DIR, is_partition_name
from ._journal import _KINDS, _RULES, JOURNAL_FORMAT_VERSION, Entry
from ._scan import consent_artefacts, local_time, naive_time, subject_memories
from ._state import AgentState, Artefact, WorkspaceState

if TYPE_CHECKING:
    from .._crypto import RecordSealing
    from .._policy import RetentionPolicy
    from .._protocols import AgentStore, AuditStorage, MemoryBackend, PurgeJournal, RecordPlace
    from .._records import HoldRegistry
    from ._execute import Tally

__all__ = ["AUDIT_PREFIX", "StoreExecutor", "StoredJournal", "scan_deployment"]

AUDIT_PREFIX = "audit/"
CONSENT_NAME = "consent.jsonl"
Progress = Callable[[int, int], None]


@runtime_checkable
class _Purgeable(Protocol):
    """What a store offers retention beyond the seam's ``AgentStore`` (PgAgentStore has both)."""

    def delete_archive(self, archive_id: str) -> bool: ...

    def delete_memory(self) -> bool: ...


def _no_header() -> str:  # a store opened for retention never creates a memory
    return ""


def _ident(modified: float) -> tuple[int, int]:
    return (0, round(modified * 1_000_000))


# -- the scan ----------------------------------------------------------------


def scan_deployment(
    backend: MemoryBackend,
    place: RecordPlace,
    *,
    audit: AuditStorage | None,
    retention: RetentionPolicy,
    now: _dt.datetime,
    holds: HoldSet | None = None,
    sealing: RecordSealing | None = None,
) -> WorkspaceState:
    """The deployment as the planner sees it at ``now`` (lazy: read while iterated).

    Args:
        backend: lists and opens the agents (their stores read encrypted memory).
        place: the record place of consent and tombstones.
        audit: the audit storage; None when audit is off (no segment is listed).
        retention: only the audit segments ``expired_segments`` names at ``now``
            under its ages are listed (reading every segment to age it would
            read the whole chain).
        holds: the holds in force; memories are read for their subjects only
            when one of them is a subject hold.
        sealing: opens sealed consent records and tombstones.
    """
    holds = holds or HoldSet()
    return WorkspaceState(
        agents=_agents(backend, holds.has_subject_holds),
        others=itertools.chain(
            _tombstones(place, sealing),
            _consent(place, sealing),
            _audit(audit, retention, now),
        ),
        holds=holds,
    )


def _agents(backend: MemoryBackend, read: bool) -> Iterator[AgentState]:
    for name in backend.agents():
        store = backend.open(name, _no_header)
        try:
            yield _memory(store, name, None, read)
            for sub in store.subject_stores():
                try:
                    yield _memory(sub, name, sub.partition, read)
                finally:
                    sub.close()
        finally:
            store.close()


def _subjects(read: Callable[[], str | None]) -> frozenset[str] | None:
    try:
        return frozenset(subjects_in_text(read() or ""))
    except GovernedMemoryError:
        return None  # unreadable: a subject hold keeps it


def _memory(store: AgentStore, name: str, partition: str | None, read: bool) -> AgentState:
    base = f"agents/{name}/"
    memory: list[Artefact] = []
    info = store.stat()
    if info is not None:
        memory.append(
            Artefact(
                ArtefactKind.MEMORY,
                base + store.source(),
                info.size,
                local_time(info.modified),
                None,
                name,
                _subjects(store.read_memory) if read else None,
                ident=_ident(info.modified),
            )
        )
    archives: list[Artefact] = []
    for archive_id in store.list_archives():
        info = store.stat(archive_id)
        if info is None:
            continue  # removed since listed
        source = store.source(archive_id)
        found = classify_archive(source.rsplit("/", 1)[-1])
        archives.append(
            Artefact(
                ArtefactKind.ARCHIVE,
                base + source,
                info.size,
                local_time(info.modified),
                found[1] if found is not None else None,
                name,
                _subjects(functools.partial(store.read_archive, archive_id)) if read else None,
                ident=_ident(info.modified),
            )
        )
    return AgentState(name, tuple(memory), tuple(archives), partition)


def _tombstones(place: RecordPlace, sealing: RecordSealing | None) -> Iterator[Artefact]:
    store = TombstoneStore(place, sealing=sealing)
    for erasure_id in store.ids():
        name = f"{TOMBSTONES_DIR}/{erasure_id}.json"
        _mark, raw = place.read_document(name, None)
        if raw is None:
            continue  # removed since listed
        completed: _dt.datetime | None = None
        try:
            data = store.document(erasure_id)
            if isinstance(data, dict) and data.get("state") == "complete":
                completed = naive_time(str(data["completed_at"]))
        except (GovernedMemoryError, ValueError, KeyError, TypeError):
            completed = None  # unreadable: kept, never guessed
        when = completed or _dt.datetime.max  # a pending one is current: never aged
        yield Artefact(
            ArtefactKind.TOMBSTONE,
            name,
            len(raw),
            when,
            completed,
            current=completed is None,  # a pending erasure still needs it
        )


def _consent(place: RecordPlace, sealing: RecordSealing | None) -> Iterator[Artefact]:
    return consent_artefacts(ConsentRegistry(place, sealing=sealing), CONSENT_NAME)


def _audit(
    audit: AuditStorage | None, retention: RetentionPolicy, now: _dt.datetime
) -> Iterator[Artefact]:
    """The segments expired at ``now`` (never the newest), aged by their newest entry."""
    if audit is None or retention.audit_max_age is None:
        return
    aware = now if now.tzinfo is not None else now.astimezone()
    names = audit.expired_segments(
        now=aware, max_age=retention.audit_max_age, min_age=retention.audit_min_age
    )
    for name in names:
        try:
            entries = audit.segment_entries(name)
        except GovernedMemoryError:
            continue  # purged meanwhile
        if not entries:
            continue
        last = entries[-1].to_dict()
        when = naive_time(str(last["ts"]))
        size = sum(len(json.dumps(e.to_dict())) + 1 for e in entries)
        yield Artefact(ArtefactKind.AUDIT, AUDIT_PREFIX + name, size, when, when)


# -- the journal ---------------------------------------------------------------


class StoredJournal:
    """A complete purge plan kept in a :class:`PurgeJournal`, with its progress.

    What :class:`~._journal.Journal` is for the file backend. Raises on open:
    ``FormatVersionError`` (another format version) or :class:`JournalError`.
    """

    def __init__(self, storage: PurgeJournal) -> None:
        self.storage = storage
        self.footer: dict[str, Any] = storage.read_footer()
        self.header: dict[str, Any] = check_version(
            storage.read_header(),
            JOURNAL_FORMAT_VERSION,
            f"purge journal {storage!r}",
            fix="finish it with the release that wrote it, or remove it to discard that purge",
        )

    @classmethod
    def find(cls, storage: PurgeJournal) -> StoredJournal | None:
        """The unfinished plan in ``storage``, or None."""
        return cls(storage) if storage.pending() else None

    @property
    def total(self) -> int:
        return int(self.footer["end"])

    def outcomes(self) -> bytes:
        return self.storage.outcomes()

    def entries(self) -> Iterator[Entry]:
        for number, raw in enumerate(self.storage.read_entries()):
            try:
                n, kind, path, rule, size, agent, ino, mtime = raw
                entry = Entry(n, _KINDS[kind], path, _RULES[rule], size, agent, (ino, mtime))
            except (ValueError, TypeError, KeyError) as exc:
                raise JournalError(
                    f"purge journal {self.storage!r} entry {number} is damaged ({exc}); remove "
                    "the journal to discard the interrupted purge"
                ) from exc
            if n != number:
                raise JournalError(f"purge journal {self.storage!r} is out of order at entry {n}")
            yield entry

    def remove(self) -> None:
        self.storage.remove()


# -- the executor ----------------------------------------------------------------


class StoreExecutor:
    """Applies a :class:`StoredJournal` through the stores, the registries and the audit storage.

    Args:
        backend: opens the agents' stores.
        place: the record place (consent log, tombstones).
        holds: consulted again before each deletion.
        audit: removes old segments (recording it in the chain); None: audit
            entries fail (``e``).
        sealing: opens sealed consent records.
    """

    def __init__(
        self,
        backend: MemoryBackend,
        place: RecordPlace,
        holds: HoldRegistry,
        audit: AuditStorage | None = None,
        sealing: RecordSealing | None = None,
    ) -> None:
        self.backend = backend
        self.place = place
        self.holds = holds
        self.audit = audit
        self.sealing = sealing

    def run(
        self, journal: StoredJournal, tally: Tally, on_progress: Progress | None = None
    ) -> None:
        """Apply every entry not done yet, batch by batch, recording outcomes in entry order."""
        done = journal.outcomes()
        total = journal.total
        position = 0
        for _key, group in itertools.groupby(journal.entries(), key=_batch_key):
            batch = list(group)
            for entry in batch:
                if entry.n < len(done):
                    tally.add(entry, done[entry.n : entry.n + 1])
            todo = [e for e in batch if e.n >= len(done)]
            if todo:
                outcomes = self._apply(todo, tally.errors)
                journal.storage.record(outcomes)
                for i, entry in enumerate(todo):
                    tally.add(entry, outcomes[i : i + 1])
            position += len(batch)
            if on_progress is not None:
                on_progress(position, total)

    def _apply(self, batch: list[Entry], errors: list[str]) -> bytes:
        holds = self.holds.active()
        kind = batch[0].kind
        if kind is ArtefactKind.CONSENT:
            outcomes = self._consent(batch, holds)
        elif kind is ArtefactKind.AUDIT:
            outcomes = self._audit(batch, errors)
        elif kind is ArtefactKind.TOMBSTONE:
            outcomes = b"".join(self._tombstone(e) for e in batch)
        elif kind in (ArtefactKind.MEMORY, ArtefactKind.ARCHIVE):
            outcomes = self._memory(batch, holds)
        else:
            raise _not_purgeable(batch[0])
        for i, entry in enumerate(batch):
            if outcomes[i : i + 1] == b"e" and len(errors) < 20:
                errors.append(f"{entry.path}: could not be deleted")
        return outcomes

    # -- memories ------------------------------------------------------------

    def _memory(self, batch: list[Entry], holds: HoldSet) -> bytes:
        agent = batch[0].agent
        targets = [_target(entry) for entry in batch]  # refuse a damaged journal before locking
        if agent is None or any(t[0] != agent or t[1] != targets[0][1] for t in targets):
            raise _not_purgeable(batch[0])
        partition = targets[0][1]
        if not self.backend.has_agent(agent):
            return b"g" * len(batch)
        own = self.backend.open(agent, _no_header)
        try:
            store = own
            if partition is not None:
                subs = subject_memories(own)
                mine = subs.pop(partition, None)
                for other in subs.values():
                    other.close()
                if mine is None:
                    return b"g" * len(batch)
                store = mine
            with store.lock():
                outcomes = bytearray()
                for entry, (_a, _p, archive_id) in zip(batch, targets, strict=True):
                    try:
                        outcomes += self._one(store, agent, entry, archive_id, holds)
                    except GovernedMemoryError:
                        outcomes += b"e"  # this one only: the others' outcomes stand
                return bytes(outcomes)
        except GovernedMemoryError:
            return b"e" * len(batch)  # the memory could not be opened or locked
        finally:
            own.close()

    def _one(
        self, store: AgentStore, agent: str, entry: Entry, archive_id: str | None, holds: HoldSet
    ) -> bytes:
        info = store.stat(archive_id)
        if info is None:
            return b"g"
        if _ident(info.modified) != entry.ident:
            return b"c"  # written since the plan
        held = holds.for_agent(agent)
        if not held and holds.has_subject_holds:
            read = (
                store.read_memory if archive_id is None else lambda: store.read_archive(archive_id)
            )
            subjects = _subjects(read)
            held = holds.all_subject_holds() if subjects is None else holds.for_subjects(subjects)
        if held:
            return b"h"
        if not isinstance(store, _Purgeable):
            raise StorageError(
                f"the store {store!r} cannot delete one archive or memory (it has no "
                "delete_archive/delete_memory); purge this deployment with a backend that does"
            )
        gone = store.delete_memory() if archive_id is None else store.delete_archive(archive_id)
        return b"d" if gone else b"g"

    # -- records ---------------------------------------------------------------

    def _tombstone(self, entry: Entry) -> bytes:
        name = entry.path
        erasure_id = name.removeprefix(f"{TOMBSTONES_DIR}/").removesuffix(".json")
        if name != f"{TOMBSTONES_DIR}/{erasure_id}.json" or "/" in erasure_id or not erasure_id:
            raise _not_purgeable(entry)
        store = TombstoneStore(self.place, sealing=self.sealing)
        try:
            data = store.document(erasure_id)
        except GovernedMemoryError:
            return b"e"
        if data is None:
            return b"g"
        if data.get("state") != "complete":
            return b"c"  # reopened since the plan: a pending erasure needs it
        return b"d" if self.place.delete_document(name) else b"g"

    def _consent(self, batch: list[Entry], holds: HoldSet) -> bytes:
        wanted: set[str] = set()
        for entry in batch:
            base, _, digest = entry.path.rpartition("#")
            if base != CONSENT_NAME or not digest:
                raise _not_purgeable(entry)
            wanted.add(digest)
        registry = ConsentRegistry(self.place, sealing=self.sealing)
        done = registry.remove(
            wanted, keep=lambda event: event is not None and event.subject in holds.subjects
        )
        outcome = {
            d: b"d" if d in done.removed else b"h" if d in done.kept else b"g" for d in wanted
        }
        return b"".join(outcome[e.path.rpartition("#")[2]] for e in batch)

    def _audit(self, batch: list[Entry], errors: list[str]) -> bytes:
        names = []
        for entry in batch:
            name = entry.path.removeprefix(AUDIT_PREFIX)
            if not entry.path.startswith(AUDIT_PREFIX) or not name or "/" in name:
                raise _not_purgeable(entry)
            names.append(name)
        if self.audit is None:
            errors.append(
                "audit segments can only be removed through the audit log; configure the audit "
                "key (GOVERNED_MEMORY_AUDIT_KEY) so the purge is recorded in its chain"
            )
            return b"e" * len(batch)
        try:
            present = set(self.audit.segment_ids())
            wanted = [n for n in names if n in present]
            removed = set(self.audit.purge_segments(wanted)) if wanted else set()
        except GovernedMemoryError as exc:
            errors.append(f"audit segments {names}: {exc}")
            return b"e" * len(batch)
        return b"".join(b"g" if n not in present else b"d" if n in removed else b"e" for n in names)


def _batch_key(entry: Entry) -> tuple[str | None, ArtefactKind | str]:
    """Entries applied together: one memory (an agent's, or a subject's), or one record kind."""
    if entry.kind in (ArtefactKind.MEMORY, ArtefactKind.ARCHIVE):
        parts = entry.path.split("/")
        partition = parts[3] if len(parts) > 4 and parts[2] == SUBJECTS_DIR else ""
        return entry.agent, f"memory:{partition}"
    return None, entry.kind


def _target(entry: Entry) -> tuple[str, str | None, str | None]:
    """``(agent, subject folder or None, archive id or None)`` of a journaled memory or archive."""
    parts = entry.path.split("/")
    if len(parts) < 3 or parts[0] != "agents" or not parts[1]:
        raise _not_purgeable(entry)
    agent, rest = parts[1], parts[2:]
    partition: str | None = None
    if len(rest) >= 3 and rest[0] == SUBJECTS_DIR and is_partition_name(rest[1]):
        partition, rest = rest[1], rest[2:]
    if entry.kind is ArtefactKind.MEMORY and len(rest) == 1 and rest[0].startswith("MEMORY.md"):
        return agent, partition, None
    if entry.kind is ArtefactKind.ARCHIVE and len(rest) == 2 and rest[0] == ARCHIVE_DIR:
        found = classify_archive(rest[1])
        archive_id = rest[1].removesuffix(ENCRYPTED_SUFFIX).removesuffix(".md")
        if found is not None and archive_id.startswith("history_"):
            return agent, partition, archive_id
    raise _not_purgeable(entry)


def _not_purgeable(entry: Entry) -> JournalError:
    return JournalError(
        f"purge journal entry {entry.n} names {entry.path!r} as a {entry.kind.value}, which is "
        "not a purgeable artefact of the deployment; the journal is damaged or was edited. "
        "Discard the interrupted purge (remove its rows from governed_memory.purge_plans)"
    )
