"""Binding the audit log to its workspace, so another workspace's log is told apart.

Two workspaces may share an audit key (one key per deployment is common).
Their logs are then equally authentic, and replacing one workspace's whole
audit folder by the other's would verify. To tell them apart, the workspace
gets a random id, kept in the governance folder beside (not inside) the
audit folder: ``<workspace>/.governed_memory/audit-workspace-id`` (32 hex
digits, 0600, written once, atomically). Every segment anchor
(``audit.segment``) a workspace's log writes names it as ``workspace_id``,
under the MAC like any attribute, and ``audit verify`` checks the anchors
against the workspace's file:

* an anchor naming another id: the segment (or the whole log) is another
  workspace's (``foreign_log``);
* the id file exists but no anchor is bound: a log from before the binding
  was put in place of this workspace's bound one (``foreign_log``);
* the log is bound but the workspace has no id file: the file was removed or
  the log was moved here (``foreign_log``);
* neither is bound: a log written before this version (``unbound``, a
  notice: it verifies). The first append to such a log, while the workspace
  has no id yet, creates the id and writes an ``audit.bind`` entry naming it,
  which counts like a bound anchor from then on.

What it cannot catch: a rollback of the log to an older copy of itself
(same workspace, same key); see docs/audit.md, "Limits".
"""

from __future__ import annotations

import contextlib
import re
import secrets
from pathlib import Path

from .._base import GOVERNANCE_DIR, ensure_private_dir, link_exclusive
from .._errors import AuditWriteError

__all__ = ["BINDING_FILE", "WORKSPACE_ID_ATTR", "binding_path", "read_workspace_id", "workspace_id"]

BINDING_FILE = "audit-workspace-id"
WORKSPACE_ID_ATTR = "workspace_id"
_ID = re.compile(r"^[0-9a-f]{32}$")


def binding_path(workspace: str | Path) -> Path:
    """``<workspace>/.governed_memory/audit-workspace-id``."""
    return Path(workspace) / GOVERNANCE_DIR / BINDING_FILE


def read_workspace_id(workspace: str | Path) -> str | None:
    """The workspace's id as written (None when it has none); never creates it.

    A damaged file is returned as its text (stripped), which no anchor matches,
    so verify reports it rather than raising.
    """
    try:
        return binding_path(workspace).read_bytes().decode("ascii", "replace").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"<unreadable: {exc.strerror or exc}>"


def workspace_id(workspace: str | Path) -> str:
    """The workspace's id, created (random, 128 bits) when it has none yet.

    Raises:
        AuditWriteError: the file is damaged or cannot be read or created.
    """
    path = binding_path(workspace)
    try:
        found = read_workspace_id(workspace)
        if found is None:
            ensure_private_dir(path.parent)
            with contextlib.suppress(FileExistsError):  # another writer made it first: theirs
                link_exclusive(path.parent, (secrets.token_hex(16) + "\n").encode(), [path.name])
            found = read_workspace_id(workspace)
    except OSError as exc:
        raise AuditWriteError(
            f"cannot create {path}, the id that binds the audit log to this workspace: {exc}; "
            "check free space and permissions of the governance folder"
        ) from exc
    if found is None or not _ID.match(found):
        raise AuditWriteError(
            f"{path} does not hold a workspace id (32 hex digits) but {found!r}; it binds the "
            "audit log to this workspace: restore it from a backup of the workspace (it never "
            "changes), then run `governed-memory audit verify`"
        )
    return found
