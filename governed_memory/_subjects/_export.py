"""The subject access export (GDPR Art. 15 and 20): one folder, four files, one receipt.

::

    DIR/
      export.json     versioned JSON, schema in docs/export-schema.json (from ``_schema``)
      export.md       the data, readable by the person it is about
      report.md       the Art. 15(1)(a)-(h) report a privacy officer hands to the person
      manifest.json   SHA-256 and size of the three files above, signed with the
                      deployment's key when one is configured (docs/evidence.md)

Beside the data, the document carries what Art. 15(1) asks (``_access``):
purposes and consent, recipients (from the audit trail), the retention rule
and deletion date of every artefact cited, and each record's source. The
export's receipt (``receipts/exports/<id>.json`` in the governance folder:
id, the subject's keyed hash, time, actor, each file's SHA-256) is written
once the folder is in place, so a request can be closed with its id.

The folder appears whole or not at all: the files are written into a
staging folder beside DIR (``.DIR.gm-export-<hex>``, 0700, files 0600), each
fsynced, then the staging folder is renamed to DIR and the parent fsynced.
A crash leaves only a staging folder, which the next export to the same DIR
removes. Everything is assembled in memory: in an encrypted workspace the
only plaintext that reaches disk is the export itself.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import DIR_MODE, fsync_dir, open_private, write_all
from .._errors import ConfigurationError, NotFoundError, StorageError
from .._records import (
    ErasureScope,
    ExportedFile,
    ExportReceipt,
    ExportReceiptStore,
    new_erasure_id,
    validate_text,
)
from ._access import purposes, recipients, retention
from ._collect import FileSeen, collect
from ._context import SubjectContext, subject_context
from ._erasure import DEFAULT_ACTOR, _scope
from ._markdown import render_markdown
from ._report import render_report
from ._schema import EXPORT_FORMAT, EXPORT_VERSION, ExportDocument
from ._unfinished import Unfinished, refuse_linked_agent

if TYPE_CHECKING:
    from .._governance import Governance

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportResult",
    "export_agent",
    "export_receipt",
    "export_receipts",
    "export_subject",
]

MANIFEST_FORMAT = "governed-memory-export-manifest"
MANIFEST_VERSION = 1  # unchanged by export version 2: a list of files (and now the export's id)
STAGING_MARK = ".gm-export-"


@dataclass(frozen=True)
class ExportResult:
    """Where an export went and what it holds (counts and file digests); ``id``: its receipt's."""

    out_dir: Path
    records: int
    summaries: int
    withheld_summaries: int
    files: dict[str, str]  # name -> sha256
    id: str = ""
    receipt: Path | str | None = None
    """The receipt's file; on a database, how its record place names it (a str)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "receipt": str(self.receipt) if self.receipt is not None else None,
            "out_dir": str(self.out_dir),
            "records": self.records,
            "summaries": self.summaries,
            "withheld_summaries": self.withheld_summaries,
            "files": dict(self.files),
        }


def export_subject(
    target: Governance | SubjectContext | str | os.PathLike[str],
    subject: str,
    out_dir: str | os.PathLike[str],
    *,
    agent: str | None = None,
    include_shared_summaries: bool = False,
    actor: str = DEFAULT_ACTOR,
) -> ExportResult:
    """Export everything the workspace holds about ``subject`` into the new folder ``out_dir``.

    Args:
        target: a :class:`~governed_memory.Governance` or a workspace folder.
        subject: the data subject.
        out_dir: a folder that does not exist yet, or is empty.
        agent: only this agent's files.
        include_shared_summaries: include the content of summaries that were
            also built from other subjects' records (withheld by default).
        actor: who made the export (stored in its receipt).

    Raises:
        ConfigurationError: ``out_dir`` exists and is not an empty folder.
        NotFoundError: ``agent`` has no folder.
        StorageError: reading the workspace or writing the export failed;
            no partial export is left at ``out_dir``. A file that cannot be
            read (damaged, its key missing, a symbolic link) fails the export:
            the message lists every such item with its agent, file and fix.
    """
    ctx = subject_context(target)
    return _export(ctx, _scope(subject, agent), Path(out_dir), include_shared_summaries, actor)


def export_agent(
    target: Governance | SubjectContext | str | os.PathLike[str],
    agent: str,
    out_dir: str | os.PathLike[str],
    *,
    actor: str = DEFAULT_ACTOR,
) -> ExportResult:
    """Export a whole agent's memory and archives (every subject) into ``out_dir``."""
    ctx = subject_context(target)
    return _export(ctx, _scope(None, agent), Path(out_dir), True, actor)


def export_receipts(
    target: Governance | SubjectContext | str | os.PathLike[str],
) -> list[ExportReceipt]:
    """Every export receipt of the workspace, oldest first."""
    store = _receipt_store(subject_context(target))
    return [r for r in (store.get(i) for i in store.ids()) if r is not None]


def export_receipt(
    target: Governance | SubjectContext | str | os.PathLike[str], export_id: str
) -> ExportReceipt | None:
    """The receipt of the export ``export_id`` (what closes an access request), or None.

    Raises:
        StorageError: the receipt is damaged, or sealed and cannot be opened.
    """
    return _receipt_store(subject_context(target)).get(export_id)


def _receipt_store(ctx: SubjectContext) -> ExportReceiptStore:
    return ExportReceiptStore(ctx.governance_dir, sealing=ctx.sealing)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("governed-memory")
    except PackageNotFoundError:
        return "unknown"


def _check_target(out: Path) -> None:
    if out.exists() or out.is_symlink():
        if out.is_symlink() or not out.is_dir():
            raise ConfigurationError(
                f"export folder {out} exists and is not a folder; give a new folder path"
            )
        if any(out.iterdir()):
            raise ConfigurationError(
                f"export folder {out} is not empty; an export never mixes with other files. "
                "Give a new folder path, or empty this one"
            )
    if not out.parent.is_dir():
        raise ConfigurationError(
            f"the parent folder {out.parent} of the export folder does not exist; create it first"
        )


def _export(
    ctx: SubjectContext, scope: ErasureScope, out: Path, include_shared: bool, actor: str
) -> ExportResult:
    validate_text("actor", actor, fix="give a name such as 'dpo@example.org'")
    refuse_linked_agent(ctx, scope, "exported")
    if scope.agent is not None and not ctx.has_agent(scope.agent):
        raise NotFoundError(
            f"{ctx.no_agent(scope.agent)}; check the name (governed-memory agents lists them)"
        )
    _check_target(out)
    ctx.check_signing("the export")
    data = collect(ctx, scope, include_shared_summaries=include_shared)
    unreadable: list[Unfinished] = data.pop("unreadable")
    if unreadable:
        _refuse(ctx, scope, unreadable)
    files_seen: list[FileSeen] = data.pop("files")
    moment = ctx.clock.now()
    now = moment.astimezone()
    export_id = new_erasure_id(moment)
    withheld = sum(1 for s in data["summaries"] if s["content"] is None)
    agents = {r["agent"] for r in data["records"] + data["summaries"]}
    document = ExportDocument.model_validate(
        {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "id": export_id,
            "generated_at": now.isoformat(),
            "generator": f"governed-memory {_version()}",
            "scope": scope.to_dict(),
            "policy": {"id": ctx.policy.id, "version": ctx.policy.version},
            "encrypted_workspace": ctx.encrypted,
            **data,
            "purposes": purposes(ctx, scope.subject),
            "recipients": recipients(ctx, data["audit"], ctx.agent_names()),
            "retention": retention(
                ctx, scope, files_seen, data["audit"], out, now.replace(tzinfo=None)
            ),
            "counts": {
                "records": len(data["records"]),
                "summaries": len(data["summaries"]),
                "withheld_summaries": withheld,
                "agents": len(agents),
            },
        }
    ).model_dump(mode="json")
    files = {
        "export.json": (json.dumps(document, ensure_ascii=False, indent=2) + "\n").encode("utf-8"),
        "export.md": render_markdown(document).encode("utf-8"),
        "report.md": render_report(document).encode("utf-8"),
    }
    digests = {name: hashlib.sha256(body).hexdigest() for name, body in files.items()}
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "id": export_id,
        "generated_at": document["generated_at"],
        "files": [
            {"path": name, "sha256": digests[name], "bytes": len(body)}
            for name, body in files.items()
        ],
    }
    signed = ctx.sign_receipt(manifest)
    files["manifest.json"] = (json.dumps(signed, indent=2) + "\n").encode("utf-8")
    digests["manifest.json"] = hashlib.sha256(files["manifest.json"]).hexdigest()
    _write_atomically(out, files)
    receipt = ExportReceipt(
        id=export_id,
        subject_hash=(
            ctx.pseudonym("subject", scope.subject)
            if ctx.pseudonym is not None and scope.subject is not None
            else None
        ),
        agent=scope.agent,
        created_at=document["generated_at"],
        actor=actor,
        policy_id=ctx.policy.id,
        policy_version=ctx.policy.version,
        out_dir=str(out.resolve()),
        files=tuple(ExportedFile(name, digests[name], len(body)) for name, body in files.items()),
    )
    receipts = _receipt_store(ctx)
    # After the folder is in place: a receipt never names files that are not there. A
    # crash between the two leaves an export without receipt: export again.
    receipts.write(ExportReceipt.from_dict(ctx.sign_receipt(receipt.to_dict())))
    ctx.audit.record(
        "export",
        agent=scope.agent,
        subject_id=scope.subject,
        outcome="ok",
        export_id=export_id,
        records=len(data["records"]),
        summaries=len(data["summaries"]),
        recipients=len(document["recipients"]["external"]),
        policy_id=ctx.policy.id,
        policy_version=ctx.policy.version,
    )
    return ExportResult(
        out_dir=out,
        records=len(data["records"]),
        summaries=len(data["summaries"]),
        withheld_summaries=withheld,
        files=digests,
        id=export_id,
        receipt=_receipt_where(ctx, receipts, export_id),
    )


def _receipt_where(ctx: SubjectContext, receipts: ExportReceiptStore, export_id: str) -> Path | str:
    """The receipt's file in the governance folder, or where a database keeps it (a description)."""
    if isinstance(ctx.governance_dir, Path):
        return receipts.folder / f"{export_id}.json"
    return f"export receipt {export_id} in {ctx.agents_where}"


def _refuse(ctx: SubjectContext, scope: ErasureScope, unreadable: list[Unfinished]) -> None:
    """Fail the export naming every item it could not read (audited, nothing written).

    An export that left them out would be an incomplete answer to an access
    request presented as a complete one.
    """
    agents = sorted({u.agent for u in unreadable})
    ctx.audit.record(
        "export",
        agent=scope.agent,
        subject_id=scope.subject,
        outcome="error",
        error=unreadable[0].error,
        agents=agents,
        unreadable=len(unreadable),
        policy_id=ctx.policy.id,
        policy_version=ctx.policy.version,
    )
    listed = "; ".join(u.describe() for u in unreadable)
    raise StorageError(
        f"export of {scope.describe()} refused: {len(unreadable)} item(s) in {len(agents)} "
        f"agent(s) cannot be read ({listed}); an export never leaves data out, so nothing "
        "was written. Fix each item as said, then export again"
    )


def _remove_stale_staging(out: Path) -> None:
    prefix = f".{out.name}{STAGING_MARK}"
    for entry in out.parent.iterdir():
        if entry.name.startswith(prefix) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _write_atomically(out: Path, files: dict[str, bytes]) -> None:
    staging = out.parent / f".{out.name}{STAGING_MARK}{secrets.token_hex(6)}"
    try:
        _remove_stale_staging(out)
        os.mkdir(staging, DIR_MODE)
        os.chmod(staging, DIR_MODE)
        for name, body in files.items():
            fd = open_private(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                write_all(fd, body)
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(staging)
        try:
            # Replaces an empty folder at ``out`` (POSIX rename); fails if it
            # gained files meanwhile, so nothing of anyone's is overwritten.
            os.rename(staging, out)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise ConfigurationError(
                    f"export folder {out} was created or filled by someone else during the "
                    "export; give a new folder path"
                ) from exc
            raise
        fsync_dir(out.parent)
    except ConfigurationError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    except OSError as exc:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging, ignore_errors=True)
        raise StorageError(
            f"cannot write the export to {out}: {exc}; nothing was left there"
        ) from exc
