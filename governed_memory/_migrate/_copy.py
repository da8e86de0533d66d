"""Copy one workspace's storage into another backend, resumably, then verify it item by item.

The copy goes through the storage seam only (:class:`~._ends.StorageEnd`), in an
order that keeps the destination usable at every step: the keyring first (an
encrypted store needs its keys to seal), the records, the agents' memories
and archives, the audit chain last.

Each item is written in its own transaction or atomic file write, and only
when the destination does not already hold it, so a run killed at any point
(even by kill -9) is finished by running it again, without duplicates. The
destination's progress document (:data:`~._ends.MARKER`) names the source:
a destination that holds data without it, or a marker of another source, is
refused rather than mixed.

What is copied how:

* Memories and archives as text: the destination store seals them itself
  (under the same keyring keys, which were copied first), so the database
  only ever gets ciphertext from an encrypted workspace, and crypto-shredding
  a key still makes every copy unreadable. Archives keep their ids, so
  receipts citing ``source()`` stay true.
* Record lines and documents, keyring entries and audit entries as bytes: the
  stored (possibly sealed) form, byte for byte; audit entries keep their seq,
  hash, prev and MAC, so ``audit verify`` and signed checkpoints still hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import StorageError
from ._ends import MARKER, StorageEnd

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._protocols import AgentStore

__all__ = ["MigrationReport", "Progress", "migrate_storage", "verify_copy"]

MARKER_FORMAT = "governed_memory.migration"
MARKER_VERSION = 1

Progress = Callable[[str, int], None]
"""Told ``(what, count)`` after each kind of item: ``("memories", 3)``, ``("audit entries", 120)``."""


@dataclass
class MigrationReport:
    """What a migration found, copied and verified, by kind of item.

    ``copied`` counts the items this run wrote; ``verified`` every item read
    back from the destination and found equal to the source's.
    """

    source: str
    destination: str
    copied: dict[str, int] = field(default_factory=dict)
    verified: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON object (``--json``)."""
        return {
            "source": self.source,
            "destination": self.destination,
            "copied": dict(self.copied),
            "verified": dict(self.verified),
        }


def migrate_storage(
    source: StorageEnd, destination: StorageEnd, *, progress: Progress | None = None
) -> MigrationReport:
    """Copy every persistent part of ``source`` into ``destination``, then verify the copy.

    Run it again after a crash or kill -9: it continues where the copy stopped.
    Run it on a finished copy: it only verifies. Nothing may write to the source
    meanwhile (stop the hosts first).

    Returns:
        The counts of items copied and verified.

    Raises:
        StorageError: a purge plan is pending in the source; the destination
            holds data of its own or of another source; an item read back
            differs from the source's (the message names it); or a backend
            failed (the item it names was not written).
    """
    if source.journal is not None and source.journal.pending():
        raise StorageError(
            f"cannot migrate {source.describe}: a purge plan is pending; finish it first "
            "(`governed-memory purge --yes` resumes it), then migrate"
        )
    report = MigrationReport(source.describe, destination.describe)
    marker = _read_marker(destination)
    if marker is None:
        found = _holdings(destination)
        if found:
            raise StorageError(
                f"cannot migrate into {destination.describe}: it already holds {found} that "
                f"did not come from {source.describe}; migrate into an empty database or "
                "workspace folder"
            )
        _write_marker(destination, source.describe, "copying")
    elif marker.get("source") != source.describe:
        raise StorageError(
            f"cannot migrate into {destination.describe}: it holds a migration from "
            f"{marker.get('source')!r}, not from {source.describe}; migrate into an empty "
            "database or workspace folder"
        )
    if marker is None or marker.get("state") != "done":
        for kind, count in _copy(source, destination):
            report.copied[kind] = report.copied.get(kind, 0) + count
            if progress is not None:
                progress(f"copied {kind}", count)
    report.verified = verify_copy(source, destination, progress=progress)
    _write_marker(destination, source.describe, "done")
    return report


def verify_copy(
    source: StorageEnd, destination: StorageEnd, *, progress: Progress | None = None
) -> dict[str, int]:
    """Read every item back from ``destination`` and compare it with ``source``'s; counts by kind.

    Text for memories and archives, bytes for record lines, documents, wrapped
    keys and audit entries.

    Raises:
        StorageError: an item is missing or differs; the message names it.
    """
    counts: dict[str, int] = {}
    for kind, count in _compare(source, destination):
        counts[kind] = counts.get(kind, 0) + count
        if progress is not None:
            progress(f"verified {kind}", count)
    return counts


# -- the marker --------------------------------------------------------------------


def _read_marker(end: StorageEnd) -> dict[str, Any] | None:
    _mark, data = end.place.read_document(MARKER, None)
    if data is None:
        return None
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if (
        not isinstance(body, dict)
        or body.get("format") != MARKER_FORMAT
        or body.get("version") != MARKER_VERSION
    ):
        raise StorageError(
            f"the migration progress {end.place.describe(MARKER)} is not readable "
            f"(format {MARKER_FORMAT} version {MARKER_VERSION} expected); remove it only if "
            "the destination is to be emptied, then migrate again"
        )
    return body


def _write_marker(end: StorageEnd, source: str, state: str) -> None:
    body = {"format": MARKER_FORMAT, "version": MARKER_VERSION, "source": source, "state": state}
    end.place.write_document(MARKER, json.dumps(body, sort_keys=True).encode("utf-8") + b"\n")


def _holdings(end: StorageEnd) -> str:
    """What ``end`` already holds, in words ("" when empty)."""
    found = []
    agents = end.memory.agents()
    if agents:
        found.append(f"{len(agents)} agent(s)")
    names = end.record_names()
    if names.logs or names.documents:
        found.append(f"{len(names.logs) + len(names.documents)} record(s)")
    if end.keys is not None and (end.keys.read_meta() is not None or end.keys.list_refs()):
        found.append("a keyring")
    if end.audit is not None and end.audit.head() is not None:
        found.append("an audit log")
    return ", ".join(found)


# -- copying -----------------------------------------------------------------------


def _copy(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    yield from _copy_keys(source, destination)
    yield from _copy_records(source, destination)
    yield from _copy_memory(source, destination)
    yield from _copy_audit(source, destination)


def _copy_keys(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    src, dst = source.keys, destination.keys
    if src is None:
        return
    if dst is None:
        if src.read_meta() is not None or src.list_refs():
            raise StorageError(
                f"{source.describe} has a keyring but {destination.describe} was opened "
                "without one; pass the destination's key storage"
            )
        return
    copied = 0
    meta = src.read_meta()
    if meta is not None and dst.read_meta() != meta:
        if not dst.create_meta(meta):
            with dst.locked():
                dst.write_meta(meta)
        copied += 1
    for ref in src.list_refs():
        data = src.read_entry(ref)
        if data is not None and dst.read_entry(ref) != data:
            with dst.locked():
                dst.write_entry(ref, data)
            copied += 1
    with dst.locked():
        while dst.counter() < src.counter():
            dst.bump_counter()
    yield "keys", copied


def _copy_records(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    src, dst = source.place, destination.place
    names = source.record_names()
    logs = 0
    for name in names.logs:
        lines = src.stored_lines(name) or []
        if dst.stored_lines(name) != lines:
            dst.replace_lines(name, lines)
            logs += 1
    yield "record logs", logs
    documents = 0
    for name in names.documents:
        _mark, data = src.read_document(name, None)
        if data is not None and dst.read_document(name, None)[1] != data:
            dst.write_document(name, data)
            documents += 1
    yield "documents", documents


def _memories(end: StorageEnd) -> Iterator[tuple[str, AgentStore]]:
    """Every memory of ``end``: each agent's own store, then its subject stores."""
    for agent in end.memory.agents():
        store = end.memory.open(agent, _no_header)
        yield agent, store
        for subject in store.subject_stores():
            yield agent, subject


def _no_header() -> str:
    return ""  # every memory created by a migration is rewritten with the source's text at once


def _counterpart(destination: StorageEnd, agent: str, store: AgentStore) -> AgentStore:
    own = destination.memory.open(agent, _no_header)
    if store.partition is None:
        return own
    opener: Callable[[str], AgentStore] | None = getattr(own, "partition_store", None)
    if opener is None:
        raise StorageError(
            f"{destination.describe} cannot open subject memory {store.source()} of agent "
            f"{agent!r} by its name; its stores need partition_store()"
        )
    return opener(store.partition)


def _copy_memory(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    memories = archives = 0
    for agent, store in _memories(source):
        target = _counterpart(destination, agent, store)
        importer: Callable[[str, str], None] | None = getattr(target, "import_archive", None)
        for archive_id in store.list_archives():
            text = store.read_archive(archive_id)
            if archive_id in target.list_archives() and target.read_archive(archive_id) == text:
                continue
            if importer is None:
                raise StorageError(
                    f"{destination.describe} cannot take archive {store.source(archive_id)} of "
                    f"agent {agent!r} with its id; its stores need import_archive()"
                )
            importer(archive_id, text)
            archives += 1
        text_now = store.read_memory()
        if text_now is not None and target.read_memory() != text_now:
            with target.lock():
                target.ensure()
                target.rewrite_memory(text_now)
            memories += 1
        target.close()
        store.close()
    yield "memories", memories
    yield "archives", archives


def _entries(end: StorageEnd) -> Iterator[tuple[str, AuditEntry]]:
    assert end.audit is not None
    for segment in end.audit.segment_ids():
        for entry in end.audit.segment_entries(segment):
            yield segment, entry  # type: ignore[misc]  # both backends return AuditEntry


def _copy_audit(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    if source.audit is None or source.audit.head() is None:
        return
    if destination.audit is None:
        raise StorageError(
            f"{source.describe} has an audit log but {destination.describe} was opened "
            "without one; configure the audit key (GOVERNED_MEMORY_AUDIT_KEY)"
        )
    importer: Callable[[Any, str], None] | None = getattr(destination.audit, "import_entry", None)
    if importer is None:
        raise StorageError(
            f"the audit storage of {destination.describe} cannot take entries as stored; "
            "it needs import_entry()"
        )
    newest = destination.audit.tail(1)
    last = newest[-1].seq if newest else 0
    copied = 0
    for segment, entry in _entries(source):
        if entry.seq > last:
            importer(entry, segment)
            copied += 1
    yield "audit entries", copied


# -- verifying ---------------------------------------------------------------------


def _mismatch(destination: StorageEnd, item: str, how: str) -> StorageError:
    return StorageError(
        f"verification of {destination.describe} failed: {item} {how}; the copy is not "
        "complete. Run the migration again to finish it, or migrate into an empty destination"
    )


def _compare(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    yield from _compare_keys(source, destination)
    yield from _compare_records(source, destination)
    yield from _compare_memory(source, destination)
    yield from _compare_audit(source, destination)


def _compare_keys(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    src, dst = source.keys, destination.keys
    if src is None or dst is None:
        return
    if dst.read_meta() != src.read_meta():
        raise _mismatch(destination, "the keyring metadata", "differs from the source's")
    count = 0
    for ref in src.list_refs():
        if dst.read_entry(ref) != src.read_entry(ref):
            raise _mismatch(destination, f"keyring entry {ref.hex()}", "differs or is missing")
        count += 1
    yield "keys", count


def _compare_records(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    src, dst = source.place, destination.place
    names = source.record_names()
    lines = 0
    for name in names.logs:
        mine = src.stored_lines(name) or []
        theirs = dst.stored_lines(name)
        if theirs is None:
            raise _mismatch(destination, f"record log {name}", "is missing")
        for n, (a, b) in enumerate(zip(mine, theirs, strict=False), start=1):
            if a != b:
                raise _mismatch(destination, f"line {n} of record log {name}", "differs")
        if len(mine) != len(theirs):
            raise _mismatch(
                destination, f"record log {name}", f"has {len(theirs)} lines, not {len(mine)}"
            )
        lines += len(mine)
    yield "record lines", lines
    for name in names.documents:
        if dst.read_document(name, None)[1] != src.read_document(name, None)[1]:
            raise _mismatch(destination, f"document {name}", "differs or is missing")
    yield "documents", len(names.documents)


def _compare_memory(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    memories = archives = 0
    agents = set(source.memory.agents())
    for agent, store in _memories(source):
        target = _counterpart(destination, agent, store)
        what = f"agent {agent!r} {store.source()}"
        if target.read_memory() != store.read_memory():
            raise _mismatch(destination, f"the memory of {what}", "differs or is missing")
        memories += 1
        ids = store.list_archives()
        if target.list_archives() != ids:
            raise _mismatch(destination, f"the archive ids of {what}", "differ")
        for archive_id in ids:
            if target.read_archive(archive_id) != store.read_archive(archive_id):
                raise _mismatch(
                    destination, f"archive {store.source(archive_id)} of agent {agent!r}", "differs"
                )
            archives += 1
        target.close()
        store.close()
    extra = set(destination.memory.agents()) - agents
    if extra:
        raise _mismatch(destination, f"agent(s) {sorted(extra)}", "are not in the source")
    yield "memories", memories
    yield "archives", archives


def _compare_audit(source: StorageEnd, destination: StorageEnd) -> Iterator[tuple[str, int]]:
    if source.audit is None or source.audit.head() is None:
        return
    assert destination.audit is not None
    theirs = _entries(destination)
    count = 0
    for segment, entry in _entries(source):
        found = next(theirs, None)
        if found is None:
            raise _mismatch(destination, f"audit entry seq {entry.seq}", "is missing")
        if found[1].line != entry.line or found[0] != segment:
            raise _mismatch(destination, f"audit entry seq {entry.seq}", "differs")
        count += 1
    if next(theirs, None) is not None:
        raise _mismatch(destination, "the audit log", "has entries the source has not")
    yield "audit entries", count
