"""The audit layer: OpenTelemetry spans and a tamper-evident local log, without content.

Modules, one concept each:

* ``_keys``    the audit key, its subkeys and keyed hashes of ids
* ``_entry``   one entry: canonical bytes, hash and MAC
* ``_events``  the event catalogue and the privacy filter for attributes
* ``_log``     the hash-chained, segmented, crash-safe JSON Lines log
* ``_verify``  finding the first altered, removed, inserted or reordered entry
* ``_trail``   the governance ``AuditSink``: spans + log
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes
from ._entry import GENESIS, AuditEntry
from ._events import GEN_AI_OPERATIONS, AuditEvent, audit_attributes
from ._keys import AUDIT_KEY_INFO, AuditKey, as_audit_key, generate_audit_key
from ._log import AuditLog, Head, Period, SegmentInfo
from ._trail import AuditTrail, audit_key_from_settings, audit_log_dir
from ._verify import Finding, FindingKind, VerifyReport, verify_log

__all__ = [
    "AUDIT_KEY_INFO",
    "GENESIS",
    "GEN_AI_OPERATIONS",
    "HEAD_FILE",
    "AuditEntry",
    "AuditEvent",
    "AuditKey",
    "AuditLog",
    "AuditTrail",
    "Finding",
    "FindingKind",
    "Head",
    "Period",
    "SegmentInfo",
    "VerifyReport",
    "as_audit_key",
    "audit_attributes",
    "audit_key_from_settings",
    "audit_log_dir",
    "configure_otlp",
    "generate_audit_key",
    "iter_entries",
    "list_segments",
    "tail_entries",
    "verify_log",
]

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._log import HEAD_FILE, iter_entries, list_segments, tail_entries
    from ._telemetry import configure_otlp

_LAZY: dict[str, str] = {
    "HEAD_FILE": "._log",
    "iter_entries": "._log",
    "list_segments": "._log",
    "tail_entries": "._log",
    "configure_otlp": "._telemetry",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)
