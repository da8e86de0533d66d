"""Receipts: what an operation did, when, under which policy; never content.

The erasure receipt is defined here. Every receipt (erasure, rectification,
export) is finished by :func:`sign_receipt` just before it is stored, the
one place receipts are signed: with the deployment's signing key it gains a
``signature`` member (Ed25519 over its canonical JSON, see
``governed_memory._crypto._signing`` and docs/evidence.md); without one it
is stored unsigned. :func:`verify_receipt` checks one with public keys only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._crypto import (
    PublicKey,
    SignatureCheck,
    SigningKeyProvider,
    sign_document,
    verify_document,
)
from ._fields import Fields
from ._tombstones import ErasureScope, request_from_dict, request_to_dict

__all__ = [
    "BLOCKED",
    "PARTIAL",
    "ErasureReceipt",
    "FileRemoval",
    "HeldSummaries",
    "UnreachedItem",
    "sign_receipt",
    "verify_receipt",
]


def sign_receipt(body: dict[str, Any], signer: SigningKeyProvider | None) -> dict[str, Any]:
    """``body`` as it is stored: signed by ``signer``, or as it is when there is no key.

    Call it on the complete receipt document, right before it is written;
    any later change to the document breaks the signature.
    """
    return body if signer is None else sign_document(body, signer)


def verify_receipt(
    body: dict[str, Any], public_keys: PublicKey | Sequence[PublicKey]
) -> SignatureCheck:
    """Whether ``body`` (a stored or exported receipt) carries a valid signature by one of the keys.

    Needs no secret: ``status`` says ``signed``, ``unsigned``, ``unknown_key``
    or ``invalid`` (see :class:`~governed_memory._crypto.SignatureCheck`).
    """
    keys = [public_keys] if isinstance(public_keys, PublicKey) else list(public_keys)
    return verify_document(body, keys)


PARTIAL = "partial"
BLOCKED = "blocked"


@dataclass(frozen=True)
class FileRemoval:
    """What one erasure removed from one file (sizes and counts only).

    ``file`` is relative to the workspace. ``deleted`` is true when the whole
    file went (whole-agent erasure, or a subject's memory that held nothing
    else); ``bytes_written`` is the size of the rewritten file (0 when deleted).
    """

    agent: str
    file: str
    records: int
    summaries: int
    bytes_removed: int
    bytes_written: int
    deleted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "file": self.file,
            "records": self.records,
            "summaries": self.summaries,
            "bytes_removed": self.bytes_removed,
            "bytes_written": self.bytes_written,
            "deleted": self.deleted,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "erasure receipt") -> FileRemoval:
        return cls.from_fields(Fields(data, where))

    @classmethod
    def from_fields(cls, fields: Fields) -> FileRemoval:
        """Read from a stored record's fields (StorageError naming a wrong-typed one)."""
        return cls(
            agent=fields.text("agent"),
            file=fields.text("file"),
            records=fields.count("records"),
            summaries=fields.count("summaries"),
            bytes_removed=fields.count("bytes_removed"),
            bytes_written=fields.count("bytes_written"),
            deleted=fields.flag("deleted"),
        )


@dataclass(frozen=True)
class HeldSummaries:
    """Summaries of the erased subject an erasure left in one file: a hold covers them.

    A summary is derived from every subject of its lineage; a legal hold on
    another of them keeps it (``holds``: the ids of the holds that do).
    """

    agent: str
    file: str
    summaries: int
    holds: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "file": self.file,
            "summaries": self.summaries,
            "holds": list(self.holds),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "erasure receipt") -> HeldSummaries:
        return cls.from_fields(Fields(data, where))

    @classmethod
    def from_fields(cls, fields: Fields) -> HeldSummaries:
        """Read from a stored record's fields (StorageError naming a wrong-typed one)."""
        return cls(
            agent=fields.text("agent"),
            file=fields.text("file"),
            summaries=fields.count("summaries"),
            holds=fields.texts("holds"),
        )


@dataclass(frozen=True)
class UnreachedItem:
    """An item an erasure could not reach: which agent, which file, and why.

    ``reason`` is ``a symbolic link`` (never followed) or ``unreadable: <error>``.
    The data there survives until the cause is fixed and the erasure resumed.
    """

    agent: str
    file: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "file": self.file, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "erasure receipt") -> UnreachedItem:
        return cls.from_fields(Fields(data, where))

    @classmethod
    def from_fields(cls, fields: Fields) -> UnreachedItem:
        """Read from a stored record's fields (StorageError naming a wrong-typed one)."""
        return cls(
            agent=fields.text("agent"), file=fields.text("file"), reason=fields.text("reason")
        )


@dataclass(frozen=True)
class ErasureReceipt:
    """Proof of one completed erasure, stored with its tombstone.

    Counts are per agent and file. ``resumed`` is true when the erasure was
    interrupted and finished by a later run; the counts are still exact,
    since each agent's plan is logged durably before its files are rewritten.
    ``blocked`` lists the summaries a legal hold on another subject of their
    lineage kept (``state`` is then ``partial``: erase again once released).
    ``unreached`` lists the items the erasure could not reach (a symbolic
    link, an unreadable file): ``state`` is then ``blocked``, the erasure
    stays pending, and this receipt (stored with the pending tombstone)
    records what its last run did and what it left; ``completed_at`` is then
    when that run ended.
    """

    id: str
    scope: ErasureScope
    requested_at: str
    requested_by: str
    reason: str
    completed_at: str
    policy_id: str
    policy_version: str
    files: tuple[FileRemoval, ...]
    keys_shredded: tuple[str, ...]
    resumed: bool
    blocked: tuple[HeldSummaries, ...] = ()
    unreached: tuple[UnreachedItem, ...] = ()
    signature: dict[str, Any] | None = field(default=None, compare=False)
    """The ``signature`` member of a signed receipt (see :func:`sign_receipt`); None: unsigned."""

    @property
    def state(self) -> str:
        """``complete``; ``blocked`` when items were not reached (see ``unreached``);
        ``partial`` when a hold kept some summaries (see ``blocked``)."""
        if self.unreached:
            return BLOCKED
        return PARTIAL if self.blocked else "complete"

    @property
    def blocking_holds(self) -> tuple[str, ...]:
        """The ids of the holds that kept a summary, sorted."""
        return tuple(sorted({h for b in self.blocked for h in b.holds}))

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)

    @property
    def summaries(self) -> int:
        return sum(f.summaries for f in self.files)

    @property
    def agents(self) -> list[str]:
        return sorted({f.agent for f in self.files})

    @property
    def bytes_removed(self) -> int:
        return sum(f.bytes_removed for f in self.files)

    @property
    def bytes_written(self) -> int:
        return sum(f.bytes_written for f in self.files)

    def per_agent(self) -> dict[str, dict[str, int]]:
        """Totals per agent: files, records, summaries."""
        totals: dict[str, dict[str, int]] = {}
        for f in self.files:
            row = totals.setdefault(f.agent, {"files": 0, "records": 0, "summaries": 0})
            row["files"] += 1
            row["records"] += f.records
            row["summaries"] += f.summaries
        return totals

    def to_dict(self) -> dict[str, Any]:
        return {
            **request_to_dict(self),
            "completed_at": self.completed_at,
            "policy_id": self.policy_id,
            "policy_version": self.policy_version,
            "files": [f.to_dict() for f in self.files],
            "keys_shredded": list(self.keys_shredded),
            "resumed": self.resumed,
            "totals": {
                "agents": len(self.agents),
                "files": len(self.files),
                "records": self.records,
                "summaries": self.summaries,
                "bytes_removed": self.bytes_removed,
                "bytes_written": self.bytes_written,
            },
            # Only when a hold kept something or an item was not reached: every
            # other receipt keeps its bytes (and older releases read the rest).
            **({"state": self.state} if self.blocked or self.unreached else {}),
            **({"blocked": [b.to_dict() for b in self.blocked]} if self.blocked else {}),
            **({"unreached": [u.to_dict() for u in self.unreached]} if self.unreached else {}),
            **({"signature": dict(self.signature)} if self.signature is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "erasure receipt") -> ErasureReceipt:
        """The receipt of a stored document (``where`` names it in messages).

        Raises:
            StorageError: a field missing or of the wrong type, naming it.
        """
        fields = Fields(data, where)
        return cls(
            **request_from_dict(fields),
            completed_at=fields.text("completed_at"),
            policy_id=fields.version_text("policy_id"),
            policy_version=fields.version_text("policy_version"),
            files=tuple(FileRemoval.from_fields(f) for f in fields.records("files")),
            keys_shredded=fields.texts("keys_shredded"),
            resumed=fields.flag("resumed"),
            blocked=tuple(HeldSummaries.from_fields(b) for b in fields.records("blocked")),
            unreached=tuple(UnreachedItem.from_fields(u) for u in fields.records("unreached")),
            signature=fields.optional_record("signature"),
        )
