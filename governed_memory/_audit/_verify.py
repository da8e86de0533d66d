"""Verifying the audit log: every entry authentic, in order, none missing.

:func:`verify_log` walks the segments in chain order and checks each line:

* it is an entry (canonical JSON of format version 1);
* its ``hash`` matches its content, and its bytes are the canonical encoding
  (any edit, even of whitespace, shows);
* its ``mac`` verifies under the audit key (an edit that recomputed the hash
  still fails here; an entry under another key id is foreign);
* its ``seq`` is one more than the entry before and its ``prev`` is that
  entry's hash;
* each segment starts with its anchor, naming the segment before it;
* the head file agrees: it may lag the log, never lead it.

Each problem becomes a :class:`Finding` naming file, line, seq and what is
wrong, classified as altered, forged, removed, inserted, reordered, torn tail,
missing segment, truncated, wrong key, ... (see :class:`FindingKind`). After a
problem the walk resynchronises on the next authentic entry where that is
unambiguous, and stops after a reordering or an unreadable line in the middle.

Purged segments: the oldest segments may be missing when an authentic
``audit.purge`` entry later in the chain names them and records the hash and
seq of the last purged entry, which the first remaining anchor chains to. A
missing segment that no purge entry accounts for is reported. Torn lines are
accepted when an ``audit.repair`` entry records exactly their bytes; an
unrepaired torn last line is reported as ``torn_tail`` (a crash, not an edit:
the next append or ``governed-memory audit repair`` closes it off).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._binding import WORKSPACE_ID_ATTR, binding_path, read_workspace_id
from ._entry import GENESIS, AuditEntry, EntryFormatError, canonical, parse_entry
from ._events import AuditEvent
from ._keys import AuditKey, AuditKeyLike, as_audit_key
from ._log import (
    HEAD_FILE,
    Head,
    list_segments,
    parse_head,
    read_segment_lines,
    rekey_endorsement,
)

if TYPE_CHECKING:
    from .._protocols import AuditStorage

__all__ = ["NOTICES", "Finding", "FindingKind", "VerifyReport", "verify_log", "verify_storage"]


class FindingKind(StrEnum):
    """What is wrong at a place in the log."""

    ALTERED = "altered"
    """An entry's fields or bytes changed after it was written."""
    FORGED = "forged"
    """An entry's MAC does not verify: rewritten without the key, or signed by another key."""
    REMOVED = "removed"
    """Entries are missing (a gap in seq)."""
    INSERTED = "inserted"
    """A line or entry that is not part of the chain (the chain runs over it)."""
    REORDERED = "reordered"
    """Entries appear out of order."""
    CHAIN_BROKEN = "chain_broken"
    """An entry does not chain to the one before it."""
    MALFORMED = "malformed"
    """A line in the middle of a segment is not an entry, or a segment is misshapen."""
    TORN_TAIL = "torn_tail"
    """The last line was cut short by a crash during an append (not yet repaired)."""
    MISSING_SEGMENT = "missing_segment"
    """A whole segment file is gone and no audit.purge entry records its removal."""
    TRUNCATED = "truncated"
    """Entries were removed from the end: the head records a later entry."""
    HEAD = "head"
    """The head file is missing, unreadable, unauthenticated or disagrees with the log."""
    DISCONTINUITY = "discontinuity"
    """The log itself recorded that its head disagreed with the entries it found."""
    WRONG_KEY = "wrong_key"
    """The log was written with another audit key than the one given."""
    FOREIGN_LOG = "foreign_log"
    """The log, or a segment, is bound to another workspace (or this one lost its id)."""
    UNBOUND = "unbound"
    """A notice, not a failure: the log was written before workspace binding (no anchor names
    a workspace), so whether it is this workspace's cannot be checked yet."""
    # Found by the verification with public keys only (``_public``, docs/evidence.md).
    CHECKPOINT = "checkpoint"
    """A checkpoint's signature does not verify, or it belongs to another workspace's log."""
    ROLLBACK = "rollback"
    """The log does not hold the entry a signed checkpoint pins: entries were removed from the
    end, the log was replaced by an older copy, or entries were rewritten."""
    NO_CHECKPOINT = "no_checkpoint"
    """No checkpoint signed by the given public key(s) vouches for any entry of the log."""
    UNAUTHENTICATED = "unauthenticated"
    """A notice: what a verification without the audit key could not check (the MACs, the
    entries after the newest signed checkpoint)."""
    CHECKPOINT_UNCHECKED = "checkpoint_unchecked"
    """A notice: a checkpoint signed by a key not given, or pinning an entry retention purged."""


NOTICES = frozenset(
    {FindingKind.UNBOUND, FindingKind.UNAUTHENTICATED, FindingKind.CHECKPOINT_UNCHECKED}
)
"""Finding kinds that are reported but do not fail verification."""


@dataclass(frozen=True)
class Finding:
    """One problem, located as exactly as the log allows."""

    kind: FindingKind
    message: str
    file: str | None = None
    line: int | None = None
    seq: int | None = None

    def __str__(self) -> str:
        where = self.file or "<audit folder>"
        if self.line is not None:
            where += f":{self.line}"
        seq = f" seq {self.seq}" if self.seq is not None else ""
        return f"{where}{seq}: {self.kind.value}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind.value}


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :func:`verify_log`."""

    folder: Path
    segments: tuple[str, ...]
    entries: int
    first_seq: int | None
    last_seq: int | None
    findings: tuple[Finding, ...]
    purged: tuple[str, ...] = ()
    """Segments missing at the start whose removal an audit.purge entry records."""
    repaired: tuple[str, ...] = ()
    """Torn lines that an audit.repair entry accounts for (``file:line``)."""
    complete: bool = True
    """False when the walk stopped early (after a reordering or a broken line)."""

    @property
    def ok(self) -> bool:
        """No finding other than a notice (``unbound``)."""
        return all(f.kind in NOTICES for f in self.findings)

    @property
    def problems(self) -> tuple[Finding, ...]:
        """The findings that fail verification (all but the notices)."""
        return tuple(f for f in self.findings if f.kind not in NOTICES)

    @property
    def first(self) -> Finding | None:
        """The first problem in chain order, or None."""
        problems = self.problems
        return problems[0] if problems else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "ok": self.ok,
            "segments": list(self.segments),
            "entries": self.entries,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "findings": [f.to_dict() for f in self.findings],
            "purged": list(self.purged),
            "repaired": list(self.repaired),
            "complete": self.complete,
        }


@dataclass
class _Item:
    segment: str
    line: int
    raw: bytes
    terminated: bool
    entry: AuditEntry | None
    error: str | None


def finding_at(
    kind: FindingKind, item: _Item | None, message: str, seq: int | None = None
) -> Finding:
    """A finding located at ``item`` (its file, line and seq; ``seq`` overrides the last)."""
    return Finding(
        kind,
        message,
        file=item.segment if item else None,
        line=item.line if item else None,
        seq=seq if seq is not None else (item.entry.seq if item and item.entry else None),
    )


@dataclass
class _Walk:
    keys: dict[str, AuditKey]
    items: list[_Item]
    purges: list[AuditEntry]
    repairs: dict[tuple[str, int], AuditEntry]
    findings: list[Finding] = field(default_factory=list)
    purged: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    exp_seq: int | None = None
    exp_prev: str = GENESIS
    prev_segment: str | None = None
    last: _Item | None = None
    count: int = 0
    first_seq: int | None = None
    by_seq: dict[int, str] = field(default_factory=dict)
    kid: str | None = None
    """The key id the chain is signed with so far (it changes only at an endorsed audit.rekey)."""

    def authentic(self, entry: AuditEntry) -> bool:
        return entry.check(self.keys.get(entry.kid))[1]

    def add(self, kind: FindingKind, item: _Item | None, message: str) -> None:
        self.findings.append(finding_at(kind, item, message))

    def advance(self, item: _Item) -> None:
        assert item.entry is not None
        self.exp_seq, self.exp_prev = item.entry.seq + 1, item.entry.hash
        self.prev_segment = item.segment
        self.last = item
        self.count += 1
        self.by_seq[item.entry.seq] = item.entry.hash
        self.kid = item.entry.kid
        if self.first_seq is None:
            self.first_seq = item.entry.seq

    def fits(self, entry: AuditEntry | None) -> bool:
        return entry is not None and entry.seq == self.exp_seq and entry.prev == self.exp_prev

    def next_entry(self, index: int) -> _Item | None:
        for item in self.items[index + 1 :]:
            if item.entry is not None:
                return item
        return None


def _load(folder: Path, findings: list[Finding]) -> tuple[list[str], list[_Item]]:
    names: list[str] = []
    items: list[_Item] = []
    for segment in list_segments(folder):
        names.append(segment.name)
        try:
            lines, terminated = read_segment_lines(segment.path)
        except OSError as exc:
            findings.append(Finding(FindingKind.MALFORMED, f"cannot read: {exc}", segment.name))
            continue
        if not lines:
            findings.append(
                Finding(
                    FindingKind.MALFORMED,
                    "the segment file is empty (a crash while creating it, or emptied)",
                    segment.name,
                )
            )
        for number, raw in enumerate(lines, start=1):
            last = number == len(lines)
            try:
                entry: AuditEntry | None = parse_entry(raw)
                error = None
            except EntryFormatError as exc:
                entry, error = None, str(exc)
            items.append(_Item(segment.name, number, raw, terminated or not last, entry, error))
    return names, items


def verify_log(
    folder: str | Path,
    keys: AuditKeyLike | Iterable[AuditKeyLike],
    *,
    workspace: str | Path | None = None,
) -> VerifyReport:
    """Check the audit log in ``folder`` with ``keys`` (one key, or several after a key change).

    With ``workspace``, also check that the log is that workspace's: its
    segment anchors name the id in ``<workspace>/.governed_memory/audit-workspace-id``
    (``foreign_log`` when not; ``unbound``, a notice, for a log from before
    the binding). Never raises for what it finds: problems are the report's findings.

    Raises:
        ConfigurationError: a key is malformed.
    """
    folder = Path(folder)
    early: list[Finding] = []
    names, items = _load(folder, early)
    return _verify(folder, names, items, early, keys, _read_head_file(folder), workspace)


def verify_storage(
    storage: AuditStorage,
    keys: AuditKeyLike | Iterable[AuditKeyLike],
    *,
    workspace: str | Path | None = None,
) -> VerifyReport:
    """Check the audit log of any :class:`~governed_memory._protocols.AuditStorage` with ``keys``.

    The file log is checked line by line, as :func:`verify_log` does (its
    ``workspace`` binding when none is given). Any other storage is checked
    entry by entry, in the order of its segments, by the same walk: an entry's
    stored line must be its canonical bytes, authentic, chained, and the
    storage's head must not lead the chain. The head row is checked under the
    key when it carries a MAC (a :class:`~._log.Head`).

    Raises:
        ConfigurationError: a key is malformed.
    """
    from ._log import AuditLog

    if isinstance(storage, AuditLog):
        bound = workspace if workspace is not None else storage.workspace
        return verify_log(storage.folder, keys, workspace=bound)
    where = Path(str(getattr(storage, "where", type(storage).__name__)))
    names = storage.segment_ids()
    items: list[_Item] = []
    for name in names:
        for number, record in enumerate(storage.segment_entries(name), start=1):
            raw = getattr(record, "line", b"") or canonical(record.to_dict())
            try:
                entry: AuditEntry | None = parse_entry(raw)
                error = None
            except EntryFormatError as exc:
                entry, error = None, str(exc)
            items.append(_Item(name, number, raw, True, entry, error))
    head = storage.head()
    stored: Head | str | None
    if head is None or isinstance(head, Head):
        stored = head
    else:
        stored = Head(head.seq, head.hash, head.segment, "")
    return _verify(where, names, items, [], keys, stored, workspace, label="the head")


def _verify(
    folder: Path,
    names: list[str],
    items: list[_Item],
    early: list[Finding],
    keys: AuditKeyLike | Iterable[AuditKeyLike],
    head: Head | str | None,
    workspace: str | Path | None,
    *,
    label: str = HEAD_FILE,
) -> VerifyReport:
    given = [keys] if isinstance(keys, AuditKey | str | bytes) else list(keys)
    key_list: Sequence[AuditKey] = [as_audit_key(k) for k in given]
    walk = _Walk(
        keys={k.key_id: k for k in key_list},
        items=items,
        purges=[],
        repairs={},
        findings=early,
    )
    for item in items:
        entry = item.entry
        if entry is None or entry.event not in (AuditEvent.AUDIT_PURGE, AuditEvent.REPAIR):
            continue
        if not walk.authentic(entry):
            continue
        if entry.event == AuditEvent.AUDIT_PURGE:
            walk.purges.append(entry)
        elif entry.event == AuditEvent.REPAIR:
            segment, line = entry.attrs.get("segment"), entry.attrs.get("line")
            if isinstance(segment, str) and isinstance(line, int):
                walk.repairs[(segment, line)] = entry
    complete = _walk(walk)
    if complete:
        _check_head(walk, names, head, label)
    if workspace is not None and walk.count:
        _check_binding(walk, workspace)
    return VerifyReport(
        folder=folder,
        segments=tuple(names),
        entries=walk.count,
        first_seq=walk.first_seq,
        last_seq=walk.last.entry.seq if walk.last and walk.last.entry else None,
        findings=tuple(walk.findings),
        purged=tuple(walk.purged),
        repaired=tuple(walk.repaired),
        complete=complete,
    )


def _walk(walk: _Walk) -> bool:
    """Walk the items in order; return False when it had to stop early."""
    items = walk.items
    for index, item in enumerate(items):
        if item.entry is None:
            if _repaired(walk, item):
                continue
            if index == len(items) - 1:
                what = (
                    "the last line is cut short (no newline)"
                    if not item.terminated
                    else "the last line is not an entry and no audit.repair entry accounts for it"
                )
                walk.add(
                    FindingKind.TORN_TAIL,
                    item,
                    f"{what}: an append was interrupted by a crash. The next append or "
                    "`governed-memory audit repair` closes it off and records it",
                )
                return True
            if walk.fits(_entry_of(walk.next_entry(index))):
                walk.add(
                    FindingKind.INSERTED,
                    item,
                    f"a line that is not an audit entry ({item.error}) sits inside the chain",
                )
                continue
            walk.add(FindingKind.MALFORMED, item, f"the line is not an audit entry ({item.error})")
            return False
        if not _check_entry(walk, index, item):
            return False
    return True


def _entry_of(item: _Item | None) -> AuditEntry | None:
    return item.entry if item is not None else None


def _repaired(walk: _Walk, item: _Item) -> bool:
    repair = walk.repairs.get((item.segment, item.line))
    if repair is None:
        return False
    if repair.attrs.get("sha256") != hashlib.sha256(item.raw).hexdigest():
        return False
    walk.repaired.append(f"{item.segment}:{item.line}")
    return True


def _check_entry(walk: _Walk, index: int, item: _Item) -> bool:
    entry = item.entry
    assert entry is not None
    key = walk.keys.get(entry.kid)
    hash_ok, authentic = entry.check(key)
    if walk.exp_seq is None:
        return _check_start(walk, item, key, hash_ok, authentic)
    if item.line == 1 and authentic and entry.event == AuditEvent.SEGMENT:
        previous = entry.attrs.get("previous_segment")
        if previous != walk.prev_segment:
            walk.add(
                FindingKind.MISSING_SEGMENT,
                item,
                f"segment {previous} is missing: {item.segment} chains to it, but the segment "
                f"before it in the folder is {walk.prev_segment} (entries seq {walk.exp_seq}.."
                f"{entry.seq - 1} are gone)",
            )
            walk.advance(item)
            return True
    if walk.fits(entry) and authentic:
        _check_shape(walk, item)
        _check_key_change(walk, item)
        walk.advance(item)
        return True
    nxt = walk.next_entry(index)
    next_fits = walk.fits(_entry_of(nxt))
    if walk.fits(entry):
        if next_fits:
            walk.add(
                FindingKind.INSERTED,
                item,
                "this entry is not part of the chain: it does not authenticate and the next "
                "entry chains over it",
            )
            return True
        if not hash_ok:
            walk.add(
                FindingKind.ALTERED,
                item,
                "fields were changed after the entry was written: its content does not match "
                "its hash",
            )
        elif key is None:
            walk.add(
                FindingKind.FORGED,
                item,
                f"signed with key id {entry.kid}, which is not the log's key: the entry was "
                "written by someone else",
            )
        else:
            walk.add(
                FindingKind.FORGED,
                item,
                "its hash matches its content but its MAC does not verify: the entry was "
                "rewritten and re-hashed without the audit key",
            )
        walk.advance(item)
        return True
    assert walk.exp_seq is not None
    if authentic and entry.seq > walk.exp_seq and _later_has(walk, index, walk.exp_seq):
        walk.add(
            FindingKind.REORDERED,
            item,
            f"entry seq {entry.seq} appears before seq {walk.exp_seq}: entries were reordered",
        )
        return False
    if next_fits:
        what = (
            f"a copy of entry seq {entry.seq}"
            if authentic and entry.seq in walk.by_seq
            else "an entry that does not belong here"
        )
        walk.add(FindingKind.INSERTED, item, f"{what} was inserted; the next entry chains over it")
        return True
    if entry.seq > walk.exp_seq:
        gap = (
            f"seq {walk.exp_seq}"
            if entry.seq - 1 == walk.exp_seq
            else f"seq {walk.exp_seq}..{entry.seq - 1}"
        )
        noticed = ""
        if entry.event == AuditEvent.DISCONTINUITY:
            noticed = (
                f" (the log noticed at its next append: {entry.attrs.get('reason_code')}, "
                f"head recorded seq {entry.attrs.get('head_seq')})"
            )
        walk.add(FindingKind.REMOVED, item, f"entries {gap} are missing before this entry{noticed}")
        if not authentic:
            walk.add(FindingKind.FORGED, item, "and this entry does not authenticate")
            return False
        walk.advance(item)
        return True
    if entry.seq < walk.exp_seq:
        walk.add(
            FindingKind.REORDERED,
            item,
            f"entry seq {entry.seq} appears after seq {walk.exp_seq - 1}: entries were reordered "
            "or duplicated",
        )
        return False
    walk.add(
        FindingKind.CHAIN_BROKEN,
        item,
        f"its prev hash does not match the hash of entry seq {entry.seq - 1}: the entry before "
        "it was replaced",
    )
    if not authentic:
        return False
    walk.advance(item)
    return True


def _check_start(
    walk: _Walk, item: _Item, key: AuditKey | None, hash_ok: bool, authentic: bool
) -> bool:
    entry = item.entry
    assert entry is not None
    if key is None:
        given = ", ".join(sorted(walk.keys)) or "none"
        rekey = next(
            (
                i.entry
                for i in walk.items
                if i.entry is not None
                and i.entry.event == AuditEvent.REKEY
                and i.entry.attrs.get("old_key_id") == entry.kid
                and walk.authentic(i.entry)
            ),
            None,
        )
        hint = (
            f"; the log changed to the given key at seq {rekey.seq} (audit.rekey, a master key "
            "rotation): entries before it need the previous key, give the previous master key "
            "as GOVERNED_MEMORY_MASTER_KEY_OLD[_FILE] (docs/encryption.md, rotating the master "
            "key)"
            if rekey is not None
            else ""
        )
        walk.add(
            FindingKind.WRONG_KEY,
            item,
            f"the log was written with audit key id {entry.kid}, the key given has id {given}: "
            f"verify with the key the log was written with (GOVERNED_MEMORY_AUDIT_KEY){hint}",
        )
        return False
    if not authentic:
        kind = FindingKind.ALTERED if not hash_ok else FindingKind.FORGED
        walk.add(kind, item, "the first entry does not authenticate")
    if entry.event != AuditEvent.SEGMENT or item.line != 1:
        walk.add(FindingKind.MALFORMED, item, "the log does not start with a segment anchor")
    elif entry.prev != GENESIS or entry.seq != 1 or entry.attrs.get("previous_segment"):
        previous = entry.attrs.get("previous_segment")
        purge = next(
            (
                p
                for p in reversed(walk.purges)
                if previous in (p.attrs.get("segments") or ())
                and p.attrs.get("last_hash") == entry.prev
                and p.attrs.get("last_seq") == entry.seq - 1
            ),
            None,
        )
        if purge is None:
            walk.add(
                FindingKind.MISSING_SEGMENT,
                item,
                f"the log starts at seq {entry.seq}, chained to segment {previous}, which is "
                "not in the folder, and no audit.purge entry records its removal: segments "
                "were deleted",
            )
        else:
            walk.purged.extend(str(s) for s in purge.attrs.get("segments") or ())
    walk.advance(item)
    return True


def _check_shape(walk: _Walk, item: _Item) -> None:
    entry = item.entry
    assert entry is not None
    if entry.event == AuditEvent.SEGMENT and item.line != 1:
        walk.add(
            FindingKind.MALFORMED,
            item,
            "a segment anchor in the middle of a file: segment files were joined",
        )
    elif entry.event != AuditEvent.SEGMENT and item.line == 1:
        walk.add(
            FindingKind.MALFORMED,
            item,
            "the segment does not start with its anchor: a segment file was split or renamed",
        )
    elif entry.event == AuditEvent.DISCONTINUITY:
        reason = entry.attrs.get("reason_code")
        found = (
            "an entry waiting to be chained without a valid MAC under the audit key "
            "(written by a role without the key), recorded here instead of it"
            if reason == "pending_unauthenticated"
            else f"its head file {reason} at this point; entries before it may have been removed"
        )
        walk.add(FindingKind.DISCONTINUITY, item, f"the log found {found}")


def _check_key_change(walk: _Walk, item: _Item) -> None:
    """An entry under another key than the chain's must be an audit.rekey the old key endorses."""
    entry = item.entry
    assert entry is not None
    if walk.kid is None or entry.kid == walk.kid:
        return
    old_key = walk.keys.get(walk.kid)
    endorsement = entry.attrs.get("endorsement")
    endorsed = False
    if entry.event == AuditEvent.REKEY and old_key is not None and isinstance(endorsement, str):
        expected = rekey_endorsement(old_key, entry.seq, entry.prev, entry.kid)
        endorsed = (
            entry.attrs.get("old_key_id") == walk.kid
            and entry.attrs.get("new_key_id") == entry.kid
            and hmac.compare_digest(expected, endorsement)
        )
    if not endorsed:
        walk.add(
            FindingKind.FORGED,
            item,
            f"signed with key id {entry.kid} after entries signed with {walk.kid}, without an "
            f"audit.rekey entry that key {walk.kid} endorses: someone else continued the log",
        )


def _check_binding(walk: _Walk, workspace: str | Path) -> None:
    """Do the authentic segment anchors (and audit.bind entries) name this workspace's id?"""
    expected = read_workspace_id(workspace)
    where = binding_path(workspace)
    bound = [
        (item, item.entry.attrs[WORKSPACE_ID_ATTR])
        for item in walk.items
        if item.entry is not None
        and (
            (item.line == 1 and item.entry.event == AuditEvent.SEGMENT)
            or item.entry.event == AuditEvent.BIND
        )
        and WORKSPACE_ID_ATTR in item.entry.attrs
        and walk.authentic(item.entry)
    ]
    if not bound:
        if expected is None:
            walk.add(
                FindingKind.UNBOUND,
                None,
                "the log was written before workspace binding: no segment anchor names a "
                "workspace, so whether it is this workspace's cannot be checked; the next "
                "governed operation binds it (audit.bind)",
            )
        else:
            walk.add(
                FindingKind.FOREIGN_LOG,
                None,
                f"this workspace's logs are bound to workspace id {expected} ({where}), but no "
                "segment anchor of this log names a workspace: the log was replaced by an "
                "older or another workspace's log",
            )
        return
    if expected is None:
        item, found = bound[0]
        walk.add(
            FindingKind.FOREIGN_LOG,
            item,
            f"the log is bound to workspace id {found}, but this workspace has no id file "
            f"({where}): the log comes from another workspace, or the file was removed "
            "(restore it from a backup of the workspace)",
        )
        return
    for item, found in bound:
        if found != expected:
            walk.add(
                FindingKind.FOREIGN_LOG,
                item,
                f"this segment is bound to workspace id {found}, but this workspace's id is "
                f"{expected} ({where}): it comes from another workspace's audit log",
            )


def _later_has(walk: _Walk, index: int, seq: int) -> bool:
    return any(i.entry is not None and i.entry.seq == seq for i in walk.items[index + 1 :])


def _read_head_file(folder: Path) -> Head | str | None:
    """The head file's record; None when missing or empty; the problem's text when unreadable."""
    try:
        raw = (folder / HEAD_FILE).read_bytes()
    except FileNotFoundError:
        raw = b""
    except OSError as exc:
        return f"cannot read {HEAD_FILE}: {exc}"
    try:
        return parse_head(raw)
    except EntryFormatError as exc:
        return f"{HEAD_FILE}: {exc}"


def _check_head(walk: _Walk, names: list[str], head: Head | str | None, label: str) -> None:
    last = walk.last.entry if walk.last else None
    if isinstance(head, str):
        walk.add(FindingKind.HEAD, None, head)
        return
    if head is None:
        if last is not None:
            walk.add(
                FindingKind.HEAD,
                None,
                f"{label} is missing or empty: removal of the newest entries cannot be ruled out",
            )
        return
    key = walk.keys.get(last.kid) if last else next(iter(walk.keys.values()), None)
    if key is None or not head.mac_ok(key):
        walk.add(FindingKind.HEAD, None, f"{label} does not authenticate under the audit key")
        return
    last_seq = last.seq if last else 0
    if head.seq > last_seq:
        segment = walk.last.segment if walk.last else (names[-1] if names else None)
        line = walk.last.line + 1 if walk.last else 1
        gap = (
            f"seq {last_seq + 1}" if head.seq == last_seq + 1 else f"seq {last_seq + 1}..{head.seq}"
        )
        walk.findings.append(
            Finding(
                FindingKind.TRUNCATED,
                f"entries {gap} were removed from the end of the log (the head records seq "
                f"{head.seq} in {head.segment})",
                file=segment,
                line=line,
                seq=last_seq + 1,
            )
        )
    elif walk.by_seq.get(head.seq, head.hash) != head.hash:
        walk.add(
            FindingKind.HEAD,
            None,
            f"{label} records seq {head.seq} with another hash than the log holds: the "
            "entry was replaced",
        )
