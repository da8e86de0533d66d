"""The subject access export (GDPR Art. 15 and 20): one folder, three files.

::

    DIR/
      export.json     versioned JSON, schema in docs/export-schema.json
      export.md       the same, readable by the person it is about
      manifest.json   SHA-256 and size of the two files above: the export's receipt,
                      signed with the deployment's key when one is configured
                      (docs/evidence.md)

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
from .._records import ErasureScope
from ._collect import collect
from ._context import SubjectContext, subject_context
from ._erasure import _scope
from ._markdown import render_markdown
from ._unfinished import Unfinished, refuse_linked_agent

if TYPE_CHECKING:
    from .._governance import Governance

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "ExportResult", "export_agent", "export_subject"]

EXPORT_FORMAT = "governed-memory-export"
EXPORT_VERSION = 1
MANIFEST_FORMAT = "governed-memory-export-manifest"
STAGING_MARK = ".gm-export-"


@dataclass(frozen=True)
class ExportResult:
    """Where an export went and what it holds (counts and file digests)."""

    out_dir: Path
    records: int
    summaries: int
    withheld_summaries: int
    files: dict[str, str]  # name -> sha256

    def to_dict(self) -> dict[str, Any]:
        return {
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
) -> ExportResult:
    """Export everything the workspace holds about ``subject`` into the new folder ``out_dir``.

    Args:
        target: a :class:`~governed_memory.Governance` or a workspace folder.
        subject: the data subject.
        out_dir: a folder that does not exist yet, or is empty.
        agent: only this agent's files.
        include_shared_summaries: include the content of summaries that were
            also built from other subjects' records (withheld by default).

    Raises:
        ConfigurationError: ``out_dir`` exists and is not an empty folder.
        NotFoundError: ``agent`` has no folder.
        StorageError: reading the workspace or writing the export failed;
            no partial export is left at ``out_dir``. A file that cannot be
            read (damaged, its key missing, a symbolic link) fails the export:
            the message lists every such item with its agent, file and fix.
    """
    ctx = subject_context(target)
    return _export(ctx, _scope(subject, agent), Path(out_dir), include_shared_summaries)


def export_agent(
    target: Governance | SubjectContext | str | os.PathLike[str],
    agent: str,
    out_dir: str | os.PathLike[str],
) -> ExportResult:
    """Export a whole agent's memory and archives (every subject) into ``out_dir``."""
    ctx = subject_context(target)
    return _export(ctx, _scope(None, agent), Path(out_dir), True)


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
    ctx: SubjectContext, scope: ErasureScope, out: Path, include_shared: bool
) -> ExportResult:
    refuse_linked_agent(ctx, scope, "exported")
    if scope.agent is not None and not ctx.has_agent(scope.agent):
        raise NotFoundError(
            f"agent {scope.agent!r} has no folder in {ctx.agents_dir}; check the name "
            "(governed-memory agents lists them)"
        )
    _check_target(out)
    ctx.check_signing("the export")
    data = collect(ctx, scope, include_shared_summaries=include_shared)
    unreadable: list[Unfinished] = data.pop("unreadable")
    if unreadable:
        _refuse(ctx, scope, unreadable)
    now = ctx.clock.now().astimezone()
    document: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "generated_at": now.isoformat(),
        "generator": f"governed-memory {_version()}",
        "scope": scope.to_dict(),
        "policy": {"id": ctx.policy.id, "version": ctx.policy.version},
        "encrypted_workspace": ctx.encrypted,
        **data,
    }
    withheld = sum(1 for s in data["summaries"] if s["content"] is None)
    document["counts"] = {
        "records": len(data["records"]),
        "summaries": len(data["summaries"]),
        "withheld_summaries": withheld,
        "agents": len({r["agent"] for r in data["records"] + data["summaries"]}),
    }
    files = {
        "export.json": (json.dumps(document, ensure_ascii=False, indent=2) + "\n").encode("utf-8"),
        "export.md": render_markdown(document).encode("utf-8"),
    }
    digests = {name: hashlib.sha256(body).hexdigest() for name, body in files.items()}
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": EXPORT_VERSION,
        "generated_at": document["generated_at"],
        "files": [
            {"path": name, "sha256": digests[name], "bytes": len(body)}
            for name, body in files.items()
        ],
    }
    signed = ctx.sign_receipt(manifest)
    files["manifest.json"] = (json.dumps(signed, indent=2) + "\n").encode("utf-8")
    _write_atomically(out, files)
    ctx.audit.record(
        "export",
        agent=scope.agent,
        subject_id=scope.subject,
        outcome="ok",
        records=len(data["records"]),
        summaries=len(data["summaries"]),
        policy_id=ctx.policy.id,
        policy_version=ctx.policy.version,
    )
    return ExportResult(
        out_dir=out,
        records=len(data["records"]),
        summaries=len(data["summaries"]),
        withheld_summaries=withheld,
        files=digests,
    )


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
