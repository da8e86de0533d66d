"""The audit trail: one span and one log entry per governed operation.

:class:`AuditTrail` is the :class:`~governed_memory.AuditSink` a
:class:`~governed_memory.Governance` uses when its policy enables audit or a
TracerProvider is passed. Other layers call it the same way::

    governance.audit.record("purge", agent=None, subject_id=None, outcome="ok",
                            deleted=12, bytes_freed=40960, policy_id=..., policy_version=...)

It filters the attributes (:func:`audit_attributes`: ids become keyed hashes,
content only on opt-in), appends the entry to the hash-chained log (durable
before ``record`` returns; :class:`AuditWriteError` when it cannot be
written, so the operation fails), then emits the span. In default mode
(no policy, audit disabled, no TracerProvider) no trail exists and nothing
runs.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import secrets
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._base import AUDIT_DIR, GOVERNANCE_DIR, Clock
from .._errors import AuditWriteError, ConfigurationError
from .._policy import Policy, RetentionPolicy
from ._entry import AuditEntry
from ._events import AttrValue, audit_attributes, span_attributes, span_name, validate_event
from ._keys import AuditKey, AuditKeyLike, as_audit_key, derived_root
from ._log import AuditLog, Period
from ._telemetry import Telemetry
from ._verify import VerifyReport, verify_storage

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .._crypto import SigningKeyProvider
    from .._policy import Settings
    from ._checkpoint import Checkpoint
    from ._storage import AuditLogLike

__all__ = [
    "AuditTrail",
    "audit_key_from_settings",
    "audit_keys_from_settings",
    "audit_log_dir",
    "pinned_audit_key_text",
    "previous_audit_keys",
]

_MATCH_KEYS = ("agent.hash", "subject.hash", "actor.hash", "requested_by.hash")


def audit_log_dir(policy: Policy, workspace: str | Path) -> Path:
    """The audit folder: ``audit.log_dir`` (relative to the workspace), else ``<workspace>/.governed_memory/audit``."""
    configured = policy.audit.log_dir
    if configured:
        path = Path(configured).expanduser()
        return path if path.is_absolute() else Path(workspace) / path
    return Path(workspace) / GOVERNANCE_DIR / AUDIT_DIR


def _key_text_bytes(secret: Any, file: Path | None, variable: str) -> bytes | None:
    """The master key bytes of one variable pair (``<variable>`` / ``<variable>_FILE``)."""
    if secret is not None:
        text, source = secret.get_secret_value(), variable
    elif file is not None:
        path = Path(file)
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                f"master key file {path} cannot be read to derive the audit key: {exc}"
            ) from exc
        source = f"master key file {path}"
    else:
        return None
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError(
            f"{source} is not valid base64, so no audit key can be derived from it; set "
            "GOVERNED_MEMORY_AUDIT_KEY or fix the master key"
        ) from exc


def _master_key_bytes(settings: Settings) -> bytes | None:
    return _key_text_bytes(
        settings.master_key, settings.master_key_file, "GOVERNED_MEMORY_MASTER_KEY"
    )


def audit_key_from_settings(settings: Settings) -> AuditKey | None:
    """The audit key: ``GOVERNED_MEMORY_AUDIT_KEY``, else derived from the master key, else None.

    Raises:
        ConfigurationError: a configured key is malformed.
    """
    if settings.audit_key is not None:
        return AuditKey.from_text(settings.audit_key.get_secret_value())
    master = _master_key_bytes(settings)
    return AuditKey.derive_from_master(master) if master is not None else None


def pinned_audit_key_text(settings: Settings) -> str:
    """The audit key derived from the configured master key, as 64 hex digits to pin it.

    Set as GOVERNED_MEMORY_AUDIT_KEY, it is the same key (same key id), so the
    log continues unchanged, and the audit key stops following the master key.

    Raises:
        ConfigurationError: no master key is configured, or it is malformed.
    """
    master = _master_key_bytes(settings)
    if master is None:
        raise ConfigurationError(
            "no master key is configured, so there is no derived audit key to pin; set "
            "GOVERNED_MEMORY_MASTER_KEY[_FILE] to the master key the log was written under"
        )
    return derived_root(master).hex()


def previous_audit_keys(settings: Settings) -> list[AuditKey]:
    """The audit keys of earlier versions that the settings still give (versioned audit keys).

    Only an audit key derived from the master key has versions: during and
    after a master key rotation, the key derived from the previous master key
    (``GOVERNED_MEMORY_MASTER_KEY_OLD[_FILE]``) signed the entries before the
    log's ``audit.rekey``. An explicit ``GOVERNED_MEMORY_AUDIT_KEY`` never
    changes with the master key, so it has none.

    Raises:
        ConfigurationError: the previous master key is malformed.
    """
    if settings.audit_key is not None:
        return []
    old = _key_text_bytes(
        settings.master_key_old, settings.master_key_old_file, "GOVERNED_MEMORY_MASTER_KEY_OLD"
    )
    return [AuditKey.derive_from_master(old)] if old is not None else []


def audit_keys_from_settings(settings: Settings) -> list[AuditKey]:
    """The current audit key (first) and its previous versions; empty when none is configured."""
    current = audit_key_from_settings(settings)
    if current is None:
        return []
    return [current, *(k for k in previous_audit_keys(settings) if k.key_id != current.key_id)]


class TrailSettings(Protocol):
    """What :meth:`AuditTrail.for_governance` reads from a Governance (the layer above)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def workspace(self) -> Path: ...

    @property
    def tracer_provider(self) -> Any: ...

    @property
    def clock(self) -> Clock: ...


class AuditTrail:
    """Spans plus the hash-chained log; implements the governance ``AuditSink``.

    Args:
        key: the audit key (keyed hashes and the log's MACs): an
            :class:`AuditKey`, or its hex/base64 text or raw bytes.
        log: the durable log, an ``AuditLogLike`` (the file log, the database's;
            None: spans only).
        tracer_provider: where spans go (None: the global provider).
        spans: emit spans at all (default True).
        include_content: record ``content``/``summary`` attributes
            (policy ``audit.include_content``).
        include_subject_ids: record raw agent names, subject ids and free-text
            reasons beside their hashes (policy ``audit.include_subject_ids``).
        previous_keys: earlier versions of the audit key (derived from a
            rotated master key): entries they signed still verify, and
            :meth:`entries_for` finds the keyed hashes they computed.
    """

    def __init__(
        self,
        *,
        key: AuditKeyLike,
        previous_keys: Iterable[AuditKeyLike] = (),
        log: AuditLogLike | None = None,
        tracer_provider: TracerProvider | None = None,
        spans: bool = True,
        include_content: bool = False,
        include_subject_ids: bool = False,
    ) -> None:
        self._key = as_audit_key(key)
        self._previous = [as_audit_key(k) for k in previous_keys]
        self._log = log
        self._telemetry = Telemetry(tracer_provider) if spans else None
        self._include_content = include_content
        self._include_subject_ids = include_subject_ids

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        policy: Policy,
        workspace: str | Path,
        tracer_provider: TracerProvider | None = None,
        clock: Clock | None = None,
        key: AuditKey | None = None,
        period: Period | str = Period.MONTH,
    ) -> AuditTrail:
        """The trail a policy asks for: the log when ``audit.enabled``, spans always.

        Without a configured audit key and with audit disabled, keyed hashes use
        a random per-process key (they link within one process only).

        Raises:
            ConfigurationError: audit is enabled but no audit key is configured.
        """
        previous: list[AuditKey] = []
        if key is None:
            key = audit_key_from_settings(settings)
            previous = previous_audit_keys(settings)
        if key is None:
            if policy.audit.enabled:
                raise ConfigurationError(
                    f"policy {policy.id} v{policy.version} enables audit (audit.enabled = true) "
                    "but no audit key is configured; set GOVERNED_MEMORY_AUDIT_KEY (generate one "
                    "with `governed-memory audit keygen`) or GOVERNED_MEMORY_MASTER_KEY, kept "
                    "outside the workspace"
                )
            key = AuditKey(secrets.token_bytes(32))
        log = None
        if policy.audit.enabled:
            log = AuditLog(
                audit_log_dir(policy, workspace),
                key,
                clock=clock,
                period=period,
                previous_keys=previous,
                workspace=workspace,
            )
        return cls(
            key=key,
            previous_keys=previous,
            log=log,
            tracer_provider=tracer_provider,
            include_content=policy.audit.include_content,
            include_subject_ids=policy.audit.include_subject_ids,
        )

    @classmethod
    def for_governance(cls, governance: TrailSettings) -> AuditTrail:
        """The trail for a Governance's settings, policy, workspace, clock and tracer provider."""
        return cls.from_settings(
            governance.settings,
            policy=governance.policy,
            workspace=governance.workspace,
            tracer_provider=governance.tracer_provider,
            clock=governance.clock,
        )

    @property
    def key(self) -> AuditKey:
        return self._key

    @property
    def log(self) -> AuditLogLike | None:
        """The durable log (None when the policy does not enable audit): any ``AuditLogLike``."""
        return self._log

    # -- recording -------------------------------------------------------------

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        """Record one finished operation (the ``AuditSink`` method); see :meth:`record_entry`."""
        self.record_entry(operation, agent=agent, subject_id=subject_id, outcome=outcome, **attrs)

    def record_entry(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> AuditEntry | None:
        """Record one finished operation: the log entry (durable on return), then the span.

        Returns the log entry (None without a log).

        Raises:
            AuditWriteError: the log entry could not be written; the span is
                still emitted, marked as an error.
            ConfigurationError: ``operation`` or ``outcome`` is malformed.
        """
        event = validate_event(operation)
        clean = self._attributes(agent, subject_id, outcome, attrs)
        entry: AuditEntry | None = None
        failure: AuditWriteError | None = None
        if self._log is not None:
            try:
                entry = self._log.append(event, clean)
            except AuditWriteError as exc:
                failure = exc
        if self._telemetry is not None:
            span_attrs = span_attributes(event, clean, entry.seq if entry else None)
            error: str | None = None
            if outcome == "error":
                error = str(clean.get("error.type", "error"))
            if failure is not None:
                span_attrs["governed_memory.audit.error"] = type(failure).__name__
                error = "audit log write failed"
            self._telemetry.emit(span_name(event), span_attrs, error=error)
        if failure is not None:
            raise failure
        return entry

    def _attributes(
        self, agent: str | None, subject_id: str | None, outcome: str, attrs: Mapping[str, Any]
    ) -> dict[str, AttrValue]:
        """The entry's attributes: keyed hashes, and the raw values only as the policy allows."""
        return audit_attributes(
            agent=agent,
            subject_id=subject_id,
            outcome=outcome,
            attrs=attrs,
            key=self._key,
            include_content=self._include_content,
            include_subject_ids=self._include_subject_ids,
        )

    def record_with(
        self,
        operation: str,
        write: Callable[[AuditLogLike, str, dict[str, Any]], AuditEntry | None],
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> bool:
        """Record one operation whose own write also writes its log entry, atomically.

        ``write(log, event, attributes)`` does the operation and appends the entry
        to ``log`` in the same transaction (a database store's
        ``append_audited``), returning the committed entry; or writes nothing and
        returns None when it cannot. Returns whether it wrote (then the span is
        emitted too); False means nothing was done: do the operation, then
        :meth:`record`. Without a log, always False.

        Raises:
            Exception: what ``write`` raised (nothing was recorded).
        """
        if self._log is None:
            return False
        event = validate_event(operation)
        clean = self._attributes(agent, subject_id, outcome, attrs)
        entry = write(self._log, event, clean)
        if entry is None:
            return False
        if self._telemetry is not None:
            error = str(clean.get("error.type", "error")) if outcome == "error" else None
            self._telemetry.emit(
                span_name(event), span_attributes(event, clean, entry.seq), error=error
            )
        return True

    # -- keyed hashes (for auditors) -------------------------------------------

    def agent_hash(self, agent: str) -> str:
        """The keyed hash recorded for ``agent`` (``agent.hash``)."""
        return self._key.pseudonym("agent", agent)

    def subject_hash(self, subject_id: str) -> str:
        """The keyed hash recorded for ``subject_id`` (``subject.hash``, ``actor.hash``)."""
        return self._key.pseudonym("subject", subject_id)

    def hold_hash(self, hold_id: str) -> str:
        """The keyed hash recorded for a legal hold id (``hold.hash``)."""
        return self._key.pseudonym("hold", hold_id)

    def entries_for(
        self, agent: str | None = None, subject_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Log entries about ``agent`` and/or ``subject_id`` (as dicts), oldest first.

        An entry matches a subject when it is the subject (``subject.hash``),
        the actor, or among ``subject.hashes``; both given means both match.
        """
        if self._log is None:
            return []
        # Under every version of the key: entries before a key change hold the old hashes.
        keys = [self._key, *self._previous]
        wanted_agent = {k.pseudonym("agent", agent) for k in keys} if agent is not None else None
        wanted_subject = (
            {k.pseudonym("subject", subject_id) for k in keys} if subject_id is not None else None
        )
        found = []
        for entry in self._log.entries():
            attrs = entry.attrs
            if wanted_agent is not None and not _mentions(attrs, wanted_agent, "agent.hashes"):
                continue
            if wanted_subject is not None and not _mentions(
                attrs, wanted_subject, "subject.hashes"
            ):
                continue
            found.append(entry.to_dict())
        return found

    # -- maintenance -------------------------------------------------------------

    def verify(self, *previous_keys: AuditKey) -> VerifyReport:
        """Verify the log with this trail's key (and ``previous_keys``).

        Raises:
            ConfigurationError: there is no log (audit is not enabled).
        """
        return verify_storage(self._require_log(), [self._key, *self._previous, *previous_keys])

    def purge_segments(self, names: Iterable[str]) -> list[str]:
        """Remove whole old audit segments, recorded in the chain first (``AuditStorage.purge_segments``)."""
        return self._require_log().purge_segments(names)

    def purge_expired(
        self, retention: RetentionPolicy, *, now: _dt.datetime | None = None
    ) -> list[str]:
        """Purge the segments older than ``retention.audit_max_age`` (never under ``audit_min_age``)."""
        log = self._require_log()
        if now is None:  # the log's own clock, as its entries' time
            now = log.clock.now()
        return log.purge_segments(
            log.expired_segments(
                now=now, max_age=retention.audit_max_age, min_age=retention.audit_min_age
            )
        )

    def checkpoint(self, signer: SigningKeyProvider) -> Checkpoint:
        """Sign the chain head and record it as an ``audit.checkpoint`` entry (docs/evidence.md)."""
        from ._checkpoint import write_checkpoint

        return write_checkpoint(self._require_log(), signer)

    def _require_log(self) -> AuditLogLike:
        if self._log is None:
            raise ConfigurationError(
                "this audit trail has no log: the policy does not enable audit; set "
                "audit.enabled = true in the policy"
            )
        return self._log

    def close(self) -> None:
        """Release what the log holds open (file descriptors)."""
        if self._log is not None:
            self._log.close()

    def __repr__(self) -> str:
        where = str(getattr(self._log, "folder", self._log)) if self._log else None
        return f"AuditTrail(key_id={self._key.key_id!r}, log={where!r})"


def _mentions(attrs: Any, wanted: set[str], list_key: str) -> bool:
    if any(attrs.get(k) in wanted for k in _MATCH_KEYS):
        return True
    values = attrs.get(list_key)
    return isinstance(values, list) and any(v in wanted for v in values)
