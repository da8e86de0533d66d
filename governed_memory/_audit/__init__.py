"""The audit layer: OpenTelemetry spans and a tamper-evident local log, without content.

Modules, one concept each:

* ``_keys``    the audit key, its subkeys and keyed hashes of ids
* ``_entry``   one entry: canonical bytes, hash and MAC
* ``_events``  the event catalogue and the privacy filter for attributes
* ``_log``     the hash-chained, segmented, crash-safe JSON Lines log
* ``_binding`` the workspace id every segment anchor names, so another
  workspace's log is told apart
* ``_verify``  finding the first altered, removed, inserted or reordered entry
* ``_trail``   the governance ``AuditSink``: spans + log
* ``_actor``   the sink wrapper that names the operator of a command in its entries
* ``_checkpoint`` signed checkpoints of the chain head (``audit.checkpoint``)
* ``_public``  verifying the log with public keys and kept checkpoints only
* ``_export``  reading the log for reviewers: whether a folder holds one, the
  entries since a time or an age as JSON Lines, writing them to a file
* ``_storage`` ``AuditLogLike``: what the trail, checkpoints and the CLI need of a
  log, so the file log and the PostgreSQL one (``_postgres``) serve them alike

For the CLI (its ``audit`` commands read the log without building a
Governance): ``audit_key_from_settings``, ``audit_keys_from_settings`` (the
key and its previous versions, for ``audit verify``) and ``audit_log_dir``
find the key and the folder from settings and policy; ``pinned_audit_key_text``
is ``audit keygen --from-master-key`` (the derived key, to pin it); ``audit_log_exists``,
``export_since``, ``export_lines`` and ``write_export`` read the log and write an
export, so the CLI reaches into no file name or record format and writes no
audit file itself; it opens the log as an ``AuditLogLike`` in one place and
checks it with ``verify_storage`` (any backend). ``ActorSink`` wraps a Governance's
sink for one command, so the entries the library records name the operator.
``write_checkpoint``, ``latest_checkpoint``, ``read_checkpoint`` and
``write_checkpoint_file`` are ``audit checkpoint`` and ``audit verify
--checkpoint``: the CLI signs, exports and reads checkpoints without a
Governance and without knowing their format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes
from ._entry import GENESIS, AuditEntry, canonical, format_ts, parse_entry, seal
from ._events import GEN_AI_OPERATIONS, AuditEvent, audit_attributes, validate_event
from ._keys import AUDIT_KEY_INFO, AuditKey, AuditKeyLike, as_audit_key, generate_audit_key
from ._log import (
    SEGMENT_PREFIX,
    SEGMENT_SUFFIX,
    AuditLog,
    Head,
    Period,
    SegmentInfo,
    rekey_endorsement,
    segments_to_purge,
)
from ._trail import (
    AuditTrail,
    audit_key_from_settings,
    audit_keys_from_settings,
    audit_log_dir,
    pinned_audit_key_text,
    previous_audit_keys,
)
from ._verify import Finding, FindingKind, VerifyReport, verify_log, verify_storage

__all__ = [
    "AUDIT_KEY_INFO",
    "GENESIS",
    "GEN_AI_OPERATIONS",
    "HEAD_FILE",
    "SEGMENT_PREFIX",
    "SEGMENT_SUFFIX",
    "ActorSink",
    "AuditEntry",
    "AuditEvent",
    "AuditKey",
    "AuditKeyLike",
    "AuditLog",
    "AuditLogLike",
    "AuditTrail",
    "Checkpoint",
    "Finding",
    "FindingKind",
    "Head",
    "Period",
    "PublicVerifyReport",
    "SegmentInfo",
    "VerifyReport",
    "as_audit_key",
    "audit_attributes",
    "audit_key_from_settings",
    "audit_keys_from_settings",
    "audit_log_dir",
    "audit_log_exists",
    "canonical",
    "configure_otlp",
    "export_lines",
    "export_since",
    "format_ts",
    "generate_audit_key",
    "iter_entries",
    "latest_checkpoint",
    "list_segments",
    "parse_entry",
    "pinned_audit_key_text",
    "previous_audit_keys",
    "read_checkpoint",
    "rekey_endorsement",
    "seal",
    "segments_to_purge",
    "tail_entries",
    "validate_event",
    "verify_log",
    "verify_public",
    "verify_storage",
    "write_checkpoint",
    "write_checkpoint_file",
    "write_export",
]

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._actor import ActorSink
    from ._checkpoint import (
        Checkpoint,
        latest_checkpoint,
        read_checkpoint,
        write_checkpoint,
        write_checkpoint_file,
    )
    from ._export import audit_log_exists, export_lines, export_since, write_export
    from ._log import HEAD_FILE, iter_entries, list_segments, tail_entries
    from ._public import PublicVerifyReport, verify_public
    from ._storage import AuditLogLike
    from ._telemetry import configure_otlp

_LAZY: dict[str, str] = {
    "ActorSink": "._actor",
    "Checkpoint": "._checkpoint",
    "latest_checkpoint": "._checkpoint",
    "read_checkpoint": "._checkpoint",
    "write_checkpoint": "._checkpoint",
    "write_checkpoint_file": "._checkpoint",
    "AuditLogLike": "._storage",
    "PublicVerifyReport": "._public",
    "verify_public": "._public",
    "audit_log_exists": "._export",
    "export_lines": "._export",
    "export_since": "._export",
    "write_export": "._export",
    "HEAD_FILE": "._log",
    "iter_entries": "._log",
    "list_segments": "._log",
    "tail_entries": "._log",
    "configure_otlp": "._telemetry",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
