"""The catalogue of audited events and the rules for what their attributes may hold.

Every governed operation is recorded under one event name (:class:`AuditEvent`).
Attributes pass through :func:`audit_attributes`, which is the only way into a
span or a log entry, and which enforces the privacy rules:

* agent names and subject ids become keyed hashes (``agent.hash``,
  ``subject.hash``); so do ``actor`` (hashed as a subject) and hold ids;
* message content and summaries (``content``, ``summary``) are dropped unless
  the policy sets ``audit.include_content``;
* raw ids and free text that may name a subject (``reason``) are dropped
  unless the policy sets ``audit.include_subject_ids``;
* other strings are kept only for catalogued keys (``purpose``, ``model``,
  ...); numbers and booleans (counts, bytes, flags) are always kept.

Unknown string attributes are dropped rather than recorded: a new attribute
that carries text must be added to the catalogue (and docs/audit.md) first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from .._errors import ConfigurationError
from ._keys import AuditKey

__all__ = [
    "CONTENT_KEYS",
    "GEN_AI_OPERATIONS",
    "IDENTIFYING_TEXT_KEYS",
    "SAFE_STRING_KEYS",
    "SPAN_PREFIX",
    "AttrValue",
    "AuditEvent",
    "audit_attributes",
    "span_attributes",
    "span_name",
    "validate_event",
]

AttrValue = str | int | float | bool | list[str]


class AuditEvent(StrEnum):
    """Event names of the audit trail (see docs/audit.md for their attributes)."""

    PERSIST = "persist"
    """A message block was written to MEMORY.md (or kept off disk: ``memory_only``)."""
    PRELOAD = "preload"
    """MEMORY.md was read back into a new Conversation (once per subject)."""
    COMPACT = "compact"
    """MEMORY.md was replaced by a fresh header and a summary."""
    ARCHIVE = "archive"
    """MEMORY.md was archived before a compaction."""
    SUMMARIZE = "summarize"
    """A summarizer model was allowed, replaced by the local one, or skipped."""
    PURGE = "purge"
    """Retention deleted artefacts (archives, memories, exports, segments, ...)."""
    ERASE = "erase"
    """A subject's or agent's records were erased."""
    EXPORT = "export"
    """A subject's or agent's records were exported."""
    RECTIFY = "rectify"
    """A subject's record was corrected everywhere it is stored (keyed hashes, never content)."""
    SHOW = "memory.show"
    """An operator printed an agent's (or a subject's) records (``show``): counts, never content."""
    ISOLATE = "memory.isolate"
    """An agent's records that name a subject were moved to the subjects' own memories."""
    SESSION_POP = "session.pop"
    """An OpenAI Agents SDK session's newest item was removed (``pop_item``)."""
    SESSION_CLEAR = "session.clear"
    """An OpenAI Agents SDK session's items were removed (``clear_session``)."""
    CONSENT_GRANT = "consent.grant"
    CONSENT_WITHDRAW = "consent.withdraw"
    HOLD_PLACE = "hold.place"
    HOLD_RELEASE = "hold.release"
    REQUEST_OPEN = "request.open"
    """A data-subject request was entered in the register (or a follow-up the library opened)."""
    REQUEST_VERIFY = "request.verify"
    """The identity of a request's data subject was verified."""
    REQUEST_EXTEND = "request.extend"
    """A request's time limit was extended (GDPR Art. 12(3))."""
    REQUEST_BLOCK = "request.block"
    """A request could not be carried out yet (a legal hold, an unreachable file)."""
    REQUEST_CLOSE = "request.close"
    """A request was closed: answered (with its receipt), partial, refused or withdrawn."""
    REQUEST_DUE = "request.due"
    """The scheduler found a request coming due (``due_soon``) or overdue (``overdue``)."""
    POLICY_LOAD = "policy.load"
    KEYS_CREATE = "keys.create"
    """A data key was created for an agent or subject (encryption at rest)."""
    KEYS_ROTATE = "keys.rotate"
    """Data keys were re-wrapped under a new master key (key rotation)."""
    KEYS_REENCRYPT = "keys.reencrypt"
    """Files were re-encrypted under new data keys."""
    KEYS_SHRED = "keys.shred"
    """Data keys were destroyed (crypto-shredding)."""
    KEYS_AUTHENTICATE = "keys.authenticate"
    """An untagged keyring's entries were tagged (authenticated under the master key)."""
    ENCRYPT_WORKSPACE = "encrypt-workspace"
    """A plaintext workspace was encrypted (``encrypt-workspace``)."""
    DECRYPT_WORKSPACE = "decrypt-workspace"
    """An encrypted workspace was decrypted back to plaintext (``decrypt-workspace``)."""
    DECRYPT = "decrypt"
    """Encrypted data failed to decrypt or authenticate (outcome ``error``)."""
    RECOVER = "recover"
    """A torn final frame of an encrypted file was cut away after a crash."""
    # Written by the log itself.
    SEGMENT = "audit.segment"
    """First entry of each segment file; links it to the segment before."""
    AUDIT_PURGE = "audit.purge"
    """Whole audit segments were removed by retention."""
    REPAIR = "audit.repair"
    """A torn last line (crash during an append) was closed off."""
    DISCONTINUITY = "audit.discontinuity"
    """The log found its head file ahead of, or missing from, the entries on disk."""
    BIND = "audit.bind"
    """A log from before workspace binding was bound to its workspace (names its id)."""
    REKEY = "audit.rekey"
    """The audit key changed (it derives from a rotated master key); endorsed by the old key."""
    CHECKPOINT = "audit.checkpoint"
    """The chain head (seq, hash, time) signed with the deployment's Ed25519 key (docs/evidence.md)."""
    # The browser console's access control (docs/console-auth.md).
    CONSOLE_LOGIN = "console.login"
    """A console sign-in, accepted (``ok``) or refused (``denied``, with a ``reason_code``)."""
    CONSOLE_LOGOUT = "console.logout"
    """A console sign-out (the session revoked on the server)."""
    CONSOLE_ACCESS = "console.access"
    """A console page refused to a signed-in user whose role may not use it."""
    CONSOLE_CSRF = "console.csrf"
    """A signed-in user's form refused: CSRF token missing or wrong, or a replayed form."""
    CONSOLE_VIEW = "console.view"
    """A console page showed personal data (``kind``: the page), recorded before it was shown."""


GEN_AI_OPERATIONS: Mapping[str, str] = {
    AuditEvent.PERSIST: "create_memory",
    AuditEvent.PRELOAD: "search_memory",
    AuditEvent.COMPACT: "update_memory",
    AuditEvent.PURGE: "delete_memory",
    AuditEvent.ERASE: "delete_memory",
    AuditEvent.SESSION_POP: "delete_memory",
    AuditEvent.SESSION_CLEAR: "delete_memory",
    AuditEvent.EXPORT: "search_memory",
    AuditEvent.RECTIFY: "update_memory",
    AuditEvent.SHOW: "search_memory",
}
"""``gen_ai.operation.name`` (OpenTelemetry GenAI semantic conventions) of the
events that are memory operations in its sense."""

SPAN_PREFIX = "governed_memory."

_RENAMES = {"policy_id": "policy.id", "policy_version": "policy.version", "error": "error.type"}
_HASHED = {
    "actor": ("subject", "actor.hash"),
    "requested_by": ("subject", "requested_by.hash"),
    "hold_id": ("hold", "hold.hash"),
}
_HASHED_LISTS = {
    "subjects": ("subject", "subject.hashes"),
    "agents": ("agent", "agent.hashes"),
    "holds": ("hold", "hold.hashes"),
    "hold_ids": ("hold", "hold.hashes"),
}
SAFE_STRING_KEYS = frozenset(
    {
        "purpose",
        "decision",
        "model",
        "source",
        "key_id",
        "old_key_id",
        "new_key_id",
        "format",
        "trigger",
        "scope",
        "kind",
        "rule",
        "mode",
        "artefact",
        "reason_code",
        "erasure_id",
        "rectification_id",
        "record_id",
        "new_hash",
        "summaries_mode",
        "export_id",
        "request_id",
        "receipt_id",
        "due",
        "deadline",
        "purge_id",
        "as_of",
        "grace",
        "to_key_id",
        "segment",
        "previous_segment",
        "head_hash",
        "found_hash",
        "last_hash",
        "sha256",
        "error.type",
        "policy.id",
        "policy.version",
    }
)
"""Keys whose string values are recorded as they are (no personal data by design)."""
_SAFE_LIST_KEYS = frozenset(
    {"purposes", "segments", "rules", "kinds", "artefacts", "from_key_ids", "old_hashes"}
)
CONTENT_KEYS = frozenset({"content", "summary"})
"""Recorded only with ``audit.include_content``."""
IDENTIFYING_TEXT_KEYS = frozenset({"reason"})
"""Free text that may name a subject; recorded only with ``audit.include_subject_ids``."""

_EVENT = re.compile(r"^[a-z][a-z_-]*(\.[a-z_-]+)*$")
_TOKEN = re.compile(r"^[a-z][a-z_]{0,31}$")
_KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
# Names known to pass the rules above, so the hot path skips the regex.
_CATALOGUED = frozenset(AuditEvent)
_OUTCOMES = frozenset({"ok", "error", "memory_only", "denied"})
_NUMBERS = (bool, int, float)


def validate_event(event: str) -> str:
    """Return ``event`` if it is a dotted lower-case name.

    Raises:
        ConfigurationError: naming the event and the rule.
    """
    if not isinstance(event, str) or (event not in _CATALOGUED and not _EVENT.match(event)):
        raise ConfigurationError(
            f"audit event {event!r} is not a dotted lower-case name like 'persist' or "
            "'consent.grant'; use one of governed_memory.AuditEvent"
        )
    return event


def audit_attributes(
    *,
    agent: str | None,
    subject_id: str | None,
    outcome: str,
    attrs: Mapping[str, Any],
    key: AuditKey,
    include_content: bool = False,
    include_subject_ids: bool = False,
) -> dict[str, AttrValue]:
    """The attributes of one event as they may be recorded (see the module docstring).

    Raises:
        ConfigurationError: ``outcome`` is not a short lower-case token.
    """
    if not isinstance(outcome, str) or (outcome not in _OUTCOMES and not _TOKEN.match(outcome)):
        raise ConfigurationError(
            f"audit outcome {outcome!r} is not a short lower-case token like 'ok' or 'error'"
        )
    out: dict[str, AttrValue] = {"outcome": outcome}
    if agent is not None:
        out["agent.hash"] = key.pseudonym("agent", agent)
        if include_subject_ids:
            out["agent.name"] = agent
    if subject_id is not None:
        out["subject.hash"] = key.pseudonym("subject", subject_id)
        if include_subject_ids:
            out["subject.id"] = subject_id
    for raw_name, value in attrs.items():
        if value is None:
            continue
        name = _RENAMES.get(raw_name, raw_name)
        if name in _HASHED:
            kind, target = _HASHED[name]
            out[target] = key.pseudonym(kind, str(value))
            if include_subject_ids:
                out[name] = str(value)
        elif name in _HASHED_LISTS:
            kind, target = _HASHED_LISTS[name]
            values = _as_list(value)
            out[target] = sorted(key.pseudonym(kind, v) for v in values)
            if include_subject_ids:
                out[name] = sorted(values)
        elif name in CONTENT_KEYS:
            if include_content:
                out[name] = str(value)
        elif name in IDENTIFYING_TEXT_KEYS:
            if include_subject_ids:
                out[name] = str(value)
        elif isinstance(value, _NUMBERS):
            if _KEY.match(name):
                out[name] = value
        elif isinstance(value, str):
            if name in SAFE_STRING_KEYS:
                out[name] = value
        elif name in _SAFE_LIST_KEYS and isinstance(value, list | tuple | set | frozenset):
            out[name] = [str(v) for v in value]
    return out


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):  # "a,b" as some callers join ids
        return [v for v in value.split(",") if v]
    if isinstance(value, list | tuple | set | frozenset):
        return [str(v) for v in value]
    return [str(value)]


def span_name(event: str) -> str:
    """``gen_ai.operation.name`` for memory operations, else ``governed_memory <event>``."""
    return GEN_AI_OPERATIONS.get(event) or f"governed_memory {event}"


def span_attributes(
    event: str, attrs: Mapping[str, AttrValue], seq: int | None
) -> dict[str, AttrValue]:
    """Span attributes: ``governed_memory.<key>`` plus the GenAI operation name."""
    out: dict[str, AttrValue] = {f"{SPAN_PREFIX}event": event}
    operation = GEN_AI_OPERATIONS.get(event)
    if operation is not None:
        out["gen_ai.operation.name"] = operation
    for name, value in attrs.items():
        out[SPAN_PREFIX + name] = value
    if "error.type" in attrs:
        out["error.type"] = attrs["error.type"]
    if seq is not None:
        out[f"{SPAN_PREFIX}audit.seq"] = seq
    return out
