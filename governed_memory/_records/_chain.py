"""The record chain of an append-only log: a sequence number and the previous record's hash.

A chained log (the consent log) gives each record it appends two fields
inside the record itself, so inside the sealed envelope under encryption at
rest:

* ``seq``: the record's place in the log, 1 for the first record ever
  appended, one more for each record after it (never reused, also after
  retention removed records);
* ``prev``: the link of the record before it, where a record's link is the
  SHA-256 (first 16 bytes, hex) of its plaintext line, and the first
  record's ``prev`` is 32 zeros.

A reader walks the records in file order and refuses any record whose
``seq`` or ``prev`` does not continue the chain: a line replayed (copied
again), moved, swapped, or deleted from the middle, or a line from another
copy of the log, breaks it. Under encryption at rest the fields are sealed
with the record, so nobody without the master key can write a record that
continues the chain.

Retention removes records (expired consent) without touching the others'
bytes: the rewrite leaves one *removal note* at the end of the log, a line
``{"removed": [[first, last, link], ...], "v": 2}`` listing each run of
removed sequence numbers and the link of the run's last record, which is
what the record after the run names as ``prev``. A note holds no personal
data (numbers and hashes); the reader skips over exactly the runs it lists.

Records written before the chain (format version 1, without ``seq``) are an
*unchained prefix*: they are read as before, each counted as one sequence
number, and their link covers every line before them too (the link of such
a line is the hash of the previous link and its plaintext), so the first
chained record pins the whole prefix. An unchained line after a chained one
is refused: it is an old line replayed into the log.

What the chain cannot see: the newest records removed from the end of the
log, or the whole file replaced by an older copy (rollback). In a plaintext
workspace there is no key, so the chain detects a line copied, moved or
deleted, but anyone able to edit the file can also recompute the fields:
there it is a check against mistakes and naive edits, not an authentication.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GENESIS", "Chain", "Run", "is_note", "link_of", "merge_runs"]

GENESIS = bytes(16)
_LINK_TAG = b"governed-memory record chain v1\x00"
_PREFIX_TAG = b"governed-memory unchained prefix v1\x00"


def link_of(plain: bytes, previous: bytes | None = None) -> bytes:
    """The link of a record: the hash of its plaintext (and, unchained, of the link before it)."""
    if previous is None:
        return hashlib.sha256(_LINK_TAG + plain).digest()[:16]
    return hashlib.sha256(_PREFIX_TAG + previous + plain).digest()[:16]


def is_note(data: Mapping[str, Any]) -> bool:
    """Whether a line's JSON object is a removal note (not a record)."""
    return "removed" in data and "seq" not in data


@dataclass(frozen=True)
class Run:
    """Sequence numbers ``first`` to ``last`` were removed; ``link`` is the last one's link."""

    first: int
    last: int
    link: bytes

    def as_json(self) -> list[Any]:
        return [self.first, self.last, self.link.hex()]


def merge_runs(runs: Iterable[Run]) -> list[Run]:
    """``runs`` sorted, with adjacent ones joined (the link of the later one stays)."""
    merged: list[Run] = []
    for run in sorted(runs, key=lambda r: r.first):
        if merged and run.first <= merged[-1].last + 1:
            last = merged[-1]
            end = run if run.last >= last.last else last
            merged[-1] = Run(last.first, end.last, end.link)
        else:
            merged.append(run)
    return merged


@dataclass
class Chain:
    """Where a walk through a chained log stands: the last sequence number and its link.

    A record or note that does not continue the chain raises ``ValueError``
    with the reason; the log turns it into a :class:`StorageError` naming the line.
    """

    seq: int = 0
    link: bytes = GENESIS
    chained: bool = False  # a chained record was seen (no unchained one may follow)
    runs: dict[int, Run] = field(default_factory=dict)  # removal runs, by first number

    def copy(self) -> Chain:
        return Chain(self.seq, self.link, self.chained, dict(self.runs))

    def note(self, data: Mapping[str, Any]) -> None:
        """Take in a removal note's runs.

        Raises:
            ValueError: the note is not well formed.
        """
        try:
            for first, last, link in data["removed"]:
                if type(first) is not int or type(last) is not int or not 0 < first <= last:
                    raise ValueError(first, last)
                self.runs[first] = Run(first, last, bytes.fromhex(link))
        except (TypeError, ValueError) as exc:
            raise ValueError("its removal note is damaged") from exc

    def skip_removed(self) -> None:
        """Step over the runs of removed records that follow the current position."""
        while (run := self.runs.get(self.seq + 1)) is not None:
            self.seq, self.link = run.last, run.link

    def record(self, data: Mapping[str, Any], plain: bytes, *, legacy: bool) -> None:
        """Take in one record (``legacy``: of the unchained format).

        Raises:
            ValueError: the record does not continue the chain.
        """
        self.skip_removed()
        if legacy:
            if self.chained:
                raise ValueError(
                    "it is an unchained record (format version 1) after chained ones: an old "
                    "line copied into the log again"
                )
            self.seq, self.link = self.seq + 1, link_of(plain, self.link)
            return
        seq, prev = data.get("seq"), data.get("prev")
        if type(seq) is not int or not isinstance(prev, str):
            raise ValueError("it lacks its sequence number or link")
        if seq != self.seq + 1:
            hint = (
                "a line from earlier in the log copied again, or moved"
                if seq <= self.seq
                else "the lines before it were deleted, or it was moved"
            )
            raise ValueError(f"it has sequence number {seq} where {self.seq + 1} was due: {hint}")
        if prev != self.link.hex():
            raise ValueError(
                f"record {seq} does not name the record before it: a line replaced by one "
                "from another copy of the log, or edited"
            )
        self.seq, self.link, self.chained = seq, link_of(plain), True

    def next_fields(self) -> dict[str, Any]:
        """The chain fields of the record appended after this position."""
        self.skip_removed()
        return {"seq": self.seq + 1, "prev": self.link.hex()}
