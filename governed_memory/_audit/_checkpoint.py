"""Audit checkpoints: the chain head, signed with the deployment's Ed25519 key.

A checkpoint records the newest entry of the log when it was made (its
``seq``, its ``hash`` and its ``ts``) and is signed (see
``governed_memory._crypto._signing``): the document an auditor keeps is::

    {"format": "governed-memory-audit-checkpoint", "v": 1,
     "seq": 4812, "hash": "<sha256 of entry 4812>", "ts": "<its time>",
     "created_at": "<when signed>", "workspace_id": "<the log's workspace>",
     "signature": {"v": 1, "alg": "Ed25519", "key_id": "...", "value": "..."}}

Each entry's ``hash`` covers the one before it, so a checkpoint's hash
pins every entry up to its ``seq``. The checkpoint is also appended to the
log itself as an ``audit.checkpoint`` entry (its attributes carry the same
fields), under the log's lock, right after the head it signs; the newest one
can be exported again later (:func:`latest_checkpoint`).

What it proves is in ``_public`` (verification with the public key alone)
and docs/evidence.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import open_private, write_all
from .._crypto import SIGNATURE_FIELD, SigningKeyProvider, sign_document
from .._errors import ConfigurationError, NotFoundError
from ._binding import read_workspace_id
from ._entry import AuditEntry, canonical, format_ts, parse_entry
from ._events import AuditEvent
from ._log import iter_entries

if TYPE_CHECKING:
    from .._protocols import AuditStorage
    from ._storage import AuditLogLike

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "latest_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
    "write_checkpoint_file",
]

CHECKPOINT_FORMAT = "governed-memory-audit-checkpoint"
CHECKPOINT_VERSION = 1
_SIGNATURE_ATTRS = {"v": "signature_v", "alg": "alg", "key_id": "key_id", "value": "signature"}


@dataclass(frozen=True)
class Checkpoint:
    """One signed checkpoint (``signature`` is its document's ``signature`` member)."""

    seq: int
    hash: str
    ts: str
    created_at: str
    workspace_id: str | None
    signature: dict[str, Any]

    @property
    def key_id(self) -> str | None:
        value = self.signature.get("key_id")
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, Any]:
        """The document, as signed and as an auditor keeps it."""
        return {
            "format": CHECKPOINT_FORMAT,
            "v": CHECKPOINT_VERSION,
            "seq": self.seq,
            "hash": self.hash,
            "ts": self.ts,
            "created_at": self.created_at,
            "workspace_id": self.workspace_id,
            SIGNATURE_FIELD: dict(self.signature),
        }

    def attrs(self) -> dict[str, Any]:
        """The attributes of its ``audit.checkpoint`` entry."""
        out: dict[str, Any] = {
            "outcome": "ok",
            "head_seq": self.seq,
            "head_hash": self.hash,
            "head_ts": self.ts,
            "created_at": self.created_at,
        }
        if self.workspace_id is not None:
            out["workspace_id"] = self.workspace_id
        for name, attr in _SIGNATURE_ATTRS.items():
            out[attr] = self.signature.get(name)
        return out

    @classmethod
    def from_entry(cls, entry: AuditEntry) -> Checkpoint:
        """The checkpoint an ``audit.checkpoint`` entry records.

        Raises:
            ConfigurationError: the entry lacks a field (naming it).
        """
        attrs = dict(entry.attrs)
        signature = {name: attrs.get(attr) for name, attr in _SIGNATURE_ATTRS.items()}
        where = f"audit.checkpoint entry seq {entry.seq}"
        return _read(attrs, where, "head_", signature)

    @classmethod
    def from_dict(cls, data: Any, where: str = "checkpoint") -> Checkpoint:
        """The checkpoint of a kept document (``where`` names it in messages).

        Raises:
            ConfigurationError: not a checkpoint document of this version.
        """
        if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
            raise ConfigurationError(
                f'{where} is not an audit checkpoint (no "format": "{CHECKPOINT_FORMAT}"); '
                "give a file written by `governed-memory audit checkpoint --out FILE`"
            )
        if data.get("v") != CHECKPOINT_VERSION:
            raise ConfigurationError(
                f"{where} has checkpoint format version {data.get('v')!r}; this release reads "
                f"version {CHECKPOINT_VERSION} (written by a newer governed_memory, or edited)"
            )
        signature = data.get(SIGNATURE_FIELD)
        return _read(data, where, "", signature if isinstance(signature, dict) else {})


def _read(data: dict[str, Any], where: str, prefix: str, signature: dict[str, Any]) -> Checkpoint:
    """A checkpoint from a document (``prefix`` ``""``) or an entry's attributes (``head_``)."""
    workspace = data.get("workspace_id")
    return Checkpoint(
        seq=_int(data.get(f"{prefix}seq"), where, f"{prefix}seq"),
        hash=_text(data.get(f"{prefix}hash"), where, f"{prefix}hash"),
        ts=_text(data.get(f"{prefix}ts"), where, f"{prefix}ts"),
        created_at=_text(data.get("created_at"), where, "created_at"),
        workspace_id=workspace if isinstance(workspace, str) else None,
        signature=signature,
    )


def _int(value: Any, where: str, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigurationError(f"{where}: field {name!r} is {value!r}, not an integer")
    return value


def _text(value: Any, where: str, name: str) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"{where}: field {name!r} is {value!r}, not a string")
    return value


def write_checkpoint(log: AuditLogLike, signer: SigningKeyProvider) -> Checkpoint:
    """Sign the log's newest entry and append the ``audit.checkpoint`` entry recording it.

    Raises:
        NotFoundError: the log holds no entry yet (there is nothing to sign).
        AuditWriteError: the entry could not be written.
    """
    when = log.clock.now()
    bound = getattr(log, "workspace", None)  # the file log's workspace binding
    workspace = read_workspace_id(bound) if bound is not None else None
    where = getattr(log, "folder", None) or getattr(log, "where", log)
    made: list[Checkpoint] = []

    def attrs_of(head: AuditEntry | None) -> dict[str, Any]:
        if head is None:
            raise NotFoundError(
                f"the audit log in {where} holds no entry yet, so there is no head to "
                "checkpoint; checkpoint it once an operation was audited"
            )
        body = {
            "format": CHECKPOINT_FORMAT,
            "v": CHECKPOINT_VERSION,
            "seq": head.seq,
            "hash": head.hash,
            "ts": head.ts,
            "created_at": format_ts(when),
            "workspace_id": workspace,
        }
        signed = sign_document(body, signer)
        checkpoint = Checkpoint.from_dict(signed)
        made.append(checkpoint)
        return checkpoint.attrs()

    log.append_after(AuditEvent.CHECKPOINT, attrs_of)
    return made[0]


def latest_checkpoint(folder: Path | AuditStorage) -> Checkpoint:
    """The newest ``audit.checkpoint`` recorded in the log in ``folder``, or an AuditStorage (reads only).

    Raises:
        NotFoundError: the log records none.
    """
    found: AuditEntry | None = None
    entries = iter_entries(Path(folder)) if isinstance(folder, str | Path) else folder.entries()
    for entry in entries:
        if entry.event == AuditEvent.CHECKPOINT:
            found = (
                entry if isinstance(entry, AuditEntry) else parse_entry(canonical(entry.to_dict()))
            )
    if found is None:
        raise NotFoundError(
            f"the audit log in {folder} records no checkpoint yet; make one with "
            "`governed-memory audit checkpoint` (needs the signing key), or set "
            "evidence.checkpoint_every for the scheduler"
        )
    return Checkpoint.from_entry(found)


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """A kept checkpoint file.

    Raises:
        ConfigurationError: unreadable, not JSON, or not a checkpoint.
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"checkpoint file {file} cannot be read: {exc.strerror}") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(f"checkpoint file {file} is not JSON ({exc})") from exc
    return Checkpoint.from_dict(data, f"checkpoint file {file}")


def write_checkpoint_file(path: str | os.PathLike[str], checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` to a new file (0600, fsynced); an existing file is never replaced.

    Raises:
        ConfigurationError: the file exists or cannot be created.
    """
    file = Path(path)
    body = (json.dumps(checkpoint.to_dict(), indent=2, sort_keys=True) + "\n").encode("utf-8")
    try:
        fd = open_private(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        raise ConfigurationError(
            f"{file} exists; checkpoints are kept, never overwritten: give a new file name"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"cannot create {file}: {exc.strerror}") from exc
    try:
        write_all(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
