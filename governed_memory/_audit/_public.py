"""Verifying the audit log with public keys only: no audit key, no master key, read-only.

An auditor holds the deployment's Ed25519 public key and the checkpoint files
they were handed over time. :func:`verify_public` checks, reading the audit
folder only:

* the SHA-256 chain: every entry's ``hash`` matches its content (and its
  bytes are the canonical encoding), ``seq`` rises by one, each ``prev`` is
  the hash of the entry before, each segment starts with its anchor. These
  hashes need no key; an edit that did not recompute them shows here;
* every ``audit.checkpoint`` in the log whose signing key is given: its
  signature, and that the entry at its ``seq`` has the hash it signed. An
  edit that recomputed the hashes (anyone can) changes the hash a later
  checkpoint pinned, so every entry up to the newest checkpoint is
  authenticated by the signature;
* every kept checkpoint file: its signature, and that the log still holds
  the entry it pins, with the same hash. A log cut short after the newest
  checkpoint in it, or replaced by an older copy, no longer reaches a later
  kept checkpoint: ``rollback``;
* the head file's ``seq`` (unauthenticated without the audit key, so a hint
  only): a head ahead of the entries is reported as ``truncated``.

It cannot check the entries' MACs (they need the audit key; a notice says
so), nor authenticate entries after the newest checkpoint it verified: they
are chained, and a notice names their range. A log no given checkpoint
covers fails with ``no_checkpoint``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._crypto import PublicKey, verify_document
from .._errors import ConfigurationError
from ._binding import WORKSPACE_ID_ATTR
from ._checkpoint import Checkpoint
from ._entry import GENESIS, EntryFormatError
from ._events import AuditEvent
from ._log import HEAD_FILE, parse_head
from ._verify import Finding, FindingKind, VerifyReport, _Item, _load, finding_at

__all__ = ["CheckpointCheck", "PublicVerifyReport", "verify_public"]


@dataclass(frozen=True)
class CheckpointCheck:
    """What became of one checkpoint: ``pinned`` (its entry is in the log, as signed) or not."""

    source: str
    seq: int
    key_id: str | None
    status: str
    """``pinned``, ``unknown_key``, ``invalid``, ``purged`` or ``mismatch``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "seq": self.seq,
            "key_id": self.key_id,
            "status": self.status,
        }


@dataclass(frozen=True)
class PublicVerifyReport(VerifyReport):
    """:class:`VerifyReport` of a verification with public keys, plus its checkpoints."""

    checkpoints: tuple[CheckpointCheck, ...] = ()
    pinned_through: int | None = None
    """The newest seq a verified checkpoint pins (every entry up to it is authenticated)."""
    key_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "mode": "public_key",
            "key_ids": list(self.key_ids),
            "pinned_through": self.pinned_through,
            "checkpoints": [c.to_dict() for c in self.checkpoints],
        }


@dataclass
class _Chain:
    findings: list[Finding] = field(default_factory=list)
    by_seq: dict[int, str] = field(default_factory=dict)
    first_seq: int | None = None
    last: _Item | None = None
    segment_ids: set[str] = field(default_factory=set)
    purged: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

    def add(
        self, kind: FindingKind, item: _Item | None, message: str, seq: int | None = None
    ) -> None:
        self.findings.append(finding_at(kind, item, message, seq))


def verify_public(
    folder: str | Path,
    keys: PublicKey | Sequence[PublicKey],
    *,
    checkpoints: Sequence[tuple[str, Checkpoint]] = (),
) -> PublicVerifyReport:
    """Check the audit log in ``folder`` with public ``keys`` and kept ``checkpoints`` only.

    ``checkpoints`` are ``(source, checkpoint)`` pairs, ``source`` naming the
    file in findings. Reads only; never raises for what it finds.
    """
    folder = Path(folder)
    trusted = [keys] if isinstance(keys, PublicKey) else list(keys)
    early: list[Finding] = []
    names, items = _load(folder, early)
    chain = _Chain(findings=early)
    complete = _walk(chain, items)
    last_seq = chain.last.entry.seq if chain.last and chain.last.entry else None
    results = [
        result
        for item in items
        if item.entry is not None
        and item.entry.event == AuditEvent.CHECKPOINT
        and item.entry.seq in chain.by_seq
        for result in _in_log(chain, trusted, item)
    ]
    results += [_check(chain, trusted, source, cp, kept=True) for source, cp in checkpoints]
    pinned = max((r.seq for r in results if r.status == "pinned"), default=None)
    _check_head(folder, chain, last_seq)
    _coverage(chain, trusted, results, pinned, last_seq)
    return PublicVerifyReport(
        folder=folder,
        segments=tuple(names),
        entries=len(chain.by_seq),
        first_seq=chain.first_seq,
        last_seq=last_seq,
        findings=tuple(chain.findings),
        purged=tuple(chain.purged),
        repaired=tuple(chain.repaired),
        complete=complete,
        checkpoints=tuple(results),
        pinned_through=pinned,
        key_ids=tuple(k.key_id for k in trusted),
    )


def _in_log(chain: _Chain, trusted: list[PublicKey], item: _Item) -> list[CheckpointCheck]:
    """The check of one ``audit.checkpoint`` entry (none, and a finding, when it is unreadable)."""
    assert item.entry is not None
    try:
        checkpoint = Checkpoint.from_entry(item.entry)
    except ConfigurationError as exc:
        chain.add(FindingKind.CHECKPOINT, item, f"the checkpoint cannot be read: {exc}")
        return []
    return [_check(chain, trusted, f"entry seq {item.entry.seq}", checkpoint)]


def _walk(chain: _Chain, items: list[_Item]) -> bool:
    """The keyless SHA-256 chain, in order; False when it had to stop early."""
    repairs = {
        (e.attrs.get("segment"), e.attrs.get("line")): e.attrs.get("sha256")
        for e in (i.entry for i in items)
        if e is not None and e.event == AuditEvent.REPAIR
    }
    exp_seq: int | None = None
    exp_prev = GENESIS
    for index, item in enumerate(items):
        entry = item.entry
        if entry is None:
            if repairs.get((item.segment, item.line)) == hashlib.sha256(item.raw).hexdigest():
                chain.repaired.append(f"{item.segment}:{item.line}")
                continue
            if index == len(items) - 1:
                chain.add(FindingKind.TORN_TAIL, item, "the last line is not an entry (a crash)")
                return True
            chain.add(FindingKind.MALFORMED, item, f"the line is not an audit entry ({item.error})")
            return False
        if not (entry.hash_ok() and entry.canonical_ok()):
            chain.add(
                FindingKind.ALTERED,
                item,
                "fields were changed after the entry was written: its content does not match "
                "its hash",
            )
        if exp_seq is None:
            _start(chain, items, item)
        elif entry.seq > exp_seq:
            chain.add(
                FindingKind.REMOVED, item, f"entries seq {exp_seq}..{entry.seq - 1} are missing"
            )
        elif entry.seq < exp_seq:
            chain.add(
                FindingKind.REORDERED,
                item,
                f"entry seq {entry.seq} appears after seq {exp_seq - 1}",
            )
            return False
        elif entry.prev != exp_prev:
            chain.add(
                FindingKind.CHAIN_BROKEN,
                item,
                f"its prev hash does not match the hash of entry seq {entry.seq - 1}",
            )
        if (item.line == 1) != (entry.event == AuditEvent.SEGMENT):
            chain.add(FindingKind.MALFORMED, item, "segment anchors and segment files disagree")
        if entry.event == AuditEvent.DISCONTINUITY:
            chain.add(
                FindingKind.DISCONTINUITY,
                item,
                f"the log found its head file {entry.attrs.get('reason_code')} here; entries "
                "before it may have been removed",
            )
        if WORKSPACE_ID_ATTR in entry.attrs and entry.event in (
            AuditEvent.SEGMENT,
            AuditEvent.BIND,
        ):
            chain.segment_ids.add(str(entry.attrs[WORKSPACE_ID_ATTR]))
        chain.by_seq[entry.seq] = entry.hash
        chain.last = item
        exp_seq, exp_prev = entry.seq + 1, entry.hash
        if chain.first_seq is None:
            chain.first_seq = entry.seq
    return True


def _start(chain: _Chain, items: list[_Item], item: _Item) -> None:
    entry = item.entry
    assert entry is not None
    if entry.seq == 1 and entry.prev == GENESIS:
        return
    purge = next(
        (
            i.entry
            for i in reversed(items)
            if i.entry is not None
            and i.entry.event == AuditEvent.AUDIT_PURGE
            and i.entry.attrs.get("last_hash") == entry.prev
            and i.entry.attrs.get("last_seq") == entry.seq - 1
        ),
        None,
    )
    if purge is None:
        chain.add(
            FindingKind.MISSING_SEGMENT,
            item,
            f"the log starts at seq {entry.seq} and no audit.purge entry records the removal of "
            "the entries before it",
        )
    else:
        chain.purged.extend(str(s) for s in purge.attrs.get("segments") or ())


def _check(
    chain: _Chain,
    trusted: list[PublicKey],
    source: str,
    checkpoint: Checkpoint,
    *,
    kept: bool = False,
) -> CheckpointCheck:
    signature = verify_document(checkpoint.to_dict(), trusted)
    where = f"checkpoint {source} (seq {checkpoint.seq}, signed {checkpoint.created_at})"

    def result(status: str) -> CheckpointCheck:
        return CheckpointCheck(source, checkpoint.seq, signature.key_id, status)

    if signature.status == "unknown_key" or (signature.status == "unsigned" and not kept):
        if kept:
            chain.add(FindingKind.CHECKPOINT, None, f"{where}: {signature.reason}", checkpoint.seq)
        return result("unknown_key")
    if not signature.ok:
        chain.add(FindingKind.CHECKPOINT, None, f"{where}: {signature.reason}", checkpoint.seq)
        return result("invalid")
    if chain.segment_ids and checkpoint.workspace_id not in chain.segment_ids:
        chain.add(
            FindingKind.CHECKPOINT,
            None,
            f"{where} belongs to the log of workspace id {checkpoint.workspace_id}, this log to "
            f"{', '.join(sorted(chain.segment_ids))}",
            checkpoint.seq,
        )
        return result("invalid")
    last = chain.last.entry.seq if chain.last and chain.last.entry else 0
    found = chain.by_seq.get(checkpoint.seq)
    if found == checkpoint.hash:
        return result("pinned")
    if found is not None:
        chain.add(
            FindingKind.ROLLBACK,
            None,
            f"{where} signed entry seq {checkpoint.seq} with hash {checkpoint.hash[:16]}..., "
            f"the log holds another entry there ({found[:16]}...): the log was rewritten or "
            "replaced",
            checkpoint.seq,
        )
        return result("mismatch")
    if checkpoint.seq > last:
        chain.add(
            FindingKind.ROLLBACK,
            None,
            f"the log ends at seq {last}, but {where} records seq {checkpoint.seq}: entries "
            "were removed from the end, or the log was replaced by an older copy",
            checkpoint.seq,
        )
        return result("mismatch")
    chain.add(
        FindingKind.CHECKPOINT_UNCHECKED,
        None,
        f"{where} pins an entry before the oldest one the log still holds (seq "
        f"{chain.first_seq}); retention purged it, so it cannot be compared",
        checkpoint.seq,
    )
    return result("purged")


def _check_head(folder: Path, chain: _Chain, last_seq: int | None) -> None:
    try:
        head = parse_head((folder / HEAD_FILE).read_bytes())
    except (OSError, EntryFormatError):
        return
    if head is not None and head.seq > (last_seq or 0):
        chain.add(
            FindingKind.TRUNCATED,
            None,
            f"the head file records seq {head.seq}, the log ends at seq {last_seq}: entries "
            "were removed from the end (the head is not authenticated without the audit key)",
            head.seq,
        )


def _coverage(
    chain: _Chain,
    trusted: list[PublicKey],
    results: list[CheckpointCheck],
    pinned: int | None,
    last_seq: int | None,
) -> None:
    chain.add(
        FindingKind.UNAUTHENTICATED,
        None,
        "the entries' MACs were not checked (they need the audit key: `governed-memory audit "
        "verify` without --public-key)",
    )
    if last_seq is None:
        return
    if pinned is None:
        others = sorted({r.key_id for r in results if r.status == "unknown_key" and r.key_id})
        hint = (
            f"; the log's checkpoints are signed by key id(s) {', '.join(others)}" if others else ""
        )
        chain.add(
            FindingKind.NO_CHECKPOINT,
            None,
            f"no checkpoint signed by the given key(s) {', '.join(k.key_id for k in trusted)} "
            f"vouches for this log{hint}; make one with `governed-memory audit checkpoint`",
        )
    elif pinned < last_seq:
        chain.add(
            FindingKind.UNAUTHENTICATED,
            None,
            f"{_span(pinned + 1, last_seq)}, after the newest signed checkpoint: "
            "chained, but no signature vouches for them yet",
        )
    unknown = sorted({r.key_id for r in results if r.status == "unknown_key" and r.key_id})
    if unknown and pinned is not None:
        chain.add(
            FindingKind.CHECKPOINT_UNCHECKED,
            None,
            f"checkpoints in the log signed by key id(s) {', '.join(unknown)} were not checked "
            "(give their public keys to check them: after a rotation, the old one too)",
        )


def _span(first: int, last: int) -> str:
    return f"entry seq {first}" if first == last else f"entries seq {first}..{last}"
